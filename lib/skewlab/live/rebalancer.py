"""The live rebalancer loop: Delta ``key_loads`` -> policy -> ``assignments`` + ``decisions``.

A thread of the experiment process (:func:`skewlab.live.experiment.run_experiment`
starts it when ``rebalance`` is set). Every ``interval_s`` of its injected clock,
one :meth:`RebalanceLoop.step`:

1. reads the run's ``key_loads`` of the last ``interval_s`` of event time
   (ending at the newest window written) and sums them per key;
2. builds the :class:`~skewlab.rebalance.LoadSnapshot`: a key's placement is
   where the newest assignments version puts it (its hash worker when the map
   does not name it: rebalancing runs on top of KEY grouping);
3. runs the policy: ``decision = rebalancer.decide(now, snapshot)``;
4. if a key changes worker, writes assignments version ``v + 1``: every key the
   map ever named (a key sent home gets an explicit row on its hash worker, so
   set ids only grow), its worker, its set id (incremented for each moved key)
   and ``effective_ms = max(previous, now + lead_s)``: at or after the wall time
   of the write, so no event the route job has already routed falls under it
   (events carry the wall time they were produced at);
5. appends the decision's ``decisions`` row.

Both writes are idempotent: app id ``rebalance:<run>``, version = the
assignments version (4) and the step number (5).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skewlab.clock import Clock
from skewlab.errors import ConfigError
from skewlab.io.delta import DeltaStore
from skewlab.rebalance import Decision, LoadSnapshot, make_rebalancer
from skewlab.rebalance.base import hash_worker

log = logging.getLogger(__name__)

POLICIES = ("smalops", "dlb-h", "dlb-l", "lptf")
"""The policies ``skewlab run --rebalance`` accepts."""


class EpochClock:
    """Seconds since the Unix epoch: the time base of event ``ts`` and ``effective_ms``."""

    def now(self) -> float:
        return time.time()


@dataclass(frozen=True)
class RebalanceSettings:
    """The loop's configuration (validated at the edge)."""

    run_id: str
    delta_root: str
    policy: str
    workers: int
    interval_s: float = 10.0
    lead_s: float = 1.0
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
        make_rebalancer(self.policy, workers=self.workers, **self.params)

    @property
    def app_id(self) -> str:
        return f"rebalance:{self.run_id}"


class RebalanceLoop:
    """Steps 1-5 of the module doc; ``run(stop)`` repeats them until ``stop`` is set."""

    def __init__(
        self, s: RebalanceSettings, clock: Clock | None = None, store: DeltaStore | None = None
    ) -> None:
        self.s = s
        self.clock = clock or EpochClock()
        self.store = store or DeltaStore(s.delta_root)
        self.policy = make_rebalancer(s.policy, workers=s.workers, **s.params).build()
        self.version, self.effective_ms, self.map = self._latest()
        self.steps = 0
        self.decisions: list[Decision] = []

    def _latest(self) -> tuple[int, int, dict[str, tuple[int, int]]]:
        t = self.store.latest_assignments(self.s.run_id).to_pylist()
        if not t:
            return 0, 0, {}
        return (
            int(t[0]["version"]),
            max(int(r["effective_ms"] or 0) for r in t),
            {r["key"]: (int(r["worker"]), int(r["set_id"] or 0)) for r in t},
        )

    def snapshot(self, now: float) -> LoadSnapshot:
        """Steps 1-2: the interval's per-key loads and current placement.

        The interval ends at the newest window the route job has written (it
        may lag the wall clock by a few micro-batches), not at ``now``.
        """
        horizon = round((now - max(60.0, 10 * self.s.interval_s)) * 1000)
        t = self.store.read(
            "key_loads",
            run_id=self.s.run_id,
            columns=["window_start", "key", "count", "bytes"],
            filters=[("window_start", ">=", horizon)],
        )
        starts = t["window_start"].to_pylist()
        since = (max(starts) if starts else 0) - round(self.s.interval_s * 1000) + 1
        loads: dict[str, int] = {}
        sizes: dict[str, int] = {}
        for w, k, c, b in zip(
            starts, t["key"].to_pylist(), t["count"].to_pylist(), t["bytes"].to_pylist()
        ):
            if w < since:
                continue
            loads[k] = loads.get(k, 0) + int(c)
            sizes[k] = sizes.get(k, 0) + int(b)
        keys = tuple(sorted(loads))
        W = self.s.workers
        return LoadSnapshot(
            now=now,
            interval_s=self.s.interval_s,
            workers=W,
            keys=keys,
            loads=np.asarray([loads[k] for k in keys], dtype=np.int64),
            placement=np.asarray(
                [self.map[k][0] if k in self.map else hash_worker(k, W) for k in keys],
                dtype=np.int64,
            ),
            bytes=np.asarray([sizes[k] for k in keys], dtype=np.int64),
        )

    def step(self) -> Decision | None:
        """One round (steps 1-5); ``None`` when the interval had no load."""
        now = self.clock.now()
        snap = self.snapshot(now)
        if not snap.keys:
            return None
        decision = self.policy.decide(now, snap)
        self.steps += 1
        rows = self._next_version(decision.assignment_map())
        if rows:
            self.version += 1
            self.effective_ms = max(self.effective_ms, round((now + self.s.lead_s) * 1000))
            for r in rows:
                r["version"], r["effective_ms"] = self.version, self.effective_ms
            self.store.append(
                "assignments",
                rows,
                app_id=self.s.app_id,
                version=self.version,
                run_id=self.s.run_id,
            )
            self.map = {r["key"]: (r["worker"], r["set_id"]) for r in rows}
            log.info(
                "assignments v%d from %d ms: %d keys moved (imbScore %.1f -> %.1f)",
                self.version,
                self.effective_ms,
                decision.keys_moved,
                decision.imbalance_before,
                decision.imbalance_after,
            )
        self.store.append(
            "decisions",
            [decision.to_row()],
            app_id=self.s.app_id,
            version=self.steps,
            run_id=self.s.run_id,
        )
        self.decisions.append(decision)
        return decision

    def _next_version(self, assignment: dict[str, int]) -> list[dict[str, Any]]:
        """Step 4's rows, or ``[]`` when no key changes worker."""
        W = self.s.workers
        rows, changed = [], False
        for k in sorted(set(self.map) | set(assignment)):
            home = hash_worker(k, W)
            old_w, old_set = self.map.get(k, (home, 0))
            new_w = assignment.get(k, home)
            moved = new_w != old_w
            changed |= moved
            reason = ("moved" if k in assignment else "home") if moved else "kept"
            rows.append(
                {"key": k, "worker": new_w, "set_id": old_set + int(moved), "reason": reason}
            )
        return rows if changed else []

    def run(self, stop: threading.Event) -> None:
        """Step every ``interval_s`` until ``stop`` is set (errors are logged, not raised)."""
        while not stop.wait(self.s.interval_s):
            try:
                self.step()
            except Exception:  # the loop must outlive one bad round; the log says why
                log.exception("rebalance step failed")


def start_loop(s: RebalanceSettings) -> tuple[threading.Thread, threading.Event, RebalanceLoop]:
    """Start :meth:`RebalanceLoop.run` in a daemon thread; set the event to stop it."""
    loop = RebalanceLoop(s)
    stop = threading.Event()
    thread = threading.Thread(target=loop.run, args=(stop,), name="rebalancer", daemon=True)
    thread.start()
    return thread, stop, loop
