"""The simulator's plug-in point for control loops: hooks, views, overrides.

A control loop (a rebalancer such as SMALOPS best-fit or DLB-H/L, an
autoscaler, a scale-out manager) runs beside the grouping. The simulator calls
it every ``interval_s`` of *event time*:

1. The simulator routes events up to the tick time ``now`` and runs the
   workers' queues up to there, so the view's backlog is current.
2. It calls ``hook.on_tick(now, view)`` with a :class:`LoadView` of the last
   interval ``[view.since, now)``: events routed per worker and per key, and
   the work still queued at each worker.
3. If the hook returns a :class:`RoutingOverride`, that override *replaces*
   the hook's previous one (``None`` keeps it; an empty override clears it).
   The overrides of all hooks are layered in hook order (a later hook wins a
   key) and pin those keys' events to the named workers *on top of* the
   grouping's own decisions, from the next event on (SMALOPS' assignment
   table read by the router, DLB's ``keys_map'``).

4. Optionally, a hook with a ``take_pauses() -> Mapping[int, float]`` method
   pauses workers: worker ``w`` starts nothing new until ``now + seconds``
   after its queued work (a state migration's cost at the target, as the
   rebalancing hook models it).

Ticks come only while events flow: when a gap in the stream spans several
intervals, the empty ones are skipped and the next view's ``since`` reaches back
to the previous tick. Hooks see time only through ``now``; they must not read
a clock of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from skewlab.errors import ConfigError, SkewlabError
from skewlab.keys import KeyVocab

__all__ = ["LoadView", "RoutingOverride", "SimError", "SimHook"]


class SimError(SkewlabError):
    """The simulation cannot go on (a grouping or hook broke its contract)."""


@dataclass(frozen=True, slots=True)
class RoutingOverride:
    """Keys pinned to workers, applied over the grouping's decisions.

    ``pairs`` is a sorted tuple of ``(key, worker)`` so the value is immutable
    and picklable; build one with :meth:`of`. ``reason`` is free text for the
    decisions log.
    """

    pairs: tuple[tuple[str, int], ...] = ()
    reason: str = ""

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for key, worker in self.pairs:
            if not isinstance(key, str):
                raise ConfigError(f"override keys must be strings, got {key!r}")
            if not isinstance(worker, int | np.integer) or isinstance(worker, bool) or worker < 0:
                raise ConfigError(
                    f"override worker for {key!r} must be an int >= 0, got {worker!r}"
                )
            if key in seen:
                raise ConfigError(f"override names key {key!r} twice")
            seen.add(key)

    @classmethod
    def of(cls, assignments: Mapping[str, int], reason: str = "") -> RoutingOverride:
        """Override from a ``key -> worker`` mapping."""
        return cls(tuple(sorted((k, int(w)) for k, w in assignments.items())), reason)

    def as_dict(self) -> dict[str, int]:
        return dict(self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)


@dataclass(frozen=True, slots=True)
class LoadView:
    """What a hook sees at a tick: loads of the interval ``[since, now)``.

    * ``worker_loads[w]`` -- events routed to worker ``w`` in the interval.
    * ``key_counts[i]`` -- events of vocabulary id ``i`` (``vocab.keys[i]``);
      ids beyond its length had no events.
    * ``last_worker[i]`` -- a worker that received id ``i`` in the interval
      (-1 if none); for groupings that send a key to one worker (KEY, pinned
      keys) it is *the* worker of the key.
    * ``backlog_s[w]`` -- seconds of work queued at worker ``w`` at ``now``.
    * ``override`` -- this hook's override in force during the interval.

    The arrays are read-only copies: hooks cannot disturb the simulation.
    """

    now: float
    since: float
    worker_loads: np.ndarray
    key_counts: np.ndarray
    last_worker: np.ndarray
    backlog_s: np.ndarray
    vocab: KeyVocab
    override: RoutingOverride | None = None

    @property
    def workers(self) -> int:
        return int(self.worker_loads.size)

    @property
    def total(self) -> int:
        return int(self.worker_loads.sum())

    def key_loads(self, top: int | None = None) -> dict[str, int]:
        """``key -> events`` in the interval, heaviest first (``top`` of them if given)."""
        ids = np.flatnonzero(self.key_counts)
        order = ids[np.argsort(-self.key_counts[ids], kind="stable")]
        if top is not None:
            order = order[:top]
        keys = self.vocab.keys
        return {keys[i]: int(self.key_counts[i]) for i in order.tolist()}


@runtime_checkable
class SimHook(Protocol):
    """A control loop called every ``interval_s`` seconds of event time."""

    interval_s: float

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        """Decide from the last interval's loads; return an override or ``None``."""
        ...
