"""The DLB experiments, rerun in the simulator (``skewlab experiment NAME``).

``dlb-switch``: DLB Fig. 3(b)/4(b) beside the key-granularity floor, with the paper's claims
(:func:`~skewlab.experiments.dlb_claims.switch_claims`); ``pkg-split-state``: DLB Table 1.
Choices where the paper is silent: :data:`SETUP_NOTE` and docs/experiments.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport
from skewlab.experiments._dlb_runs import (
    POLICIES,
    PolicyStats,
    Setup,
    SwitchMeasure,
    measure_switch,
    run_policy,
)
from skewlab.experiments.claims import Claim, at_least
from skewlab.experiments.dlb_claims import SEED, switch_claims
from skewlab.grouping import make_grouping
from skewlab.report.table import format_table
from skewlab.workload.switching import EpsSwitchWorkload

__all__ = ["EXPERIMENTS", "switch_setup"]

log = logging.getLogger(__name__)

D_ENGINES, D_KEYS, D_THETA, D_RUN_S = 5, 4096, 15.0, 2400.0
D_SERVICE_S, D_UTIL, D_MIGRATE_S_PER_TUPLE = 1e-3, 0.7, 1e-3
D_CHECK_S = 150.0
"""DLB's check interval (s): not in the paper; see :data:`SETUP_NOTE`."""
D_WINDOW_S = 30.0
"""The reporting window of RSTD over time and of the key floor (s)."""
D_STATE_TUPLES = 256
"""FSD state per key: its last ``H`` tuples (the paper's per-key averages imply a few hundred)."""
D_POLICIES = POLICIES
D_INTERVALS = (60.0, 300.0)
"""Other check intervals (s) rerun for the rebalance count's sensitivity (the paper gives none)."""
D_MOVERS = ("lptf", "dlb-h", "dlb-l")

SETUP_NOTE = (
    "paper fixes: 5 engines, 4,096 keys, theta 15 %, eps 0.2 (5 min) <-> 1.5 (10 min), "
    "40 min, MongoDB 1 ms per tuple moved\n"
    "KG as the paper defines it: 'the engine that will process the incoming tuple [is "
    "determined] using a simple modulo hash function on the tuple's key', key % |Engines| on "
    "the Zipf rank (LPTF and DLB start from it too); RSTD (Eq. 2) with the population std "
    "everywhere but the KG claims, which use the sample std (n - 1: the paper does not say; "
    "the sample std on the exact eps 1.5 shares gives its 'approximately 77 %', the "
    "population std 69 %); KG on 6 engines rerun on the same stream for the throughput "
    "claim ('We report results when KG uses 5 and 6 engines')\n"
    "we chose: Zipf P(rank) ~ rank^-eps over 4,096 keys named k0..k4095 (rank 0 hottest); "
    "1 ms/tuple service at 70 % of 5 engines' capacity (3,500 ev/s); DLB/LPTF check "
    "every 150 s on that interval's key loads (the paper gives no interval: at eps 1.5 the "
    "key floor, ~47 %, is above theta, so every check in an eps 1.5 phase rebalances and the "
    "count is set by the interval, see the interval table; 150 s divides the 300 s / 600 s "
    "phases and comes nearest the paper's 10-12); a moved key pauses its "
    "target 1 ms per window tuple; RSTD and the floor per 30 s window (5 per check); "
    "a key idle for a whole check returns to its hash; FSD state = a key's last 256 "
    "tuples (sizes tuples moved)"
)
"""What the paper fixes and what we chose (``ExperimentReport.setup``)."""

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


def _say(args: ExperimentArgs, msg: str) -> None:
    if args.progress is not None:
        args.progress(msg)
    log.info(msg)


def _progress(args: ExperimentArgs) -> Callable[[str], None]:
    return lambda msg: _say(args, msg)


