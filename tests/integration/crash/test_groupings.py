"""Crash matrix, groupings: route job and worker crash points on every grouping.

One live run per grouping with three points armed at once: the route job dies in
its 2nd micro-batch, either as the batch starts (``route.in_batch``) or after
sending the batch's records to Kafka but before its Delta rows
(``route.after_produce``; each on three groupings: a Spark start is most of a
run), and workers die around their first partials commit
(``worker.before_commit``, ``worker.after_commit``). The driver's
supervision restarts each (a worker run as a Spark task: Spark's task retry);
the run must end with every point fired, 0 lost, 0 doubled, exact results, and
the route job's decisions equal to an uninterrupted replay of the grouping (so
restored splitter state is exact too).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.integration.crash.harness import (
    WORKER_POINTS,
    Crashes,
    assert_survived,
    engine,
    supervised,
)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.crash,
    pytest.mark.skipif(not supervised(), reason="needs the driver's supervision (issue 18)"),
]

DKG_FAST = {"warmup": 0.5, "check_interval": 0.5, "promotion_interval": 0.5, "old_every": 1}
GROUPINGS: dict[str, tuple[dict[str, Any], str]] = {
    "shuffle": ({}, "route.in_batch"),
    "key": ({}, "route.after_produce"),
    "pkg": ({}, "route.in_batch"),
    "dkg": (DKG_FAST, "route.after_produce"),
    "d-choices": ({}, "route.in_batch"),
    "w-choices": ({}, "route.after_produce"),
}
"""Each grouping's params and its route point: one route restart per run (a Spark start
costs most of a run), each route point on three groupings."""
SMALL: dict[str, Any] = {"events": 6_144, "max_events_per_trigger": 1_000}  # >= 6 batches


@pytest.mark.parametrize("strategy", list(GROUPINGS))
def test_route_and_worker_crashes(run_live, tmp_path, monkeypatch, strategy):
    params, route_point = GROUPINGS[strategy]
    crashes = Crashes(tmp_path / "markers", {route_point: 2, **WORKER_POINTS})
    crashes.arm(monkeypatch)
    t0 = time.monotonic()
    run = run_live(strategy, strategy_params=params, **SMALL)
    restarts = assert_survived(run, crashes, params)
    print(
        f"crash {strategy} ({engine(run.run_dir)}): {sorted(crashes.fired())} {restarts} "
        f"{time.monotonic() - t0:.0f} s"
    )
