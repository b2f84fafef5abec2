"""The SMALOPS experiments, rerun in the simulator (``skewlab experiment NAME``).

``smalops-latency`` reproduces SMALOPS Fig. 7/8 (p99 queueing delay, hash vs
SMALOPS, 10..50 us), ``smalops-threshold`` Fig. 9 (the heavy threshold swept at
50 us) and ``smalops-dynamic`` Fig. 10 (keys shifted every period, 20 us).

Setup where the seed is silent: 8 partitions, the Zipf workload's 10,000 keys,
a fixed arrival rate at which the hottest hash partition runs at 90% utilisation
with 50 us service ("just before the system is overloaded"), 5 minutes of event
time at ``scale=1``; the run lasts ``300 * scale`` seconds and the decision
interval is ``min(10 s, run / 10)``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport
from skewlab.grouping import make_grouping
from skewlab.keys import KeyVocab
from skewlab.rebalance import make_rebalancer
from skewlab.report import format_table
from skewlab.report.plots import CdfCurve, plot_cdf_curves
from skewlab.sim import ConstantService, SimConfig, SimResult, simulate
from skewlab.sim.rebalance_hook import RebalanceHook
from skewlab.workload import DynamicWorkload, Workload, ZipfWorkload
from skewlab.workload._common import zipf_weights

__all__ = ["EXPERIMENTS"]

log = logging.getLogger(__name__)

S_PARTITIONS, S_KEYS, S_RUN_S, S_UTIL = 8, 10_000, 300.0, 0.9
SERVICES_US = (10, 20, 30, 40, 50)
PAPER_P99_CHANGE = {20: "-57%", 50: "-73%"}
THRESHOLDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
LOW_THRESHOLD = 0.01
"""A second SMALOPS threshold shown beside the paper's 10%, at which Zipf keys are heavy."""


def _pct(new: float, old: float) -> str:
    return f"{100.0 * (new - old) / old:+.0f}%" if old > 0 else "n/a"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f}"


def _say(args: ExperimentArgs, msg: str) -> None:
    if args.progress is not None:
        args.progress(msg)
    log.info(msg)


def _hottest_share(keys: int, s: float, v: float, workers: int) -> float:
    """Largest expected share of one hash partition for SMALOPS' Zipf (sets the rate)."""
    p = zipf_weights(keys, s, v)
    p /= p.sum()
    where = KeyVocab([f"k{i}" for i in range(keys)]).buckets(13, workers)
    return float(np.bincount(where, weights=p, minlength=workers).max())


def _smalops_setup(args: ExperimentArgs) -> tuple[float, int, float]:
    """``(rate, events, interval_s)`` of one SMALOPS run at ``args.scale``."""
    rate = S_UTIL / (50e-6 * _hottest_share(S_KEYS, 1.1, 2.72, S_PARTITIONS))
    run_s = S_RUN_S * args.scale
    return rate, max(int(rate * run_s), 1000), min(10.0, run_s / 10.0)


def _run_smalops(
    args: ExperimentArgs,
    workload: Workload,
    service_s: float,
    threshold: float | None,
    rate: float,
    events: int,
    interval_s: float,
) -> tuple[SimResult, RebalanceHook]:
    """One run: KEY grouping plus SMALOPS at ``threshold`` (``None``: hash alone)."""
    if threshold is None:
        rb = make_rebalancer("none", S_PARTITIONS).build()
    else:
        rb = make_rebalancer(
            "smalops", S_PARTITIONS, threshold=threshold, t_msg=service_s, seed=args.seed
        ).build()
    hook = RebalanceHook(rb, interval_s=interval_s)
    cfg = SimConfig(service=ConstantService(service_s), window_s=interval_s, seed=args.seed)
    result = simulate(
        make_grouping("key", S_PARTITIONS), workload, events, rate, config=cfg, hooks=[hook]
    )
    return result, hook


