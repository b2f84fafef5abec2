"""The stateful-operator scale-out experiments, rerun in :mod:`skewlab.sim.scaleout`.

==============================  ======================================================
name                            what it reproduces
==============================  ======================================================
``scaleout-ramp``               seed Fig. 10, 11, 13, 14: instances, latency and
                                throughput under a load doubling every 500 s, for
                                checkpointing, active backup and the restart baseline
``scaleout-threshold-sweep``    seed Fig. 12: % of time backups run vs alarming_threshold
==============================  ======================================================

Choices where the seed is silent (the tables say them again): one instance
serves 150 tuples/s, so the 2 starting instances run at 67% of capacity under
the initial 200 tuples/s; the rate grows continuously by 2x per 500 s for
2000 s (4 doublings: 2 -> 32 instances); 100,000 keys of state; starting an
instance takes 2 s, a Storm topology redeploy 20 s; checkpoints every 10 s
from alarming (checkpointing) or every 1 s always (restart baseline, Storm's
default); thresholds 25 / 45 / 70 (:mod:`skewlab.state.score`). ``scale``
compresses time: every duration is multiplied by it and every rate divided
by it (:meth:`~skewlab.sim.scaleout.ScaleOutSimConfig.scaled`), so a tiny run
has the shape of the full one; tables show full-scale seconds.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport
from skewlab.report import format_table
from skewlab.sim.scaleout import ScaleOutResult, ScaleOutSimConfig, simulate_scaleout
from skewlab.state.policies import PolicyConfig, make_policy
from skewlab.state.score import ThresholdConfig

__all__ = ["EXPERIMENTS", "policy_for", "sim_config"]

log = logging.getLogger(__name__)

POLICIES = ("checkpointing", "active-backup", "restart")
PAPER: dict[str, str] = {
    "checkpointing": "latency a bit above active backup (replays buffers); fewer resources",
    "active-backup": "lowest latency (nearly zero during scale-out); more resources",
    "restart": "latency grows fast until restart; throughput ~0 at each restart",
}
SWEEP = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 64.0)
FULL_STEPS = 40_000


def policy_for(name: str, scale: float, **params: Any) -> PolicyConfig:
    """Policy ``name`` with its durations (interval, cool-down) compressed by ``scale``."""
    base = make_policy(name, **params)
    changes = {"cooldown_s": base.cooldown_s * scale}
    if hasattr(base, "interval_s"):
        changes["interval_s"] = base.interval_s * scale
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def sim_config(policy: PolicyConfig, args: ExperimentArgs, **params: Any) -> ScaleOutSimConfig:
    """The seed's ramp at ``args.scale``; at most 40,000 steps, at least 20,000."""
    cfg = ScaleOutSimConfig(policy=policy, seed=args.seed, **params).scaled(args.scale)
    steps = min(FULL_STEPS, max(20_000, int(FULL_STEPS * args.scale)))
    return dataclasses.replace(cfg, dt_s=min(cfg.duration_s / steps, cfg.measure_s))


def _say(args: ExperimentArgs, msg: str) -> None:
    if args.progress is not None:
        args.progress(msg)
    log.info(msg)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_series(
    results: dict[str, ScaleOutResult], attr: str, ylabel: str, path: Path, log_y: bool = False
) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4))
    for name, r in results.items():
        ax.plot(r.t, getattr(r, attr), label=name, linewidth=1)
    if attr == "throughput":
        first = next(iter(results.values()))
        ax.plot(first.t, first.rate, "k:", label="input rate", linewidth=1)
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.grid(alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}"


