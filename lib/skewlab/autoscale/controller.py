"""The autoscaling controller as a pure state machine (Landau et al. Sec. V-C, Fig. 4).

Phases ``SYNCHRONIZE -> SENTINEL -> REASSIGN -> GROUP_MANAGEMENT -> SENTINEL`` (:class:`Phase`);
no I/O: every ``on_*`` method takes one event and returns the :data:`Action` list to execute.
The phases step by step are on :class:`Controller`; notes in docs/autoscale.md.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.algorithms import AutoscalerConfig, AutoscalerSnapshot, Reassignment
from skewlab.autoscale.base import Assignment, check_speeds
from skewlab.clock import Clock, SystemClock
from skewlab.errors import ConfigError, StateError

__all__ = [
    "Action",
    "Controller",
    "ControllerConfig",
    "ControllerSnapshot",
    "Phase",
    "QueryAssignment",
    "StartConsumer",
    "StartPartition",
    "StopConsumer",
    "StopPartition",
    "overloaded_consumers",
    "reassign",
    "sentinel_reason",
    "sized",
]

log = logging.getLogger(__name__)


class Phase(enum.Enum):
    """The controller's state (Landau et al. Fig. 4)."""

    SYNCHRONIZE = "synchronize"
    SENTINEL = "sentinel"
    REASSIGN = "reassign"
    GROUP_MANAGEMENT = "group-management"


@dataclass(frozen=True)
class StartConsumer:
    """Action: start a consumer process with id ``consumer`` (it reports ready when up)."""

    consumer: int


@dataclass(frozen=True)
class StopConsumer:
    """Action: stop consumer ``consumer`` (it holds no partition any more)."""

    consumer: int


@dataclass(frozen=True)
class StartPartition:
    """Action: ``consumer`` starts reading ``partition`` and acks (``on_ack(started=True)``)."""

    consumer: int
    partition: int


@dataclass(frozen=True)
class StopPartition:
    """Action: ``consumer`` stops reading ``partition`` and acks (``on_ack(started=False)``)."""

    consumer: int
    partition: int


@dataclass(frozen=True)
class QueryAssignment:
    """Action: ask ``consumer`` which partitions it reads (the reply is ``on_report``)."""

    consumer: int


Action = StartConsumer | StopConsumer | StartPartition | StopPartition | QueryAssignment


def sized(current: Assignment | None, partitions: int) -> Assignment:
    """``current`` cut or padded (unassigned) to ``partitions``; nothing: all unassigned."""
    if current is None:
        return Assignment.empty(partitions)
    if current.partitions == partitions:
        return current
    owner = current.owner[:partitions] + (-1,) * max(0, partitions - current.partitions)
    return Assignment(owner, current.members)


def overloaded_consumers(current: Assignment, speeds: ArrayLike, capacity: float) -> list[int]:
    """Consumers above ``C`` that reassigning can fix (holding two or more partitions).

    A single partition faster than ``C`` overloads whatever consumer holds it;
    counting it would make the Sentinel reassign at every measurement.
    """
    lim = capacity * (1 + 1e-9)
    groups = current.groups()
    loads = current.loads(speeds)
    return [c for c, load in loads.items() if load > lim and len(groups[c]) > 1]


def sentinel_reason(
    current: Assignment, speeds: ArrayLike, capacity: float, timed_out: bool
) -> str | None:
    """Step 2's exit conditions, in order: ``unassigned``, ``over-capacity``, ``timeout``.

    ``current`` is sized to the speeds; ``timed_out`` says whether the timeout
    since the last reassignment has passed. ``None``: stay in SENTINEL.
    """
    if current.unassigned():
        return "unassigned"
    if overloaded_consumers(current, speeds, capacity):
        return "over-capacity"
    return "timeout" if timed_out else None


