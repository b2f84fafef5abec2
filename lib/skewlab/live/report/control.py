"""The control part of a live run's summary: rebalancing and scale-out evidence, key state."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.io.delta.store import DeltaStore
from skewlab.metrics import imb_score
from skewlab.pipeline.handoff import META_KEY

if TYPE_CHECKING:
    from skewlab.live.report.summary import RunSummary

__all__ = ["add_rebalance", "add_scale_out", "final_key_state"]


def _imb(loads: np.ndarray) -> float:
    return imb_score(loads) if loads.sum() else 0.0


def add_rebalance(
    summary: RunSummary,
    store: DeltaStore,
    run_id: str,
    policy: str,
    loads: np.ndarray,
    home: np.ndarray,
    key_counts: dict[str, int],
) -> None:
    """Rebalancing evidence: decisions, hand-offs, final key state, imbalance vs KEY.

    KEY's imbalance is measured on the same events: each key's load of a window
    put on its hash worker (what KEY grouping alone would have done).
    ``state_exact``: at the end every key has one holder whose state counts the
    key's events exactly (hand-offs neither doubled nor lost state).
    """
    summary.rebalance = policy
    dec = store.read("decisions", run_id=run_id, columns=["loop", "detail"])
    for loop, d in zip(dec["loop"].to_pylist(), dec["detail"].to_pylist()):
        if loop != "rebalance":  # autoscale / scale-out rows of the same run
            continue
        moved = int(json.loads(d).get("keys_moved", 0))
        summary.rebalances += int(moved > 0)
        summary.keys_moved += moved
    ho = store.read("handoffs", run_id=run_id, columns=["key", "set_id", "tuples", "bytes"])
    seen = set(zip(ho["key"].to_pylist(), ho["set_id"].to_pylist()))
    summary.handoffs = len(seen)
    summary.tuples_migrated = int(sum(ho["tuples"].to_pylist()))
    summary.bytes_migrated = int(sum(ho["bytes"].to_pylist()))
    counts, holders, violations = final_key_state(store, run_id)
    summary.order_violations = violations
    nonzero = {k: c for k, c in counts.items() if c}
    summary.state_exact = nonzero == key_counts and all(n == 1 for n in holders.values())
    summary.window_imb = [_imb(r) for r in loads]
    summary.window_imb_key = [_imb(r) for r in home]
    summary.imb_key = _imb(home.sum(axis=0))
    eff = store.read("assignments", run_id=run_id, columns=["effective_ms"])
    starts = [e for e in eff["effective_ms"].to_pylist() if e is not None]
    if starts:
        ends = np.asarray(summary.window_starts_ms) + round(summary.window_s * 1000)
        after = ends > min(starts)  # windows holding events routed by a version
        summary.imb_after = _imb(loads[after].sum(axis=0))
        summary.imb_key_after = _imb(home[after].sum(axis=0))


def add_scale_out(
    summary: RunSummary,
    store: DeltaStore,
    run_id: str,
    policy: str,
    scale: dict[str, Any],
    key_counts: dict[str, int],
) -> None:
    """Scale-out evidence: instances over time, events, pause, extra latency, exact key state.

    ``extra_p99_ms``: over the scale events, the highest p99 of a window of an
    involved worker between the switch and the end of the hand-offs, minus the
    median p99 of that worker's windows before the alarm.
    """
    summary.scale_out = policy
    events = scale["events"]
    summary.scale_log = events
    summary.scale_events = len(events)
    summary.instance_seconds = float(scale["instance_seconds"])
    summary.fairness = float(scale["fairness"])
    summary.checkpoints = int(scale["checkpoints"])
    tl = scale["timeline"]
    summary.instances_t = [float(x[0]) for x in tl]
    summary.instances_running = [int(x[1]) for x in tl]
    summary.instances_active = [int(x[2]) for x in tl]
    summary.input_rate = [float(x[3]) for x in tl]
    summary.processed_rate = [float(x[4]) for x in tl]
    summary.max_running = max(summary.instances_running, default=summary.workers)
    pauses = [float(e["pause_s"]) for e in events if "pause_s" in e]
    summary.pause_s = max(pauses) if pauses else float("nan")
    drains = [float(e["drain_s"]) for e in events if "drain_s" in e]
    summary.drain_s = max(drains) if drains else float("nan")
    lat = store.read("latency", run_id=run_id, columns=["window_start", "worker", "p99"])
    rows = list(
        zip(lat["window_start"].to_pylist(), lat["worker"].to_pylist(), lat["p99"].to_pylist())
    )
    extras = []
    w_ms = summary.window_s * 1000
    for e in events:
        involved = set(e["from"]) | set(e["to"])
        t0, t1 = e["t_switch"] * 1000, e.get("t_done", e["t_switch"]) * 1000
        before = [p for ws, wk, p in rows if wk in involved and ws + w_ms <= e["t_alarm"] * 1000]
        during = [p for ws, wk, p in rows if wk in involved and t0 - w_ms < ws <= t1]
        if before and during:
            extras.append(max(during) - float(np.median(before)))
    summary.extra_p99_ms = max(extras) if extras else float("nan")
    ho = store.read("handoffs", run_id=run_id, columns=["key", "set_id", "tuples", "bytes"])
    summary.handoffs = len(set(zip(ho["key"].to_pylist(), ho["set_id"].to_pylist())))
    summary.tuples_migrated = int(sum(ho["tuples"].to_pylist()))
    summary.bytes_migrated = int(sum(ho["bytes"].to_pylist()))
    summary.keys_moved = sum(int(e.get("keys_moved", 0)) for e in events)
    counts, holders, violations = final_key_state(store, run_id)
    summary.order_violations = violations
    nonzero = {k: c for k, c in counts.items() if c}
    summary.state_exact = nonzero == key_counts and all(n == 1 for n in holders.values())


def final_key_state(store: DeltaStore, run_id: str) -> tuple[dict[str, int], dict[str, int], int]:
    """Per key: count in its final state, number of holders; total order violations.

    Each worker's final state is, per key, its row of the newest (incremental)
    ``operator_state`` checkpoint of that worker.
    """
    t = store.read(
        "operator_state", run_id=run_id, columns=["checkpoint", "instance", "key", "value"]
    )
    newest: dict[tuple[int, str], tuple[int, bytes]] = {}
    for c, i, k, v in zip(
        t["checkpoint"].to_pylist(),
        t["instance"].to_pylist(),
        t["key"].to_pylist(),
        t["value"].to_pylist(),
    ):
        have = newest.get((i, k))
        if k != META_KEY and (have is None or c > have[0]):
            newest[(i, k)] = (c, v)
    counts: dict[str, int] = {}
    holders: dict[str, int] = {}
    violations = 0
    for (_, k), (_, v) in newest.items():
        for e in json.loads(v)["sets"]:
            counts[k] = counts.get(k, 0) + int(e["state"]["count"])
            holders[k] = holders.get(k, 0) + 1
            violations += int(e["state"]["violations"])
    return counts, holders, violations