def switch_setup(scale: float, seed: int, check_s: float = D_CHECK_S) -> Setup:
    """The ``dlb-switch`` setup at ``scale`` (times and state size scaled, rate not)."""
    c = float(scale)
    return Setup(
        engines=D_ENGINES,
        keys=D_KEYS,
        theta=D_THETA,
        low_s=300.0 * c,
        high_s=600.0 * c,
        run_s=D_RUN_S * c,
        rate=D_UTIL * D_ENGINES / D_SERVICE_S,
        service_s=D_SERVICE_S,
        check_s=check_s * c,
        window_s=D_WINDOW_S * c,
        migrate_s_per_tuple=D_MIGRATE_S_PER_TUPLE,
        state_tuples=max(1, round(D_STATE_TUPLES * c)),
        seed=seed,
    )


def _dlb_setup(args: ExperimentArgs) -> tuple[EpsSwitchWorkload, float, int, float]:
    s = switch_setup(args.scale, args.seed)
    return s.workload(), s.rate, s.events, s.window_s


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
            style = "--" if label.startswith("floor") else "-"
            ax.step(t, v, where="pre", label=label, linewidth=1.0, linestyle=style)
    ax.set_xlabel("event time (s)")
    ax.set_ylabel("RSTD (imbScore) %")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _interval_sensitivity(
    args: ExperimentArgs, m: SwitchMeasure
) -> tuple[list[dict[str, object]], str]:
    """The movers rerun at :data:`D_INTERVALS`: rebalances and the gap to the floor per interval."""
    floor = (m.floor_lower, m.floor_achievable)
    main = m.setup.check_s / args.scale
    by: dict[float, SwitchMeasure] = {main: m}
    for interval in D_INTERVALS:
        setup = switch_setup(args.scale, args.seed, interval)
        by[interval] = measure_switch(setup, D_MOVERS, _progress(args), floor=floor)
    rows: list[dict[str, object]] = []
    table: list[list[str]] = []
    for interval in sorted(by):
        st = by[interval].stats
        cells = [f"{interval:g}s"]
        for p in D_MOVERS:
            cells += [str(st[p].rebalances), f"{st[p].floor_gap_high:+.1f}"]
            if interval == main:
                continue
            rows.append(
                {
                    "policy": p,
                    "check_s": interval,
                    "rebalances": st[p].rebalances,
                    "floor_gap_high": st[p].floor_gap_high,
                    "floor_gap_settled": st[p].floor_gap_settled,
                }
            )
        table.append(cells)
    headers = ["check"]
    for p in D_MOVERS:
        headers += [f"{p} rebal", f"{p} vs floor eps1.5"]
    return rows, format_table(headers, table)


