"""The stateful-operator scale-out experiments, rerun in :mod:`skewlab.sim.scaleout`.

``scaleout-ramp`` (seed Fig. 10, 11, 13, 14), ``scaleout-threshold-sweep`` (Fig. 12) and
``scaleout-alternating`` (Fig. 15); claims in :mod:`skewlab.experiments.scaleout_claims`.
Choices where the seed is silent (every report's ``setup`` repeats them): docs/experiments.md.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport
from skewlab.experiments import scaleout_claims as claims
from skewlab.report.table import format_table
from skewlab.sim.scaleout import ScaleOutSimConfig, simulate_scaleout
from skewlab.sim.scaleout_result import ScaleOutResult
from skewlab.state.policies import PolicyConfig, make_policy
from skewlab.state.score import ThresholdConfig

__all__ = ["EXPERIMENTS", "REPRODUCE_SCALE", "policy_for", "sim_config"]

log = logging.getLogger(__name__)

POLICIES = ("checkpointing", "active-backup", "restart")
PAPER: dict[str, str] = {
    "checkpointing": "latency a bit above active backup (replays buffers); fewer resources",
    "active-backup": "lowest latency (nearly zero during scale-out); more resources",
    "restart": "latency grows fast until restart; throughput ~0 at each restart",
}
SWEEP = (0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 64.0, 66.0, 68.0)
"""Alarming thresholds of Fig. 12, from 0 (always on) to just below scale_out (70)."""
SLOW_SETUP_S = 20.0
"""A second secondary set-up time for Fig. 12 (full-scale s, a Storm redeploy's)."""
FULL_STEPS = 200_000
MIN_STEPS = 20_000
REPRODUCE_SCALE = 1.0
"""Recommended scale for ``skewlab reproduce``: the paper's durations at 10 ms steps,
about 50 s of CPU for the three experiments (0.25: 40 ms steps, about 15 s)."""
PAPER_ALT: dict[str, str] = {
    "checkpointing": "low latency: state stored / retrieved only near a bottleneck",
    "active-backup": "low latency: state stored / retrieved only near a bottleneck",
    "restart": "more latency: Storm checkpoints every second",
    "restart, free checkpoints": "(not in the paper: restart with snapshots costing 0)",
}
ALTERNATE = {"low": 200.0, "high": 400.0, "period_s": 300.0, "duration_s": 1800.0}
"""Fig. 15: 30 min, low / high input every 5 min; high = the ramp's first doubling."""


def policy_for(name: str, scale: float, **params: Any) -> PolicyConfig:
    """Policy ``name`` with its durations (interval, cool-down) compressed by ``scale``."""
    base = make_policy(name, **params)
    changes = {"cooldown_s": base.cooldown_s * scale}
    if hasattr(base, "interval_s"):
        changes["interval_s"] = base.interval_s * scale
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def sim_config(policy: PolicyConfig, args: ExperimentArgs, **params: Any) -> ScaleOutSimConfig:
    """The seed's setup at ``args.scale``, in about ``FULL_STEPS * scale`` steps (at least
    ``MIN_STEPS``, at most ``FULL_STEPS``), a whole number of them per measurement (so a
    1 s checkpoint interval is due at every 1 s measurement): at scale 1 a step is 10 ms
    of a 2000 s run."""
    cfg = ScaleOutSimConfig(policy=policy, seed=args.seed, **params).scaled(args.scale)
    steps = min(FULL_STEPS, max(MIN_STEPS, int(FULL_STEPS * args.scale)))
    per_measure = math.ceil(cfg.measure_s / (cfg.duration_s / steps))
    return dataclasses.replace(cfg, dt_s=cfg.measure_s / per_measure)


def _say(args: ExperimentArgs, msg: str) -> None:
    if args.progress is not None:
        args.progress(msg)
    log.info(msg)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _plot_series(
    results: dict[str, ScaleOutResult], attr: str, ylabel: str, path: Path, log_y: bool = False
) -> Path:
    fig, ax = _pyplot().subplots(figsize=(8, 4))
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
    return _save(fig, path)


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}"


def _min_share(r: ScaleOutResult) -> float:
    """Lowest throughput / input rate over the run's measurements (after the first)."""
    return float(np.min(r.throughput[1:] / r.rate[1:]))