def _cdf(label: str, r: SimResult) -> CdfCurve:
    return CdfCurve(label, r.delay_cdf[0], r.delay_cdf[1])


def smalops_latency(args: ExperimentArgs) -> ExperimentReport:
    """SMALOPS Fig. 7/8: p99 queueing delay of hash vs SMALOPS for 10..50 us per message."""
    rate, events, interval = _smalops_setup(args)
    wl = ZipfWorkload(seed=args.seed, keys=S_KEYS)
    rows, table, plots, metrics = [], [], [], {}
    for us in SERVICES_US:
        _say(args, f"{us} us")
        svc = us * 1e-6
        base, _ = _run_smalops(args, wl, svc, None, rate, events, interval)
        paper, _ = _run_smalops(args, wl, svc, 0.1, rate, events, interval)
        low, _ = _run_smalops(args, wl, svc, LOW_THRESHOLD, rate, events, interval)
        b, p, lo = base.queue_delay.p99, paper.queue_delay.p99, low.queue_delay.p99
        table.append(
            [
                f"{us}",
                _us(b),
                _us(p),
                _pct(p, b),
                _us(lo),
                _pct(lo, b),
                PAPER_P99_CHANGE.get(us, "-"),
            ]
        )
        rows.append(
            {
                "service_us": us,
                "hash_p99_s": b,
                "smalops_p99_s": p,
                "smalops_low_p99_s": lo,
                "paper_change": PAPER_P99_CHANGE.get(us, ""),
            }
        )
        metrics[f"p99_change_pct_{us}us"] = 100.0 * (p - b) / b if b > 0 else 0.0
        metrics[f"p99_change_low_pct_{us}us"] = 100.0 * (lo - b) / b if b > 0 else 0.0
        if us in PAPER_P99_CHANGE:
            plots.append(
                plot_cdf_curves(
                    [_cdf("hash", base), _cdf("smalops 10%", paper), _cdf("smalops 1%", low)],
                    Path(args.out) / f"smalops_delay_cdf_{us}us.png",
                    "queueing delay (s)",
                    f"queueing delay CDF at {us} us/message",
                )
            )
    headers = [
        "service us",
        "hash p99 us",
        "smalops(10%) p99 us",
        "ours",
        "smalops(1%) p99 us",
        "ours(1%)",
        "paper",
    ]
    note = (
        f"\n{S_PARTITIONS} partitions, zipf s=1.1 v=2.72 over {S_KEYS} keys, {rate:,.0f} ev/s, "
        f"{events:,} events, decision interval {interval:g}s; 'ours'/'paper' = p99 change vs hash"
    )
    return ExperimentReport(
        title="SMALOPS p99 queueing delay, hash vs SMALOPS (Fig. 8)",
        table=format_table(headers, table) + note,
        plots=plots,
        params={
            "partitions": S_PARTITIONS,
            "keys": S_KEYS,
            "rate": rate,
            "events": events,
            "interval_s": interval,
        },
        metrics=metrics,
        rows=rows,
    )


