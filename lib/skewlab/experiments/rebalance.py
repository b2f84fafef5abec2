"""The SMALOPS and DLB experiments, rerun in the simulator (``skewlab experiment NAME``).

============================  ===========================================================
name                          what it reproduces
============================  ===========================================================
``smalops-latency``           SMALOPS Fig. 7/8: p99 queueing delay, hash vs SMALOPS, 10..50 us
``smalops-threshold``         SMALOPS Fig. 9: the heavy threshold swept at 50 us
``smalops-dynamic``           SMALOPS Fig. 10: keys shifted every period, 20 us
``dlb-switch``                DLB Fig. 3(b)/4(b): eps 0.2 <-> 1.5, KG, PKG, LPTF, DLB-H, DLB-L
``pkg-split-state``           DLB Table 1: the share of keys (and events) PKG splits
============================  ===========================================================

Choices where the seeds are silent (each table says them again):

* SMALOPS: 8 partitions, the Zipf workload's 10,000 keys, a fixed arrival rate
  at which the hottest hash partition runs at 90% utilisation with 50 us
  service ("just before the system is overloaded"), 5 minutes of event time
  at ``scale=1``. Time is compressed by ``scale``: the run lasts ``300 * scale``
  seconds and the decision interval is ``min(10 s, run / 10)``.
* DLB: 5 engines, 4,096 keys (the FSD key count), 1 ms per tuple, a rate of
  70% of the engines' total capacity, 40 minutes of event time with the
  phases of the paper, all compressed by ``scale``; the check interval is
  60 s (compressed); a moved key's tuples of the interval cost 1 ms each at
  the target (the paper's MongoDB read per tweet), modelled as a pause of the
  target engine (:mod:`skewlab.sim.rebalance_hook`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
from skewlab.workload import DynamicWorkload, EpsSwitchWorkload, Workload, ZipfWorkload
from skewlab.workload._common import zipf_weights

__all__ = ["EXPERIMENTS"]

log = logging.getLogger(__name__)

S_PARTITIONS, S_KEYS, S_RUN_S, S_UTIL = 8, 10_000, 300.0, 0.9
SERVICES_US = (10, 20, 30, 40, 50)
PAPER_P99_CHANGE = {20: "-57%", 50: "-73%"}
THRESHOLDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
LOW_THRESHOLD = 0.01
"""A second SMALOPS threshold shown beside the paper's 10%, at which Zipf keys are heavy."""
D_ENGINES, D_KEYS, D_SERVICE_S, D_UTIL, D_RUN_S, D_CHECK_S = 5, 4096, 1e-3, 0.7, 2400.0, 60.0
D_MIGRATE_S_PER_TUPLE = 1e-3
D_POLICIES = ("kg", "pkg", "lptf", "dlb-h", "dlb-l")
D_PAPER: dict[str, dict[str, str]] = {
    "kg": {"rstd_hi": "~77-80", "rstd_lo": "~3", "rebalances": "0", "keys": "-", "tuples": "-"},
    "pkg": {"rstd_hi": "-", "rstd_lo": "-", "rebalances": "0", "keys": "-", "tuples": "-"},
    "lptf": {"rstd_hi": "-", "rstd_lo": "-", "rebalances": "12", "keys": "~76", "tuples": ">600k"},
    "dlb-h": {
        "rstd_hi": "~40",
        "rstd_lo": "-",
        "rebalances": "10",
        "keys": "5",
        "tuples": "57,750",
    },
    "dlb-l": {
        "rstd_hi": "~20*",
        "rstd_lo": "-",
        "rebalances": "10",
        "keys": "47.5",
        "tuples": "294,881",
    },
}


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


def _dlb_setup(args: ExperimentArgs) -> tuple[EpsSwitchWorkload, float, int, float]:
    c = args.scale
    wl = EpsSwitchWorkload(seed=args.seed, keys=D_KEYS, low_s=300.0 * c, high_s=600.0 * c)
    rate = D_UTIL * D_ENGINES / D_SERVICE_S
    return wl, rate, max(int(rate * D_RUN_S * c), 1000), D_CHECK_S * c