def dlb_switch(args: ExperimentArgs) -> ExperimentReport:
    """DLB Fig. 3(b)/4(b): RSTD over time beside the key floor, moves per rebalance, claims."""
    setup = switch_setup(args.scale, args.seed)
    m = measure_switch(setup, progress=_progress(args))
    _say(args, "kg on 6 engines")
    kg6 = run_policy(replace(setup, engines=6), "kg")
    table, rows, metrics = [], [], {}
    for policy, st in m.stats.items():
        paper = D_PAPER[policy]
        table.append(
            [
                policy,
                f"{st.rstd_high:.1f}",
                paper["rstd_hi"],
                f"{st.rstd_low:.1f}",
                paper["rstd_lo"],
                f"{st.floor_gap_high:+.1f}",
                f"{st.throughput:,.0f}",
                str(st.rebalances),
                paper["rebalances"],
                f"{st.keys_pct:.1f}",
                paper["keys"],
                f"{st.tuples_window_pct:.1f}",
                f"{st.tuples_state:,.0f}",
                paper["tuples"],
            ]
        )
        rows.append(
            {"check_s": D_CHECK_S, **{k: getattr(st, k) for k in PolicyStats.__dataclass_fields__}}
        )
        metrics[f"rstd_high_{policy}"] = st.rstd_high
        metrics[f"throughput_{policy}"] = st.throughput
        metrics[f"rebalances_{policy}"] = float(st.rebalances)
    table.append(
        [
            "key floor",
            f"{m.floor_high:.1f}",
            "-",
            f"{m.floor_low:.1f}",
            "-",
            "0",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
            "-",
        ]
    )
    rows.append({"policy": "floor", "rstd_high": m.floor_high, "rstd_low": m.floor_low})
    rows.append({"policy": "kg, 6 engines", "throughput": kg6.throughput})
    metrics["throughput_kg6"] = kg6.throughput
    metrics["floor_high"] = m.floor_high
    metrics["floor_bracket"] = m.floor_bracket
    series = {p: list(zip(r.times.tolist(), r.rstd.tolist())) for p, r in m.runs.items()}
    series["floor (achievable)"] = list(zip(m.times.tolist(), m.floor_achievable.tolist()))
    plot = _plot_series(series, Path(args.out) / "dlb_rstd_over_time.png")
    headers = [
        "policy",
        "RSTD eps1.5 (pop.)",
        "paper",
        "RSTD eps0.2 (pop.)",
        "paper",
        "vs floor eps1.5",
        "throughput ev/s",
        "rebalances",
        "paper",
        "% keys/rebal",
        "paper",
        "% window tuples/rebal",
        "FSD tuples/rebal",
        "paper",
    ]
    sens_rows, sens_table = _interval_sensitivity(args, m)
    rows += sens_rows
    note = (
        f"\n\nKG on 6 engines: {kg6.throughput:,.0f} ev/s"
        "\n\nrebalances by check interval (the paper gives none; every check on eps 1.5 "
        "loads rebalances):\n"
        + sens_table
        + f"\n\nkey floor: per {setup.window_s:g}s window, the imbScore of the best whole-key "
        "assignment we find (LPT + improving moves/swaps) on the window's true key loads; "
        f"the water-filling lower bound is at most {m.floor_bracket:.2f} pts below it. "
        "PKG splits keys, so it can go below the floor. Paper tuples are Twitter FSD state "
        "(absolute, not comparable); *DLB-L ~20% is Fig. 4(a)"
    )
    return ExperimentReport(
        title="DLB under periodic eps 0.2 <-> 1.5 (Fig. 3b / 4b)",
        table=format_table(headers, table) + note,
        plots=[plot],
        params={
            "engines": setup.engines,
            "keys": setup.keys,
            "rate": setup.rate,
            "events": setup.events,
            "check_s": setup.check_s,
            "window_s": setup.window_s,
            "theta": setup.theta,
            "state_tuples": setup.state_tuples,
        },
        metrics=metrics,
        rows=rows,
        claims=switch_claims(m, kg6),
        setup=SETUP_NOTE if args.scale == 1.0 else f"{SETUP_NOTE} (times x {args.scale:g})",
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
    claim = Claim(
        SEED,
        "PKG: events of keys it splits over engines (per check window, mean): an upper "
        "bound on its false positives",
        "~13.4 % false positive events (7,563 detections vs KG's 6,546)",
        100.0 * we,
        at_least(13.4, " %"),
        ours=f"{100 * we:.1f} % of events ({100 * wk:.1f} % of keys)",
        figure="Table 1, Sec. 4",
    )
    return ExperimentReport(
        title="PKG: share of keys whose state is split (DLB Table 1)",
        table=format_table(headers, table)
        + "\nthe paper counts wrong CEP detections; ours counts split keys/events (an upper bound)",
        plots=[plot],
        params={"engines": D_ENGINES, "keys": D_KEYS, "events": events, "interval_s": interval},
        metrics={"split_keys_window": wk, "split_events_window": we},
        rows=rows,
        claims=[claim],
        setup=(
            "the dlb-switch stream (eps 0.2 <-> 1.5 over 4,096 keys, 5 engines) routed with "
            "PKG; a key is split in a window when its events reached more than one engine. "
            "Source: 'PKG may assign tuples that correspond to the same key to different "
            "engines and thus incorrect events may be detected ... So PKG leads to "
            "approximately 13.4 % false positive events'. A false positive needs a split "
            "key, so the events of split keys bound the paper's share from above"
        ),
    )


EXPERIMENTS: dict[str, Experiment] = {
    "dlb-switch": dlb_switch,
    "pkg-split-state": pkg_split_state,
}
"""Experiments of this module by name (merged by :func:`skewlab.experiments.registry`)."""
