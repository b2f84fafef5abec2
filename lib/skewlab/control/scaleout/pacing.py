"""When the state manager steps: its loop, the early step on ready instances, settling.

A mixin of :class:`~skewlab.control.scaleout.manager.StateManager` (details: docs/control.md,
section ``skewlab.control.scaleout.manager``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from skewlab.clock import Clock
from skewlab.control.scaleout.settings import Group, Processes
from skewlab.state.base import Phase

__all__ = ["READY_POLL_S", "Pacing", "event_wait"]

log = logging.getLogger(__name__)

READY_POLL_S = 0.05
"""Between steps, readiness of a group's pending instances is looked at this often."""


def event_wait(ev: threading.Event, seconds: float) -> bool:
    """The real wait: ``ev.wait(seconds)`` (tests inject their own)."""
    return ev.wait(seconds)


class Pacing:
    """Mixin of :class:`~skewlab.control.scaleout.manager.StateManager`: when it steps and
    when it is done."""

    s: Any
    clock: Clock
    procs: Processes
    groups: list[Group]
    kafka: Any
    topic: str
    events: list[dict[str, Any]]
    running: Any
    input_ended: bool
    wait: Callable[[threading.Event, float], bool]
    _unready: set[int]
    _unmarked: list[Any]
    _grew_at: float
    _pool: ThreadPoolExecutor
    step: Callable[[], None]
    step_ready: Callable[[], None]
    write_all_deferred: Callable[[], None]
    woke_ready: bool = False
    """The last :meth:`wait_step` ended early because pending instances became ready."""
    _done: Callable[[], dict[int, int]]
    _input_routed: Callable[[], bool]

    def _ready_times(self, grp: Group) -> list[float | None]:
        """When each of ``grp``'s pending instances became ready (None: not yet)."""
        return [
            self.procs.ready(grp.phys[p]) if p in grp.phys else None for p in grp.policy.pending
        ]

    def wait_step(self, stop: threading.Event) -> bool:
        """Wait for the next step: ``interval_s``, or less once every pending instance of
        a group that waited for them at the last step is ready (looked at every
        :data:`READY_POLL_S`): the switch (``on_ready``) needs them, so the step comes
        then rather than up to one interval later. True once ``stop`` is set."""
        due = self.clock.now() + self.s.interval_s
        self.woke_ready = False
        while True:
            left = due - self.clock.now()
            if not self._unready:
                return self.wait(stop, max(left, 0.0))
            if left <= 0:
                return stop.is_set()
            if self.wait(stop, min(READY_POLL_S, left)):
                return True
            if any(None not in self._ready_times(self.groups[g]) for g in self._unready):
                log.debug("state manager: pending instances ready, stepping early")
                self.woke_ready = True
                return False

    def run(self, stop: threading.Event) -> None:
        """Step every ``interval_s`` (sooner once pending instances are ready,
        :meth:`wait_step`) until ``stop`` is set (errors are logged, not raised),
        then on until the operators settled (:meth:`settled`), or ``settle_s`` passed
        without ``routed`` growing once every event was routed, or ``5 x settle_s``
        passed in all.

        ``stop`` comes when the input is produced; on a busy machine the route job
        and the instances are still behind then, and the overload the state manager
        exists for shows only in that backlog: it keeps deciding until the
        instances have worked it off (a switch decided then is ended by the
        manager's own markers, :meth:`end_moved_sets`)."""
        while not self.wait_step(stop):
            self._safe_step()  # on a readiness wake: only the switch (step_ready)
        self.input_ended = True
        t_stop = self.clock.now()
        pause = threading.Event()
        while not self.settled():
            now = self.clock.now()
            quiet = now - max(t_stop, self._grew_at)
            # a route job still behind (or restarting) gets up to 5 x settle_s in all
            if (quiet >= self.s.settle_s and self._input_routed()) or (
                now - t_stop >= 5 * self.s.settle_s
            ):
                log.warning(
                    "state manager: not settled %.0f s after the input stopped", self.s.settle_s
                )
                break
            self.wait_step(pause)
            self._safe_step()
        self.write_all_deferred()
        self._pool.shutdown(wait=True)

    def _safe_step(self) -> None:
        """A full :meth:`step`, or after a readiness wake only :meth:`step_ready`."""
        try:
            self.step_ready() if self.woke_ready else self.step()
        except Exception:  # the loop must outlive one bad round; the log says why
            log.exception("state manager step failed")

    def settled(self) -> bool:
        """The input is produced and the route job routed (or quarantined) every event
        (so ``routed`` holds everything it will get), the manager ended every moved
        set, every running instance committed all its routed input, and no scale
        event is under way: events, not a quiet period."""
        if not self.input_ended or self._unmarked or not self._input_routed():
            return False
        ends, done = self.kafka.end_offsets(self.topic), self._done()
        if any(done.get(j, 0) < ends.get(j, 0) for j in self.running):
            return False
        if any(g.policy.phase is Phase.SCALING for g in self.groups):
            return False
        return all("t_done" in e for e in self.events)
