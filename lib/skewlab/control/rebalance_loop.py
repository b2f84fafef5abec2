"""The live rebalancer loop: Delta ``key_loads`` -> policy -> ``assignments`` + ``decisions``.

A thread of the experiment process (:func:`skewlab.live.driver.run.run_experiment` starts it
when ``rebalance`` is set): every ``interval_s`` of its injected clock :class:`RebalanceLoop`
runs the shared control step :func:`~skewlab.control.rebalance_step` (its two steps are in
the class docstring), and holds the crash point :data:`MID_REASSIGNMENT`.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, cast

from skewlab.clock import Clock, EpochClock
from skewlab.control.loop import ThreadLoop
from skewlab.control.rebalance import POLICIES, RebalanceParams, RebalanceState, rebalance_step
from skewlab.errors import ConfigError
from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.rebalance.base import Decision
from skewlab.rundir import app_id
from skewlab.spec import DEFAULTS

__all__ = ["RebalanceLoop", "RebalanceSettings", "start_loop"]

log = logging.getLogger(__name__)

MID_REASSIGNMENT = "rebalance.mid_reassignment"
"""Crash point (:mod:`skewlab.faults`) right after a new ``assignments`` version is committed
and before the round's ``decisions`` row: the route job already routes by the new version
while the loop's memory of it (and the decision) is lost. A loop started again reads the
newest version from ``assignments`` (:meth:`RebalanceState.start`)."""


class _CrashAfterAssignments:
    """The loop's store, with :data:`MID_REASSIGNMENT` right after an ``assignments`` write."""

    def __init__(self, store: DeltaStore) -> None:
        self._store = store

    def append(
        self, table: str, data: Any, *, app_id: str, version: int, run_id: str | None = None
    ) -> bool:
        wrote = self._store.append(table, data, app_id=app_id, version=version, run_id=run_id)
        if table == "assignments":
            crash_point(MID_REASSIGNMENT)
        return wrote

    def committed_version(self, table: str, app_id: str) -> int | None:
        return self._store.committed_version(table, app_id)

    def read(self, table: str, *args: Any, **kwargs: Any) -> Any:
        return self._store.read(table, *args, **kwargs)

    def latest_assignments(self, run_id: str) -> Any:
        return self._store.latest_assignments(run_id)


@dataclass(frozen=True)
class RebalanceSettings:
    """The loop's configuration (validated at the edge)."""

    run_id: str
    delta_root: str
    policy: str
    workers: int
    interval_s: float = DEFAULTS["rebalance_interval_s"]
    lead_s: float = DEFAULTS["rebalance_lead_s"]
    params: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(
                f"rebalance must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )
        if not self.interval_s > 0 or self.lead_s < 0:
            raise ConfigError(
                f"rebalance interval must be > 0 s and lead >= 0 s, got "
                f"{self.interval_s} / {self.lead_s}"
            )
        RebalanceParams.of(self.policy, self.step_params)

    @property
    def app_id(self) -> str:
        """``rebalance:<run_id>``: the app id of the loop's idempotent Delta writes."""
        return app_id("rebalance", self.run_id)

    @property
    def step_params(self) -> dict[str, Any]:
        """The ``params`` of :func:`rebalance_step`: workers, lead and the policy's."""
        return {**self.params, "workers": self.workers, "lead_s": self.lead_s}


class RebalanceLoop:
    """One round (:meth:`step`) every ``interval_s``; ``run(stop)`` repeats it until ``stop``.

    1. find the newest window of the run's ``key_loads`` (the route job may lag the
       wall clock by a few micro-batches, so the interval ends there, not at now);
       no load yet: nothing to do;
    2. run the shared control step :func:`~skewlab.control.rebalance_step` over the
       windows of the last ``interval_s`` up to it, with the loop's
       :class:`RebalanceState` (the working policy, the key map in force, the assignments
       version) kept in memory. The step builds the interval's loads, runs the policy,
       writes a new ``assignments`` version when a key changes worker (effective from the
       wall time of the write + ``lead_s``) and the ``decisions`` row: the same function
       the scheduled ``skewlab_control`` DAG runs once per data interval.

    Both writes are idempotent: app id ``rebalance:<run>``, version = the wall time
    of the round in ms (two rounds over the same newest window are two decisions).
    """

    def __init__(
        self, s: RebalanceSettings, clock: Clock | None = None, store: DeltaStore | None = None
    ) -> None:
        self.s = s
        self.clock = clock or EpochClock()
        self.store = store or DeltaStore(s.delta_root)
        self.state = RebalanceState.start(
            self.store, s.run_id, RebalanceParams.of(s.policy, s.step_params)
        )
        self.decisions: list[Decision] = []

    @property
    def version(self) -> int:
        """The newest assignments version in force."""
        return self.state.version

    @property
    def steps(self) -> int:
        """Decisions taken so far."""
        return self.state.steps

    def interval(self, now: float) -> tuple[int, int] | None:
        """Step 1: ``[start, end)`` in ms of event time, ending after the newest window.

        Windows older than ``max(60 s, 10 intervals)`` before ``now`` are not read.
        """
        horizon = round((now - max(60.0, 10 * self.s.interval_s)) * 1000)
        t = self.store.read(
            "key_loads",
            run_id=self.s.run_id,
            columns=["window_start"],
            filters=[("window_start", ">=", horizon)],
        )
        if t.num_rows == 0:
            return None
        newest = max(t["window_start"].to_pylist())
        return newest + 1 - round(self.s.interval_s * 1000), newest + 1

    def step(self) -> Decision | None:
        """One round (steps 1-2); ``None`` when the interval had no load."""
        now = self.clock.now()
        interval = self.interval(now)
        if interval is None:
            return None
        result = rebalance_step(
            cast(DeltaStore, _CrashAfterAssignments(self.store)),
            self.s.run_id,
            self.s.policy,
            self.s.step_params,
            max(0, interval[0]),
            interval[1],
            state=self.state,
            clock=self.clock,
            version=round(now * 1000),
        )
        decision: Decision | None = result.decision
        if decision is not None:
            self.decisions.append(decision)
        return decision

    def run(self, stop: threading.Event) -> None:
        """Step every ``interval_s`` until ``stop`` is set (errors are logged, not raised)."""
        while not stop.wait(self.s.interval_s):
            try:
                self.step()
            except Exception:  # the loop must outlive one bad round; the log says why
                log.exception("rebalance step failed")


def start_loop(s: RebalanceSettings) -> ThreadLoop[RebalanceLoop]:
    """:meth:`RebalanceLoop.run` started in a daemon thread (``stop()`` ends it)."""
    loop = ThreadLoop("rebalancer", RebalanceLoop(s))
    loop.start()
    return loop