def _dips(r: ScaleOutResult, below: float = 0.05) -> int:
    """Runs of consecutive measurements (after the first) whose throughput is under ``below``
    of the input rate: how often the processing stopped."""
    low = (r.throughput[1:] / r.rate[1:]) < below
    return int(np.count_nonzero(low[1:] & ~low[:-1]) + (1 if low.size and low[0] else 0))


def scaleout_ramp(args: ExperimentArgs) -> ExperimentReport:
    """Seed Fig. 10/11/13/14: the load ramp under checkpointing, active backup and restart."""
    results: dict[str, ScaleOutResult] = {}
    cfg: ScaleOutSimConfig | None = None
    for name in POLICIES:
        _say(args, name)
        cfg = sim_config(policy_for(name, args.scale), args)
        results[name] = simulate_scaleout(cfg)
    assert cfg is not None
    f = args.scale
    rows: list[dict[str, Any]] = []
    table: list[list[str]] = []
    for name, r in results.items():
        take = r.takeovers()
        row: dict[str, Any] = {
            "policy": name,
            "scale_outs": len(take),
            "max_instances": float(r.instances.max()),
            "instance_seconds": r.instance_seconds / f,
            "backup_share": r.backup_share,
            "latency_mean_s": r.latency_mean_s / f,
            "latency_p99_s": r.latency_p99_s / f,
            "max_pause_s": r.max_pause_s / f,
            "takeover_mean_s": float(np.mean(take)) / f if take else 0.0,
            "min_throughput_share": _min_share(r),
            "throughput_dips": _dips(r),
            "fairness": r.fairness,
            "exact": abs(r.processed - r.arrived) < 1e-6 * max(r.arrived, 1.0),
        }
        rows.append(row)
        table.append(
            [
                name,
                str(row["scale_outs"]),
                f"{row['max_instances']:.0f}",
                f"{row['instance_seconds']:,.0f}",
                f"{r.backup_share:.0%}",
                _ms(row["latency_mean_s"]),
                _ms(row["latency_p99_s"]),
                f"{row['max_pause_s']:.2f}",
                f"{row['takeover_mean_s']:.1f}",
                f"{row['min_throughput_share']:.0%}",
                f"{r.fairness:.3f}",
                "yes" if row["exact"] else "NO",
                PAPER[name],
            ]
        )
    doublings = round(np.log(cfg.rate(cfg.duration_s) / cfg.base_rate) / np.log(cfg.growth))
    found = claims.ramp_claims({r["policy"]: r for r in rows}, doublings)
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
    setup = (
        f"one stateful operator, 2 instances of {cfg.service_rate * f:g} tuples/s, "
        f"{cfg.state_keys:,} keys of state; input {cfg.base_rate * f:g} tuples/s doubling "
        f"continuously every {cfg.period_s / f:g} s for {cfg.duration_s / f:g} s "
        f"({doublings} doublings); thresholds 25 / 45 / 70, x2 per scale-out\n"
        "checkpointing: every 10 s from alarming; active backup: secondaries from alarming; "
        "restart (Storm 1.x): checkpoint every 1 s, stop + redeploy (20 s) at scale_out\n"
        f"instance start 2 s; fluid model, {cfg.dt_s / f * 1e3:g} ms steps (scale {f:g})"
    )
    return ExperimentReport(
        title="Stateful scale-out under a doubling load (seed Fig. 10, 11, 13, 14)",
        table=format_table(headers, table) + "\ntimes in full-scale seconds",
        plots=plots,
        params={
            "base_rate": cfg.base_rate * f,
            "period_s": cfg.period_s / f,
            "service_rate": cfg.service_rate * f,
            "state_keys": cfg.state_keys,
            "scale": f,
        },
        metrics={
            **{f"{r['policy']}_latency_p99_s": r["latency_p99_s"] for r in rows},
            **{f"{r['policy']}_instance_seconds": r["instance_seconds"] for r in rows},
            **{f"{r['policy']}_fairness": r["fairness"] for r in rows},
        },
        rows=rows,
        claims=found,
        setup=setup,
    )


