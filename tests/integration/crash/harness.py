"""The crash matrix's harness: arm crash points, watch them fire, check the run stayed exact.

One live run per grouping / control policy carries all of its crash points at once
(``SKEWLAB_CRASH``, :mod:`skewlab.faults`); every point fires once thanks to the marker
directory, and the process that died is restarted: by the run's own supervision
(:class:`skewlab.live.driver.supervise.Supervisor`) on the local worker engine and for the
route job, by Spark's task retry for workers run as Spark tasks (``SKEWLAB_WORKER_ENGINE``).

- :class:`Crashes`: the points of a run, their markers, the environment that arms them;
- :func:`restarts_of`: per process, its restarts (the handle's, plus Spark's task retries);
- :func:`assert_survived`: every point fired, the restarts counted and in the logs, 0 lost /
  0 doubled input, exact results, and per (key, worker) the route job's decisions equal an
  uninterrupted offline replay of the grouping.

Nothing waits a fixed time: every wait polls for an event (a marker, an exit).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab import faults
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.spark_launcher import TASK_NAMES
from skewlab.spec import n_events
from tests.integration.fixtures.engine import engine as engine  # the crash tests' import
from tests.integration.fixtures.engine import ran_as_tasks, task_retries
from tests.integration.fixtures.live import (
    LiveRun,
    RunRefs,
    batch_ranges,
    per_key_worker,
    replay_decisions,
    topic_records,
)

ROUTE_POINTS: dict[str, int] = {"route.in_batch": 2, "route.after_produce": 2}
"""The route job: its 2nd micro-batch (splitter state of the 1st committed), then, in the
restarted job, the 2nd batch's Kafka records sent but its Delta rows not written."""
WORKER_POINTS: dict[str, int] = {"worker.before_commit": 1, "worker.after_commit": 1}
"""A worker's first flush: everything but the partials written / the partials written."""
RESTART_POINTS: dict[str, int] = {"worker.restoring": 1}
"""Hit by every worker with message sets as it starts: a later point (:attr:`Crashes.later`),
released for the restarts only."""


HELD = "held"
"""What the marker of a :attr:`Crashes.later` point holds until it is released."""


