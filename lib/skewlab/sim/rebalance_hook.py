"""A rebalancer as a simulator hook (adapter only: the rebalancer decides).

The tick's steps (loads in, decision, override, migration cost as pauses or SMALOPS hand-offs)
are on :class:`RebalanceHook`; the model in full: docs/sim.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from skewlab.keys import KeyBatch, KeyVocab
from skewlab.rebalance.base import Decision, LoadSnapshot, Rebalancer, check_positive, imbalance
from skewlab.sim.base import LoadView, RoutingOverride

__all__ = ["RebalanceHook", "StateTransfer", "snapshot_of_view"]


def snapshot_of_view(view: LoadView) -> LoadSnapshot:
    """Step 1: the interval's loaded keys, counts and workers as a :class:`LoadSnapshot`."""
    ids = np.flatnonzero(view.key_counts)
    names = view.vocab.keys
    return LoadSnapshot(
        now=view.now,
        interval_s=max(view.now - view.since, 1e-9),
        workers=view.workers,
        keys=tuple(names[i] for i in ids.tolist()),
        loads=view.key_counts[ids],
        placement=view.last_worker[ids],
    )


@dataclass(frozen=True, slots=True)
class StateTransfer:
    """A moved key's state reaches its new worker ``latency_s + bytes / bytes_per_s`` later.

    The same model gives SMALOPS Eq. 4 its ``t_SM`` (:meth:`per_tuple_s`).
    """

    bytes_per_s: float = 125e6
    latency_s: float = 1e-3

    def __post_init__(self) -> None:
        check_positive("bytes_per_s", self.bytes_per_s)
        check_positive("latency_s", self.latency_s, zero_ok=True)

    def seconds(self, state_bytes: int) -> float:
        """Transfer time of ``state_bytes`` bytes of state."""
        return self.latency_s + state_bytes / self.bytes_per_s

    def per_tuple_s(self, tuple_bytes: int) -> float:
        """Seconds per state tuple of ``tuple_bytes`` bytes (Eq. 4's ``t_sm_per_tuple``)."""
        return tuple_bytes / self.bytes_per_s


@dataclass
class RebalanceHook:
    """Runs ``rebalancer`` every ``interval_s`` seconds of event time. Each tick:

    1. turns the view into a :class:`~skewlab.rebalance.base.LoadSnapshot` (the interval's
       keys, counts and the worker that processed them, ``view.last_worker``);
    2. calls ``rebalancer.decide(now, snapshot)`` and keeps the decision;
    3. returns the decision's whole ``assignment`` as a :class:`RoutingOverride` when it
       changed (else ``None``, which keeps the override in force);
    4. models the moved keys' state migration as a pause of each receiving worker,
       ``pause_s_per_tuple * tuples moved to it`` (DLB's step (iv), pessimistically blocking
       the whole worker; default 0: free moves), collected by :meth:`take_pauses`;
    5. or, with ``handoff``, SMALOPS' split-state hand-off per moved key: the new worker holds
       the key's records until the old one has served them and the state arrived
       (:class:`StateTransfer`), collected by :meth:`take_handoffs`.

    Between ticks a rebalancer with ``observe`` (SMALOPS' lossy counter) is fed every routed
    batch (``feed=True``) and what it places is installed at once.

    ``decisions`` keeps every tick's decision; ``online`` the decisions taken
    between ticks from the stream; ``series`` the ``(now, imbScore)`` of each
    interval as the workers saw it (DLB's RSTD over time); ``handoffs`` the
    ``(now, key, seconds)`` of every modelled state hand-off.
    """

    rebalancer: Rebalancer
    interval_s: float = 10.0
    pause_s_per_tuple: float = 0.0
    handoff: StateTransfer | None = None
    feed: bool = True
    decisions: list[Decision] = field(default_factory=list)
    online: list[Decision] = field(default_factory=list)
    series: list[tuple[float, float]] = field(default_factory=list)
    handoffs: list[tuple[float, str, float]] = field(default_factory=list)
    _pauses: dict[int, float] = field(default_factory=dict)
    _pending: list[tuple[str, int, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_positive("interval_s", self.interval_s)
        check_positive("pause_s_per_tuple", self.pause_s_per_tuple, zero_ok=True)

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        """Steps 1-5 of the class docstring; returns the override to install, or ``None``."""
        self.series.append((now, imbalance(view.worker_loads)))
        snap = snapshot_of_view(view)
        decision = self.rebalancer.decide(now, snap)
        self.decisions.append(decision)
        if self.pause_s_per_tuple > 0:
            for m in decision.moves:
                extra = m.state_tuples * self.pause_s_per_tuple
                self._pauses[m.dst] = self._pauses.get(m.dst, 0.0) + extra
        self._hand_off(now, decision)
        if not decision.changed:
            return None
        return RoutingOverride.of(decision.assignment_map(), decision.reason)

    def on_events(self, now: float, ids: np.ndarray, vocab: KeyVocab) -> RoutingOverride | None:
        """Feed a routed batch to the rebalancer's ``observe`` (if any); install what it placed."""
        observe = getattr(self.rebalancer, "observe", None)
        if not self.feed or observe is None:
            return None
        decision = observe(now, KeyBatch(ids, vocab))
        if decision is None:
            return None
        self.online.append(decision)
        self._hand_off(now, decision)
        return RoutingOverride.of(decision.assignment_map(), decision.reason)

    def _hand_off(self, now: float, decision: Decision) -> None:
        if self.handoff is None:
            return
        for m in decision.moves:
            seconds = self.handoff.seconds(m.state_bytes)
            self._pending.append((m.key, m.src, seconds))
            self.handoffs.append((now, m.key, seconds))

    def take_pauses(self) -> dict[int, float]:
        """The pauses decided since the last call (worker -> seconds), then forgotten."""
        out, self._pauses = self._pauses, {}
        return out

    def take_handoffs(self) -> list[tuple[str, int, float]]:
        """The hand-offs decided since the last call: ``(key, old worker, transfer seconds)``."""
        out, self._pending = self._pending, []
        return out

    @property
    def rebalances(self) -> list[Decision]:
        """The tick decisions that moved at least one key."""
        return [d for d in self.decisions if d.moves]

    def moves_of(self, kind: str) -> int:
        """Moves of ``kind`` (``migrate``, ``place``, ``drop``) over ticks and online decisions."""
        return sum(1 for d in (*self.decisions, *self.online) for m in d.moves if m.kind == kind)