def _sweep_run(args: ExperimentArgs, alarming: float, setup_s: float) -> dict[str, Any]:
    """Active backup at one alarming threshold; hysteresis narrowed to fit below scale_out."""
    thr = ThresholdConfig(scale_in=0.0, alarming=alarming, hysteresis=min(5.0, (70 - alarming) / 2))
    cfg = sim_config(policy_for("active-backup", args.scale, thresholds=thr), args)
    r = simulate_scaleout(dataclasses.replace(cfg, startup_s=setup_s * args.scale))
    take = r.takeovers()
    return {
        "backup_share": r.backup_share,
        "instance_seconds": r.instance_seconds / args.scale,
        "latency_p99_s": r.latency_p99_s / args.scale,
        "takeover_max_s": max(take) / args.scale if take else float("nan"),
        "scale_outs": len(take),
    }


def scaleout_threshold_sweep(args: ExperimentArgs) -> ExperimentReport:
    """Seed Fig. 12: share of the run with backups running, alarming 0 .. near scale_out;
    the take-over wait (from the scale-out decision) shows where set-up comes too late."""
    base_setup = ScaleOutSimConfig(policy=make_policy("active-backup")).startup_s
    rows: list[dict[str, Any]] = []
    table: list[list[str]] = []
    for alarming in SWEEP:
        _say(args, f"alarming {alarming:g}")
        fast, slow = (
            _sweep_run(args, alarming, base_setup),
            _sweep_run(args, alarming, SLOW_SETUP_S),
        )
        rows.append({"alarming": alarming, **fast, **{f"slow_{k}": v for k, v in slow.items()}})
        table.append(
            [
                f"{alarming:g}",
                f"{fast['backup_share']:.1%}",
                f"{fast['instance_seconds']:,.0f}",
                _ms(fast["latency_p99_s"]),
                f"{fast['takeover_max_s']:.2f}",
                f"{slow['backup_share']:.1%}",
                _ms(slow["latency_p99_s"]),
                f"{slow['takeover_max_s']:.2f}",
                "100% (always on)"
                if alarming == 0
                else ("falls as threshold rises" if alarming < 60 else "low; set-up may be late"),
            ]
        )
    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [r["alarming"] for r in rows]
    for prefix, label in (
        ("", f"set-up {base_setup:g} s"),
        ("slow_", f"set-up {SLOW_SETUP_S:g} s"),
    ):
        ax.plot(xs, [100 * r[prefix + "backup_share"] for r in rows], marker="o", label=label)
        bx.plot(xs, [r[prefix + "takeover_max_s"] for r in rows], marker="o", label=label)
    ax.set_ylabel("% of time backups run")
    bx.set_ylabel("take-over wait after scale-out decision (s)")
    for a in (ax, bx):
        a.set_xlabel("alarming_threshold")
        a.grid(alpha=0.3)
        a.legend()
    path = _save(fig, Path(args.out) / "scaleout_threshold_sweep.png")
    s1, s2 = f"{base_setup:g} s", f"{SLOW_SETUP_S:g} s"
    headers = [
        "alarming",
        f"backups run ({s1})",
        "inst-s",
        "lat p99 ms",
        "take-over wait s",
        f"backups run ({s2})",
        "lat p99 ms",
        "take-over wait s",
        "paper",
    ]
    setup = (
        "active backup on the Fig. 10 ramp (200 tuples/s doubling every 500 s for 2000 s); "
        f"scale_out 70, alarming {SWEEP[0]:g}..{SWEEP[-1]:g}, hysteresis min(5, "
        "(70 - alarming) / 2), scale-in off\n"
        f"secondary set-up (start + state copy) {s1} (default) and {s2}; the take-over wait "
        "runs from the scale-out decision to the secondaries serving the output"
    )
    return ExperimentReport(
        title="Effect of alarming_threshold on backup running time (seed Fig. 12)",
        table=format_table(headers, table) + "\ntimes in full-scale seconds",
        plots=[path],
        params={"scale_out": 70.0, "scale": args.scale, "thresholds": list(SWEEP)},
        metrics={
            f"backup_share_at_{a:g}": r["backup_share"] for a, r in zip(SWEEP, rows, strict=True)
        },
        rows=rows,
        claims=claims.sweep_claims(rows, base_setup, SLOW_SETUP_S),
        setup=setup,
    )