def smalops_threshold(args: ExperimentArgs) -> ExperimentReport:
    """SMALOPS Fig. 9: p99 at 50 us as the heavy threshold (share of a window) varies."""
    rate, events, interval = _smalops_setup(args)
    wl = ZipfWorkload(seed=args.seed, keys=S_KEYS)
    svc = 50e-6
    base, _ = _run_smalops(args, wl, svc, None, rate, events, interval)
    table = [["hash", _us(base.queue_delay.p99), "+0%", "0", "0", "-"]]
    rows: list[dict[str, Any]] = []
    curves = [_cdf("hash", base)]
    for thr in THRESHOLDS:
        _say(args, f"threshold {thr:g}")
        r, hook = _run_smalops(args, wl, svc, thr, rate, events, interval)
        heavy = [d.extra.get("heavy_keys", 0.0) for d in hook.decisions]
        tracked = [d.extra.get("tracked_keys", 0.0) for d in hook.decisions]
        paper = "tail drops sharply" if thr == 0.1 else ("flat" if thr > 0.1 else "-")
        table.append(
            [
                f"{thr:.1%}",
                _us(r.queue_delay.p99),
                _pct(r.queue_delay.p99, base.queue_delay.p99),
                f"{np.mean(heavy) if heavy else 0:.1f}",
                f"{max(tracked) if tracked else 0:.0f}",
                paper,
            ]
        )
        rows.append(
            {
                "threshold": thr,
                "p99_s": r.queue_delay.p99,
                "heavy_keys_mean": float(np.mean(heavy)) if heavy else 0.0,
                "tracked_max": float(max(tracked)) if tracked else 0.0,
            }
        )
        curves.append(_cdf(f"{thr:.1%}", r))
    plot = plot_cdf_curves(
        curves,
        Path(args.out) / "smalops_threshold_cdf.png",
        "queueing delay (s)",
        "queueing delay by heavy threshold, 50 us",
    )
    headers = ["threshold", "p99 us", "vs hash", "heavy keys/window", "tracked max", "paper"]
    return ExperimentReport(
        title="SMALOPS heavy-threshold sweep at 50 us (Fig. 9)",
        table=format_table(headers, table)
        + "\nthreshold = a key's share of its counting window's messages",
        plots=[plot],
        params={"service_us": 50, "rate": rate, "events": events, "interval_s": interval},
        metrics={f"p99_s_thr_{r['threshold']:g}": r["p99_s"] for r in rows},
        rows=rows,
    )


def smalops_dynamic(args: ExperimentArgs) -> ExperimentReport:
    """SMALOPS Fig. 10: keys shifted every period (5 shifts per run), 20 us per message."""
    rate, events, interval = _smalops_setup(args)
    period = S_RUN_S * args.scale / 5.0
    wl = DynamicWorkload(seed=args.seed, keys=S_KEYS, period=period)
    svc = 20e-6
    results = []
    for label, thr in (
        ("hash", None),
        ("smalops 10%", 0.1),
        (f"smalops {LOW_THRESHOLD:.0%}", LOW_THRESHOLD),
    ):
        _say(args, label)
        r, hook = _run_smalops(args, wl, svc, thr, rate, events, interval)
        results.append((label, r, len(hook.rebalances)))
    b = results[0][1].queue_delay
    table = [
        [
            lab,
            _us(r.queue_delay.p50),
            _us(r.queue_delay.p99),
            _pct(r.queue_delay.p99, b.p99),
            str(n),
            "SMALOPS well below Kafka" if lab != "hash" else "-",
        ]
        for lab, r, n in results
    ]
    plot = plot_cdf_curves(
        [_cdf(lab, r) for lab, r, _ in results],
        Path(args.out) / "smalops_dynamic_cdf.png",
        "queueing delay (s)",
        "dynamic load, 20 us",
    )
    headers = ["policy", "p50 us", "p99 us", "p99 vs hash", "rebalances", "paper"]
    return ExperimentReport(
        title="SMALOPS under dynamic load (Fig. 10)",
        table=format_table(headers, table) + f"\nkeys shift every {period:g}s (3 ranks)",
        plots=[plot],
        params={"period_s": period, "rate": rate, "events": events, "interval_s": interval},
        metrics={f"p99_s_{lab.replace(' ', '_')}": r.queue_delay.p99 for lab, r, _ in results},
        rows=[
            {"policy": lab, "p99_s": r.queue_delay.p99, "rebalances": n} for lab, r, n in results
        ],
    )


EXPERIMENTS: dict[str, Experiment] = {
    "smalops-latency": smalops_latency,
    "smalops-threshold": smalops_threshold,
    "smalops-dynamic": smalops_dynamic,
}
"""Experiments of this module by name (merged by :func:`skewlab.experiments.registry`)."""