def _high_phase(t: np.ndarray, wl: EpsSwitchWorkload) -> np.ndarray:
    return np.mod(t, wl.low_s + wl.high_s) >= wl.low_s


def _plot_series(series: dict[str, list[tuple[float, float]]], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3.5))
    for label, pts in series.items():
        if pts:
            t, v = zip(*pts)
            ax.step(t, v, where="pre", label=label, linewidth=1.0)
    ax.set_xlabel("event time (s)")
    ax.set_ylabel("RSTD (imbScore) %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def dlb_switch(args: ExperimentArgs) -> ExperimentReport:
    """DLB Fig. 3(b)/4(b): RSTD over time and moves per rebalance under eps switching."""
    wl, rate, events, interval = _dlb_setup(args)
    table, rows, series, metrics = [], [], {}, {}
    for policy in D_POLICIES:
        _say(args, policy)
        grouping = make_grouping("pkg" if policy == "pkg" else "key", D_ENGINES)
        name = "none" if policy in ("kg", "pkg") else policy
        hook = RebalanceHook(
            make_rebalancer(name, D_ENGINES).build(),
            interval_s=interval,
            pause_s_per_tuple=D_MIGRATE_S_PER_TUPLE,
        )
        cfg = SimConfig(service=ConstantService(D_SERVICE_S), window_s=interval, seed=args.seed)
        r = simulate(grouping, wl, events, rate, config=cfg, hooks=[hook])
        pts = np.array(hook.series) if hook.series else np.zeros((0, 2))
        hi = _high_phase(pts[:, 0] - interval / 2, wl) if len(pts) else np.zeros(0, bool)
        rstd_hi = float(pts[hi, 1].mean()) if hi.any() else 0.0
        rstd_lo = float(pts[~hi, 1].mean()) if (~hi).any() else 0.0
        reb = hook.rebalances
        keys_pct = [100.0 * d.keys_moved / max(d.keys_total, 1) for d in reb]
        tuples = [d.tuples_moved for d in reb]
        paper = D_PAPER[policy]
        table.append(
            [
                policy,
                f"{rstd_hi:.1f}",
                paper["rstd_hi"],
                f"{rstd_lo:.1f}",
                paper["rstd_lo"],
                f"{r.throughput:,.0f}",
                str(len(reb)),
                paper["rebalances"],
                f"{np.mean(keys_pct) if reb else 0:.1f}",
                paper["keys"],
                f"{np.mean(tuples) if reb else 0:,.0f}",
                paper["tuples"],
            ]
        )
        rows.append(
            {
                "policy": policy,
                "rstd_high": rstd_hi,
                "rstd_low": rstd_lo,
                "throughput": r.throughput,
                "rebalances": len(reb),
                "keys_moved_pct": float(np.mean(keys_pct)) if reb else 0.0,
                "tuples_moved": float(np.mean(tuples)) if reb else 0.0,
                "p99_sojourn_s": r.sojourn.p99,
            }
        )
        series[policy] = hook.series
        metrics[f"rstd_high_{policy}"] = rstd_hi
        metrics[f"throughput_{policy}"] = r.throughput
    plot = _plot_series(series, Path(args.out) / "dlb_rstd_over_time.png")
    headers = [
        "policy",
        "RSTD eps1.5",
        "paper",
        "RSTD eps0.2",
        "paper",
        "throughput ev/s",
        "rebalances",
        "paper",
        "% keys/rebal",
        "paper",
        "tuples/rebal",
        "paper",
    ]
    note = (
        f"\n{D_ENGINES} engines, {D_KEYS} keys, 1 ms/tuple, {rate:,.0f} ev/s offered, "
        f"{events:,} events, check every {interval:g}s, theta 15%, migration 1 ms/tuple; "
        "paper tuples are for the full 40-min Twitter run; *DLB-L ~20% is Fig. 4(a)"
    )
    return ExperimentReport(
        title="DLB under periodic eps 0.2 <-> 1.5 (Fig. 3b / 4b)",
        table=format_table(headers, table) + note,
        plots=[plot],
        params={
            "engines": D_ENGINES,
            "keys": D_KEYS,
            "rate": rate,
            "events": events,
            "interval_s": interval,
            "theta": 15.0,
        },
        metrics=metrics,
        rows=rows,
    )


def _split_shares(ids: Sequence[np.ndarray], workers: Sequence[np.ndarray]) -> tuple[float, float]:
    """``(share of keys on > 1 worker, share of events of such keys)`` over the given events."""
    if not ids:
        return 0.0, 0.0
    i = np.concatenate(list(ids))
    w = np.concatenate(list(workers))
    if i.size == 0:
        return 0.0, 0.0
    pairs = np.unique(i * 64 + w)
    per_key = np.bincount(pairs // 64)
    split = per_key > 1
    events = np.bincount(i, minlength=per_key.size)
    seen = per_key > 0
    return float(split.sum() / seen.sum()), float(events[split].sum() / i.size)


def pkg_split_state(args: ExperimentArgs) -> ExperimentReport:
    """DLB Table 1: PKG splits a key's state across engines; how many keys and events are split.

    Offline (pure library): the DLB stream is routed with PKG and, per check
    interval and per phase, the keys seen on more than one engine are counted.
    """
    wl, rate, events, interval = _dlb_setup(args)
    router = make_grouping("pkg", D_ENGINES).build()
    by_phase: dict[bool, tuple[list[np.ndarray], list[np.ndarray]]] = {
        True: ([], []),
        False: ([], []),
    }
    windows: dict[int, tuple[list[np.ndarray], list[np.ndarray]]] = {}
    for chunk in wl.events(events, rate=rate):
        w = router.route_batch(chunk.keys)
        win = np.floor(chunk.ts / interval).astype(np.int64)
        hi = _high_phase(chunk.ts, wl)
        for flag in (True, False):
            by_phase[flag][0].append(chunk.keys.ids[hi == flag])
            by_phase[flag][1].append(w[hi == flag])
        for x in np.unique(win).tolist():
            m = win == x
            windows.setdefault(x, ([], []))[0].append(chunk.keys.ids[m])
            windows[x][1].append(w[m])
    per_window = [_split_shares(*windows[x]) for x in sorted(windows)]
    table, rows = [], []
    for label, flag in (("eps 1.5", True), ("eps 0.2", False)):
        k, e = _split_shares(*by_phase[flag])
        table.append([f"whole {label} phases", f"{100 * k:.1f}", f"{100 * e:.1f}", "-"])
        rows.append({"scope": label, "split_keys": k, "split_events": e})
    wk = float(np.mean([k for k, _ in per_window])) if per_window else 0.0
    we = float(np.mean([e for _, e in per_window])) if per_window else 0.0
    table.append(
        [
            f"per {interval:g}s window (mean)",
            f"{100 * wk:.1f}",
            f"{100 * we:.1f}",
            "13.4 (false-positive events)",
        ]
    )
    rows.append({"scope": "window", "split_keys": wk, "split_events": we})
    plot = _plot_series(
        {
            "split keys %": [
                ((x + 1) * interval, 100 * k) for x, (k, _) in zip(sorted(windows), per_window)
            ]
        },
        Path(args.out) / "pkg_split_keys.png",
    )
    headers = ["scope", "split keys %", "events of split keys %", "paper"]
    return ExperimentReport(
        title="PKG: share of keys whose state is split (DLB Table 1)",
        table=format_table(headers, table)
        + "\nthe paper counts wrong CEP detections; ours counts split keys/events (an upper bound)",
        plots=[plot],
        params={"engines": D_ENGINES, "keys": D_KEYS, "events": events, "interval_s": interval},
        metrics={"split_keys_window": wk, "split_events_window": we},
        rows=rows,
    )


EXPERIMENTS: dict[str, Experiment] = {
    "smalops-latency": smalops_latency,
    "smalops-threshold": smalops_threshold,
    "smalops-dynamic": smalops_dynamic,
    "dlb-switch": dlb_switch,
    "pkg-split-state": pkg_split_state,
}
"""Experiments of this module by name (merged by :func:`skewlab.experiments.registry`)."""