def reassign(
    config: AutoscalerConfig, iteration: int, current: Assignment, speeds: ArrayLike
) -> Reassignment:
    """Step 3 (REASSIGN): one run of the algorithm from ``X(t_k) = current`` (sized).

    The one decision function of every autoscaling path: the live controller's
    state machine and the scheduled control step
    (:func:`skewlab.control.autoscale_step`) both call it.
    """
    scaler = config.build(AutoscalerSnapshot(iteration, Assignment(current.owner)))
    return scaler.step(speeds)


@dataclass(frozen=True)
class ControllerSnapshot:
    """What a restarted controller needs: the consumers it believes exist and their partitions."""

    iteration: int
    assignment: Assignment | None
    last_reassign: float | None


@dataclass(frozen=True)
class ControllerConfig:
    """The algorithm, the capacities (``C_bar``; ``C`` defaults to 5/6 of it) and the timeout."""

    algorithm: str = "mwf"
    consumer_capacity: float = 1.0
    capacity: float | None = None
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        self.autoscaler  # noqa: B018 -- validates algorithm and capacities
        if not self.timeout_s > 0:
            raise ConfigError(f"timeout_s must be > 0, got {self.timeout_s!r}")

    @property
    def autoscaler(self) -> AutoscalerConfig:
        """The :class:`AutoscalerConfig` the REASSIGN phase runs."""
        return AutoscalerConfig(self.algorithm, self.consumer_capacity, self.capacity)

    def build(
        self, state: ControllerSnapshot | None = None, clock: Clock | None = None
    ) -> Controller:
        """A controller (call :meth:`Controller.start`), fresh or restarted from ``state``."""
        if state is not None and not isinstance(state, ControllerSnapshot):
            raise StateError(f"expected a ControllerSnapshot, got {type(state).__name__}")
        return Controller(self, clock or SystemClock(), state)


@dataclass
class _Plan:
    """Group management in progress."""

    target: Assignment
    waiting_ready: set[int]
    pending_stop: dict[int, int] = field(default_factory=dict)  # partition -> new owner
    pending_start: dict[int, int] = field(default_factory=dict)  # partition -> new owner
    started: bool = False