def scaleout_ramp(args: ExperimentArgs) -> ExperimentReport:
    """Seed Fig. 10/11/13/14: the load ramp under checkpointing, active backup and restart."""
    results: dict[str, ScaleOutResult] = {}
    cfg: ScaleOutSimConfig | None = None
    for name in POLICIES:
        _say(args, name)
        cfg = sim_config(policy_for(name, args.scale), args)
        results[name] = simulate_scaleout(cfg)
    assert cfg is not None
    rows: list[dict[str, Any]] = []
    table: list[list[str]] = []
    for name, r in results.items():
        outs = sum(e.kind == "scale-out" for e in r.events)
        take = r.takeover_s
        row: dict[str, Any] = {
            "policy": name,
            "scale_outs": outs,
            "max_instances": float(r.instances.max()),
            "instance_seconds": r.instance_seconds,
            "backup_share": r.backup_share,
            "latency_mean_s": r.latency_mean_s,
            "latency_p99_s": r.latency_p99_s,
            "max_pause_s": r.max_pause_s,
            "takeover_mean_s": float(np.mean(take)) if take else 0.0,
            "min_throughput_share": float(np.min(r.throughput[1:] / r.rate[1:])),
            "fairness": r.fairness,
            "exact": abs(r.processed - r.arrived) < 1e-6 * max(r.arrived, 1.0),
        }
        rows.append(row)
        table.append(
            [
                name,
                str(outs),
                f"{row['max_instances']:.0f}",
                f"{r.instance_seconds / args.scale:,.0f}",
                f"{r.backup_share:.0%}",
                _ms(r.latency_mean_s / args.scale),
                _ms(r.latency_p99_s / args.scale),
                f"{r.max_pause_s / args.scale:.2f}",
                f"{row['takeover_mean_s'] / args.scale:.1f}",
                f"{row['min_throughput_share']:.0%}",
                f"{r.fairness:.3f}",
                "yes" if row["exact"] else "NO",
                PAPER[name],
            ]
        )
    by = {r["policy"]: r for r in rows}
    ab_lowest = all(
        by["active-backup"]["latency_p99_s"] <= by[n]["latency_p99_s"] for n in POLICIES
    )
    cp_fewer = by["checkpointing"]["instance_seconds"] < by["active-backup"]["instance_seconds"]
    headers = [
        "policy",
        "scale-outs",
        "max inst",
        "inst-s",
        "backup",
        "lat mean ms",
        "lat p99 ms",
        "max pause s",
        "take-over s",
        "min thr/rate",
        "fd",
        "exact",
        "paper",
    ]
    out = Path(args.out)
    plots = [
        _plot_series(results, "instances", "running instances", out / "scaleout_instances.png"),
        _plot_series(results, "latency_s", "latency (s)", out / "scaleout_latency.png", True),
        _plot_series(results, "throughput", "tuples/s", out / "scaleout_throughput.png"),
    ]
    note = (
        f"\nrate {cfg.base_rate * args.scale:g}/s x{cfg.growth:g} per "
        f"{cfg.period_s / args.scale:g} s "
        f"({cfg.ramp}), {cfg.duration_s / args.scale:g} s, {cfg.service_rate * args.scale:g} "
        "tuples/s per "
        f"instance, {cfg.state_keys:,} keys; times in full-scale seconds (scale {args.scale:g})"
        f"\nseed claim 'active backup lowest latency': {'holds' if ab_lowest else 'does NOT hold'}"
        f"\nseed claim 'checkpointing fewer resources than active backup': "
        f"{'holds' if cp_fewer else 'does NOT hold'}"
    )
    return ExperimentReport(
        title="Stateful scale-out under a doubling load (seed Fig. 10, 11, 13, 14)",
        table=format_table(headers, table) + note,
        plots=plots,
        params={
            "base_rate": cfg.base_rate * args.scale,
            "period_s": cfg.period_s / args.scale,
            "service_rate": cfg.service_rate * args.scale,
            "state_keys": cfg.state_keys,
            "scale": args.scale,
        },
        metrics={
            **{f"{r['policy']}_latency_p99_s": r["latency_p99_s"] / args.scale for r in rows},
            **{f"{r['policy']}_instance_seconds": r["instance_seconds"] / args.scale for r in rows},
            **{f"{r['policy']}_fairness": r["fairness"] for r in rows},
            "claim_active_backup_lowest_latency": float(ab_lowest),
            "claim_checkpointing_fewer_resources": float(cp_fewer),
        },
        rows=rows,
    )


def scaleout_threshold_sweep(args: ExperimentArgs) -> ExperimentReport:
    """Seed Fig. 12: share of the run with backups running, alarming 0 .. near scale_out."""
    rows: list[dict[str, Any]] = []
    table: list[list[str]] = []
    for alarming in SWEEP:
        _say(args, f"alarming {alarming:g}")
        thr = ThresholdConfig(scale_in=0.0, alarming=alarming)
        r = simulate_scaleout(
            sim_config(policy_for("active-backup", args.scale, thresholds=thr), args)
        )
        take = r.takeover_s
        rows.append(
            {
                "alarming": alarming,
                "backup_share": r.backup_share,
                "instance_seconds": r.instance_seconds,
                "latency_p99_s": r.latency_p99_s,
                "max_pause_s": r.max_pause_s,
                "takeover_max_s": max(take) if take else 0.0,
            }
        )
        table.append(
            [
                f"{alarming:g}",
                f"{r.backup_share:.0%}",
                f"{r.instance_seconds / args.scale:,.0f}",
                _ms(r.latency_p99_s / args.scale),
                f"{r.max_pause_s / args.scale:.2f}",
                f"{rows[-1]['takeover_max_s'] / args.scale:.2f}",
                "100% (always on)"
                if alarming == 0
                else ("falls as threshold rises" if alarming < 60 else "low; set-up may be late"),
            ]
        )
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([r["alarming"] for r in rows], [100 * r["backup_share"] for r in rows], marker="o")
    ax.set_xlabel("alarming_threshold")
    ax.set_ylabel("% of time backups run")
    ax.grid(alpha=0.3)
    path = Path(args.out) / "scaleout_threshold_sweep.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    headers = [
        "alarming",
        "backups run",
        "inst-s",
        "lat p99 ms",
        "max pause s",
        "take-over s",
        "paper",
    ]
    note = "\nactive backup, scale_out 70, hysteresis 5, scale-in off; times in full-scale seconds"
    return ExperimentReport(
        title="Effect of alarming_threshold on backup running time (seed Fig. 12)",
        table=format_table(headers, table) + note,
        plots=[path],
        params={"scale_out": 70.0, "scale": args.scale, "thresholds": list(SWEEP)},
        metrics={
            f"backup_share_at_{a:g}": r["backup_share"] for a, r in zip(SWEEP, rows, strict=True)
        },
        rows=rows,
    )


EXPERIMENTS: dict[str, Experiment] = {
    "scaleout-ramp": scaleout_ramp,
    "scaleout-threshold-sweep": scaleout_threshold_sweep,
}