@dataclass
class Crashes:
    """The crash points of one run (``point -> n``: fire on the n-th hit) and their markers."""

    directory: Path
    points: dict[str, int]
    later: dict[str, int] = field(default_factory=dict)
    """Points that fire only after :meth:`release_later` (for processes started after it):
    armed in every process, but held by a marker that exists until then. A marker, not the
    environment, arms them later: a Spark task retry runs with its request's environment."""

    def __post_init__(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for p in self.later:
            self._marker(p).write_text(HELD)

    @property
    def all(self) -> dict[str, int]:
        return {**self.points, **self.later}

    def _marker(self, point: str) -> Path:
        return self.directory / f"crash-{point}.fired"

    def env(self) -> dict[str, str]:
        """The environment entries arming every point (the later ones held)."""
        return faults.crash_env(self.all, self.directory)

    def release_later(self) -> None:
        """Let the :attr:`later` points fire (their held markers removed; once)."""
        for p in self.later:
            with contextlib.suppress(OSError):
                if self._marker(p).read_text() == HELD:
                    self._marker(p).unlink()

    def fired(self) -> set[str]:
        """The points whose marker holds the pid of a process that crashed there."""
        return {p for p in self.all if self.pid(p) is not None}

    def pid(self, point: str) -> int | None:
        """The pid of the process that crashed at ``point`` (its marker holds it)."""
        try:
            return int(self._marker(point).read_text())
        except (OSError, ValueError):
            return None

    def arm(self, monkeypatch: Any) -> None:
        """Arm :attr:`points` in this process's environment: children inherit it."""
        for k, v in self.env().items():
            monkeypatch.setenv(k, v)


def supervised() -> bool:
    """Whether the driver restarts crashed children (the supervision of issue 18)."""
    from skewlab.live.driver.context import RunContext

    return hasattr(RunContext, "guard")


def worker_resumes(run: RunRefs) -> int:
    """How many times a worker of the run started reading (first starts and restarts)."""
    return sum(
        p.read_text(errors="replace").count("resumes at routed offset")
        for p in run.run_dir.glob("worker-*.log")
    )


def spark_starts(run: RunRefs) -> int:
    return run.log("route.log").count("skewlab.spark.session started Spark")


def restarts_of(run_dir: Path) -> dict[str, int]:
    """Per process name, its restarts: the driver's supervisor's (the handle's ``restarts``:
    the route job, and the workers on the local engine) plus Spark's task retries of the
    workers run as tasks, where the supervisor must have restarted none of them (it fails
    the run when Spark gives one up: ``retried_by_engine``)."""
    restarts = Counter(RunHandle.load(run_dir).restarts)
    if ran_as_tasks(run_dir):
        by_supervisor = {k: v for k, v in restarts.items() if k.startswith(TASK_NAMES)}
        assert not by_supervisor, f"Spark tasks restarted by the supervisor: {by_supervisor}"
    return dict(restarts + task_retries(run_dir))


def assert_survived(
    run: LiveRun,
    crashes: Crashes,
    strategy_params: Mapping[str, Any] | None = None,
    killed: int = 0,
) -> dict[str, Any]:
    """The checks of the module doc; returns the restarts (:func:`restarts_of`) for the
    matrix table.

    ``strategy_params`` given: the per (key, worker) replay check of a grouping run
    (runs whose keys move by message sets check the final key state instead).
    ``killed``: workers the test SIGKILLed itself (to restart one into ``worker.restoring``).
    A worker's restart is a supervisor's restart or a Spark task retry (:func:`restarts_of`).
    """
    s = run.summary
    assert s is not None
    fired = crashes.fired()
    assert fired == set(crashes.all), f"did not fire: {sorted(set(crashes.all) - fired)}"
    restarts = restarts_of(run.run_dir)
    # A route job that fails for another reason (a busy machine times Spark out) is
    # restarted too: at least one restart per route point, one Spark start per restart.
    route_crashes = sum(1 for p in fired if p.startswith("route."))
    assert restarts.get("route", 0) >= route_crashes, restarts
    assert 1 + route_crashes <= spark_starts(run) <= 1 + restarts.get("route", 0)
    # Workers reach a point together: more than one may crash at it (each restarted).
    worker_points = sum(1 for p in fired if p.startswith("worker."))
    worker_restarts = sum(v for k, v in restarts.items() if k.startswith("worker-"))
    most = worker_points * run.settings.workers + killed
    assert worker_points + killed <= worker_restarts <= most, restarts
    # every worker start logs where it resumes, but one that crashed while restoring
    restoring = int("worker.restoring" in fired)
    assert run.settings.workers + worker_restarts - worker_points <= worker_resumes(run)
    assert worker_resumes(run) <= run.settings.workers + worker_restarts - restoring
    n = n_events(run.settings.spec.workload)
    ends = run.client.end_offsets(run.events_topic)
    begins = run.client.begin_offsets(run.events_topic)
    assert sum(e - begins.get(p, 0) for p, e in ends.items()) == n  # the input: no more, no less
    assert s.exact, s.exactness
    assert s.events == n and f"expected {n} events, merged {n}" in s.exactness
    assert "lost 0, doubled 0, sum mismatches 0" in s.exactness
    if strategy_params is not None:
        from skewlab.grouping import make_grouping

        ranges = batch_ranges(run.checkpoint)
        assert [b for b, _ in ranges] == list(range(len(ranges)))
        cfg = make_grouping(run.settings.strategy, workers=run.settings.workers, **strategy_params)
        decided = replay_decisions(topic_records(run.client, run.events_topic), cfg, ranges)
        assert sum(decided.values()) == n
        assert per_key_worker(run.store, "key_loads", run.run_id) == decided
        assert per_key_worker(run.store, "partials", run.run_id) == decided
    else:
        assert s.state_exact and s.order_violations == 0
    return restarts


def wait_until(what: str, cond: Any, timeout_s: float = 300.0) -> None:
    """Poll ``cond`` every 0.2 s; fail after ``timeout_s``."""
    import pytest

    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)
