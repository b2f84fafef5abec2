"""The final merge (DKG's AggregatorBolt) and the exactness check of a live run.

``merge`` folds every worker's increments in ``partials`` into ``results``
(window, key): count and sum. ``plain_count`` counts the input itself, straight
from topic ``events`` with the same decoder the route job uses (quarantined
records are not events), and ``verify`` compares the two.
"""

from __future__ import annotations

import logging
from collections import defaultdict

import pyarrow as pa

from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import fetch_range
from skewlab.io.kafka.base import KafkaClient
from skewlab.pipeline import events
from skewlab.pipeline.exactness import ExactnessReport, InputCounts, check
from skewlab.pipeline.worker import window_start
from skewlab.rundir import app_id

log = logging.getLogger(__name__)


def _window_ms(ts_s: float, window_s: float) -> int:
    """The window of ``ts_s`` in ms, decided exactly as the workers and the route job do
    (on seconds, not on ``ts`` rounded to ms first, which moves events within 0.5 ms
    of a boundary into the next window)."""
    return round(window_start(ts_s, window_s) * 1000)


def merge(store: DeltaStore, run_id: str) -> pa.Table:
    """Sum ``partials`` of ``run_id`` per (window, key) into ``results`` (idempotent)."""
    parts = store.read("partials", run_id=run_id, columns=["window_start", "key", "count", "sum"])
    grouped = parts.group_by(["window_start", "key"]).aggregate([("count", "sum"), ("sum", "sum")])
    results = pa.table(
        {
            "window_start": grouped["window_start"],
            "key": grouped["key"],
            "count": grouped["count_sum"],
            "sum": grouped["sum_sum"],
        }
    )
    store.append("results", results, app_id=app_id("aggregate", run_id), version=0, run_id=run_id)
    return results


def results_counts(store: DeltaStore, run_id: str) -> dict[tuple[float, str], tuple[int, int]]:
    """``results`` of a run as (window_start ms, key) -> (count, sum)."""
    t = store.read("results", run_id=run_id, columns=["window_start", "key", "count", "sum"])
    return {
        (float(w), k): (int(c), int(s))
        for w, k, c, s in zip(
            t["window_start"].to_pylist(),
            t["key"].to_pylist(),
            t["count"].to_pylist(),
            t["sum"].to_pylist(),
        )
    }


def plain_count(client: KafkaClient, topic: str, window_s: float) -> tuple[InputCounts, int]:
    """(window_start ms, key) -> (count, bytes) of every valid event in ``topic``, with how
    many of them are foreign (no producer mark of ``topic``); + rejects."""
    acc: dict[tuple[float, str], list[int]] = defaultdict(lambda: [0, 0])
    begins = client.begin_offsets(topic)
    rejects = foreign = 0
    for p, end in client.end_offsets(topic).items():
        got = fetch_range(client, topic, p, begins.get(p, 0), end)
        dec = events.decode(got.values)
        rejects += len(dec.rejects)
        foreign += sum(1 for i in dec.index if not events.marked(got.headers[i], topic))
        for key, ts, size in zip(dec.keys, dec.ts, dec.sizes):
            slot = acc[(float(_window_ms(ts, window_s)), key)]
            slot[0] += 1
            slot[1] += size
    return InputCounts({k: (v[0], v[1]) for k, v in acc.items()}, foreign), rejects


def verify(
    store: DeltaStore, client: KafkaClient, run_id: str, topic: str, window_s: float
) -> ExactnessReport:
    """Merged results of ``run_id`` against a plain count of ``topic``."""
    expected, _ = plain_count(client, topic, window_s)
    report = check(expected, results_counts(store, run_id))
    log.info("exactness of %s: %s", run_id, report.summary())
    return report
