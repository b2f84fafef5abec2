"""A rebalancer as a simulator hook (adapter only: the rebalancer decides).

Every ``interval_s`` of event time the simulator hands the hook a
:class:`~skewlab.sim.base.LoadView`; the hook:

1. turns the view into a :class:`~skewlab.rebalance.base.LoadSnapshot`: the
   keys with events in the interval, their counts and the worker that
   processed them (``view.last_worker``: exact for KEY grouping plus pins);
2. calls ``rebalancer.decide(now, snapshot)`` and keeps the
   :class:`~skewlab.rebalance.base.Decision`;
3. returns the decision's whole ``assignment`` as a
   :class:`~skewlab.sim.base.RoutingOverride` when it changed (else ``None``,
   which keeps the override in force);
4. models the state migration of the moved keys as a *pause of the target
   worker*: each worker receiving keys stops serving for
   ``pause_s_per_tuple * (tuples moved to it)`` seconds after its queued work
   (DLB's step (iv): the new engine buffers the key's tuples until their state
   is loaded; skewlab pessimistically blocks the whole worker meanwhile). The
   simulator collects the pauses through :meth:`take_pauses`. The default
   ``pause_s_per_tuple = 0`` makes moves free.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from skewlab.rebalance.base import Decision, LoadSnapshot, Rebalancer, check_positive, imbalance
from skewlab.sim.base import LoadView, RoutingOverride

__all__ = ["RebalanceHook", "snapshot_of_view"]


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


@dataclass
class RebalanceHook:
    """Runs ``rebalancer`` every ``interval_s`` seconds (see the module docstring).

    ``decisions`` keeps every decision; ``series`` the ``(now, imbScore)`` of
    each interval as the workers saw it (DLB's RSTD over time).
    """

    rebalancer: Rebalancer
    interval_s: float = 10.0
    pause_s_per_tuple: float = 0.0
    decisions: list[Decision] = field(default_factory=list)
    series: list[tuple[float, float]] = field(default_factory=list)
    _pauses: dict[int, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_positive("interval_s", self.interval_s)
        check_positive("pause_s_per_tuple", self.pause_s_per_tuple, zero_ok=True)

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        """Steps 1-4."""
        self.series.append((now, imbalance(view.worker_loads)))
        snap = snapshot_of_view(view)
        decision = self.rebalancer.decide(now, snap)
        self.decisions.append(decision)
        if self.pause_s_per_tuple > 0:
            for m in decision.moves:
                extra = m.state_tuples * self.pause_s_per_tuple
                self._pauses[m.dst] = self._pauses.get(m.dst, 0.0) + extra
        if not decision.changed:
            return None
        return RoutingOverride.of(decision.assignment_map(), decision.reason)

    def take_pauses(self) -> dict[int, float]:
        """The pauses decided since the last call (worker -> seconds), then forgotten."""
        out, self._pauses = self._pauses, {}
        return out

    @property
    def rebalances(self) -> list[Decision]:
        """The decisions that moved at least one key."""
        return [d for d in self.decisions if d.moves]