class Controller:
    """The Sec. V-C controller. It performs no I/O; a live driver executes its actions.

    1. **SYNCHRONIZE** (start, and restart from a snapshot): ask every known consumer for its
       assignment (:class:`QueryAssignment`); the replies (:meth:`on_report`) become the
       believed group, so a controller that died mid-reassignment continues from what
       consumers really read. A partition claimed twice stays with the lowest id.
    2. **SENTINEL**: keep the latest measurement; leave when (a) ``timeout_s`` passed since
       the last reassignment, (b) a consumer holding two or more partitions is above ``C``,
       or (c) a partition has no consumer (:func:`sentinel_reason`).
    3. **REASSIGN**: run the algorithm (:func:`reassign`).
    4. **GROUP_MANAGEMENT**, in order: (i) start the new consumers and wait until each is
       ready; (ii) for each moved partition send Stop to its old owner and only after that
       ack send Start to the new one (a partition is never read by two consumers); (iii)
       when every Start is acknowledged, stop the consumers left empty; back to SENTINEL.
    """

    def __init__(self, config: ControllerConfig, clock: Clock, state: ControllerSnapshot | None):
        self.config = config
        self.clock = clock
        self.capacity = config.autoscaler.capacities.c
        self.iteration = state.iteration if state else 0
        self.current: Assignment | None = state.assignment if state else None
        self.last_reassign = state.last_reassign if state else None
        self.speeds: np.ndarray | None = None
        self.phase = Phase.SYNCHRONIZE
        self.decisions: list[tuple[str, Reassignment]] = []
        """Every reassignment with the Sentinel exit reason that triggered it."""
        self._reports: dict[int, tuple[int, ...]] = {}
        self._awaiting: set[int] = set()
        self._plan: _Plan | None = None

    # -- 1. synchronize ----------------------------------------------------------------

    def start(self) -> list[Action]:
        """Enter SYNCHRONIZE: query every consumer the snapshot knows (none: go to SENTINEL)."""
        self.phase = Phase.SYNCHRONIZE
        self._awaiting = set(self.current.members) if self.current else set()
        self._reports = {}
        if not self._awaiting:
            self.phase = Phase.SENTINEL
            return self._sentinel()
        return [QueryAssignment(c) for c in sorted(self._awaiting)]

    def on_report(self, consumer: int, partitions: tuple[int, ...] | list[int]) -> list[Action]:
        """A consumer's reply to :class:`QueryAssignment`: the partitions it reads now."""
        if self.phase is not Phase.SYNCHRONIZE or consumer not in self._awaiting:
            log.debug("ignoring assignment report of consumer %s in %s", consumer, self.phase)
            return []
        self._awaiting.discard(consumer)
        self._reports[consumer] = tuple(partitions)
        return self._synchronized() if not self._awaiting else []

    def _synchronized(self) -> list[Action]:
        size = self.current.partitions if self.current else 0
        size = max([size, *(max(ps) + 1 for ps in self._reports.values() if ps)])
        owner = [-1] * size
        actions: list[Action] = []
        for c in sorted(self._reports):
            for j in self._reports[c]:
                if owner[j] == -1:
                    owner[j] = c
                else:
                    actions.append(StopPartition(c, j))
        alive = [c for c in self._reports]
        self.current = Assignment(tuple(owner), tuple(alive))
        self.phase = Phase.SENTINEL
        return actions + self._sentinel()

    # -- 2. sentinel -------------------------------------------------------------------

    def on_measurement(self, speeds: ArrayLike) -> list[Action]:
        """The monitor's latest write speeds (one per partition, bytes/s)."""
        self.speeds = check_speeds(speeds)
        return self._sentinel() if self.phase is Phase.SENTINEL else []

    def tick(self) -> list[Action]:
        """Re-evaluate the Sentinel exit conditions (the timeout) at ``clock.now()``."""
        return self._sentinel() if self.phase is Phase.SENTINEL else []

    def exit_reason(self) -> str | None:
        """Why SENTINEL should leave now: ``unassigned``, ``over-capacity``, ``timeout`` or None."""
        if self.speeds is None:
            return None
        timed_out = (
            self.last_reassign is None
            or self.clock.now() - self.last_reassign >= self.config.timeout_s
        )
        return sentinel_reason(self._current_sized(), self.speeds, self.capacity, timed_out)

    def overloaded(self) -> list[int]:
        """Consumers above ``C`` that reassigning can fix (see :func:`overloaded_consumers`)."""
        if self.speeds is None:
            return []
        return overloaded_consumers(self._current_sized(), self.speeds, self.capacity)

    def _current_sized(self) -> Assignment:
        assert self.speeds is not None
        return sized(self.current, len(self.speeds))

    def _sentinel(self) -> list[Action]:
        reason = self.exit_reason()
        if reason is None:
            return []
        return self._reassign(reason)

    # -- 3. reassign -------------------------------------------------------------------

    def _reassign(self, reason: str) -> list[Action]:
        self.phase = Phase.REASSIGN
        assert self.speeds is not None
        cur = self._current_sized()
        decision = reassign(self.config.autoscaler, self.iteration, cur, self.speeds)
        self.iteration = decision.iteration
        self.decisions.append((reason, decision))
        log.info(
            "reassign #%d (%s): %d consumers, %d moved, Rscore %.3f",
            decision.iteration, reason, decision.consumers, len(decision.moved), decision.rscore,
        )  # fmt: skip
        self.current = cur
        return self._manage(decision.assignment)

    # -- 4. group management -----------------------------------------------------------

    def _manage(self, target: Assignment) -> list[Action]:
        self.phase = Phase.GROUP_MANAGEMENT
        assert self.current is not None
        new = [c for c in target.members if c not in self.current.members]
        self._plan = _Plan(target, waiting_ready=set(new))
        self.current = Assignment(self.current.owner, (*self.current.members, *new))
        if new:
            return [StartConsumer(c) for c in new]
        return self._send_partitions()

    def on_consumer_ready(self, consumer: int) -> list[Action]:
        """A consumer started by :class:`StartConsumer` is running and reads its inbox."""
        plan = self._plan
        if self.phase is not Phase.GROUP_MANAGEMENT or plan is None or plan.started:
            return []
        plan.waiting_ready.discard(consumer)
        return self._send_partitions() if not plan.waiting_ready else []

    def _send_partitions(self) -> list[Action]:
        plan = self._plan
        assert plan is not None and self.current is not None
        plan.started = True
        actions: list[Action] = []
        target = plan.target.owner
        for j, old in enumerate(self.current.owner):
            new = target[j] if j < len(target) else -1
            if old == new:
                continue
            if old >= 0:
                plan.pending_stop[j] = new
                actions.append(StopPartition(old, j))
            elif new >= 0:
                plan.pending_start[j] = new
                actions.append(StartPartition(new, j))
        return actions + self._maybe_done()

    def on_ack(self, consumer: int, partition: int, started: bool) -> list[Action]:
        """A consumer acknowledged Start (``started=True``) or Stop of ``partition``."""
        plan = self._plan
        if self.phase is not Phase.GROUP_MANAGEMENT or plan is None or self.current is None:
            return []
        owner = list(self.current.owner)
        if not started and plan.pending_stop.get(partition) is not None:
            if owner[partition] != consumer:
                return []
            new = plan.pending_stop.pop(partition)
            owner[partition] = -1
            self.current = Assignment(tuple(owner), self.current.members)
            if new < 0:
                return self._maybe_done()
            plan.pending_start[partition] = new
            return [StartPartition(new, partition)]
        if started and plan.pending_start.get(partition) == consumer:
            del plan.pending_start[partition]
            owner[partition] = consumer
            self.current = Assignment(tuple(owner), self.current.members)
            return self._maybe_done()
        log.debug("ignoring unexpected ack %s/%s started=%s", consumer, partition, started)
        return []

    def _maybe_done(self) -> list[Action]:
        plan = self._plan
        assert plan is not None and self.current is not None
        if plan.pending_stop or plan.pending_start:
            return []
        groups = self.current.groups()
        idle = [c for c in self.current.members if not groups[c] and c not in plan.target.members]
        self.current = Assignment(self.current.owner, tuple(plan.target.members))
        self._plan = None
        self.phase = Phase.SENTINEL
        self.last_reassign = self.clock.now()
        return [StopConsumer(c) for c in idle]

    def on_consumer_lost(self, consumer: int) -> list[Action]:
        """A consumer died: its partitions become unassigned (a Sentinel exit condition)."""
        if self.current is None or consumer not in self.current.members:
            return []
        owner = tuple(-1 if o == consumer else o for o in self.current.owner)
        members = tuple(m for m in self.current.members if m != consumer)
        self.current = Assignment(owner, members)
        plan = self._plan
        if self.phase is Phase.SYNCHRONIZE:
            self._awaiting.discard(consumer)
            return self._synchronized() if not self._awaiting else []
        if self.phase is Phase.GROUP_MANAGEMENT and plan is not None:
            target = tuple(-1 if o == consumer else o for o in plan.target.owner)
            plan.target = Assignment(target, tuple(m for m in plan.target.members if m != consumer))
            plan.waiting_ready.discard(consumer)
            if not plan.started:
                return self._send_partitions() if not plan.waiting_ready else []
            actions: list[Action] = []
            for j, new in list(plan.pending_stop.items()):
                if owner[j] == -1:  # its old owner died: the stop is moot
                    del plan.pending_stop[j]
                    if new >= 0 and new != consumer:
                        plan.pending_start[j] = new
                        actions.append(StartPartition(new, j))
            for j, new in list(plan.pending_start.items()):
                if new == consumer:
                    del plan.pending_start[j]
            return actions + self._maybe_done()
        return self._sentinel() if self.phase is Phase.SENTINEL else []

    def snapshot(self) -> ControllerSnapshot:
        """Believed group, iteration and last reassignment time; a restart re-synchronizes."""
        return ControllerSnapshot(self.iteration, self.current, self.last_reassign)