def scaleout_alternating(args: ExperimentArgs) -> ExperimentReport:
    """Seed Fig. 15: latency and state-management work under low / high load every 5 min.

    As in the seed, scale-in is off (the seed leaves it to future work): each
    policy scales out once, at the first high phase; the runs then differ by
    the state management they keep doing. ``restart, free checkpoints`` is the
    restart baseline with snapshots costing nothing, to separate the latency
    of Storm's per-second checkpoints from that of its restart.
    """
    alt = ALTERNATE
    variants: dict[str, tuple[str, dict[str, Any]]] = {name: (name, {}) for name in POLICIES}
    variants["restart, free checkpoints"] = ("restart", {"snapshot_keys_per_s": 1e15})
    results: dict[str, ScaleOutResult] = {}
    for label, (name, extra) in variants.items():
        _say(args, label)
        cfg = sim_config(
            policy_for(name, args.scale, scale_in=False),
            args,
            base_rate=alt["low"],
            growth=alt["high"] / alt["low"],
            period_s=alt["period_s"],
            duration_s=alt["duration_s"],
            ramp="alternate",
            **extra,
        )
        results[label] = simulate_scaleout(cfg)
    f = args.scale
    rows: list[dict[str, Any]] = []
    table: list[list[str]] = []
    for label, r in results.items():
        row: dict[str, Any] = {
            "policy": label,
            "scale_outs": len(r.takeovers()),
            "checkpoints": r.checkpoints,
            "state_work_s": r.state_work_s / f,
            "instance_seconds": r.instance_seconds / f,
            "latency_mean_s": r.latency_mean_s / f,
            "latency_p99_s": r.latency_p99_s / f,
            "max_pause_s": r.max_pause_s / f,
            "exact": abs(r.processed - r.arrived) < 1e-6 * max(r.arrived, 1.0),
        }
        rows.append(row)
        table.append(
            [
                label,
                str(row["scale_outs"]),
                str(r.checkpoints),
                f"{row['state_work_s']:.2f}",
                f"{row['instance_seconds']:,.0f}",
                _ms(row["latency_mean_s"]),
                _ms(row["latency_p99_s"]),
                f"{row['max_pause_s']:.2f}",
                "yes" if row["exact"] else "NO",
                PAPER_ALT[label],
            ]
        )
    out = Path(args.out)
    latency = _plot_series(
        results, "latency_s", "latency (s)", out / "scaleout_alt_latency.png", True
    )
    fig, ax = _pyplot().subplots(figsize=(7, 4))
    ax.bar([r["policy"] for r in rows], [r["state_work_s"] for r in rows])
    ax.set_ylabel("state management (instance-seconds)")
    ax.tick_params(axis="x", labelrotation=15)
    work = _save(fig, out / "scaleout_alt_state_work.png")
    headers = [
        "policy",
        "scale-outs",
        "checkpoints",
        "state work inst-s",
        "inst-s",
        "lat mean ms",
        "lat p99 ms",
        "max pause s",
        "exact",
        "paper",
    ]
    setup = (
        f"{alt['duration_s'] / 60:g} min, input {alt['low']:g} / {alt['high']:g} tuples/s "
        f"alternating every {alt['period_s'] / 60:g} min (low first); 2 instances of 150 "
        "tuples/s, 100,000 keys; thresholds 25 / 45 / 70, scale-in off (as in the seed)\n"
        "state work = checkpoint snapshot stalls (100,000 keys at 2M keys/s per checkpoint) "
        "+ state loading; restart checkpoints every 1 s (Storm), checkpointing every 10 s "
        "from alarming"
    )
    return ExperimentReport(
        title="State-management overhead under alternating load (seed Fig. 15)",
        table=format_table(headers, table) + "\ntimes in full-scale seconds",
        plots=[latency, work],
        params={**alt, "scale": f},
        metrics={
            **{f"{r['policy']}_latency_mean_s": r["latency_mean_s"] for r in rows},
            **{f"{r['policy']}_state_work_s": r["state_work_s"] for r in rows},
        },
        rows=rows,
        claims=claims.alternating_claims({r["policy"]: r for r in rows}),
        setup=setup,
    )


EXPERIMENTS: dict[str, Experiment] = {
    "scaleout-ramp": scaleout_ramp,
    "scaleout-threshold-sweep": scaleout_threshold_sweep,
    "scaleout-alternating": scaleout_alternating,
}
