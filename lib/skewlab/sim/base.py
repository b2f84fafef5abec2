"""The simulator's plug-in point for control loops: hooks (:class:`SimHook`), the loads they see
(:class:`LoadView`) and the keys they pin (:class:`RoutingOverride`).

The tick protocol step by step is on :class:`SimHook`; longer notes in docs/sim.md.
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
        """The pins as a ``key -> worker`` dict."""
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
        """Number of workers ``W``."""
        return int(self.worker_loads.size)

    @property
    def total(self) -> int:
        """Events routed in the interval, over all workers."""
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
    """A control loop called every ``interval_s`` seconds of event time.

    1. The simulator routes events up to the tick time ``now`` and runs the workers' queues up
       to there, so the view's backlog is current.
    2. It calls ``on_tick(now, view)`` with a :class:`LoadView` of ``[view.since, now)``.
    3. A returned :class:`RoutingOverride` *replaces* the hook's previous one (``None`` keeps
       it; an empty one clears it). Overrides of all hooks are layered in hook order (a later
       hook wins a key) and pin those keys on top of the grouping, from the next event on
       (SMALOPS' assignment table, DLB's ``keys_map'``).
    4. Optionally ``take_pauses() -> {worker: seconds}`` pauses workers after their queued
       work (a state migration's cost at the target).

    Ticks come only while events flow (empty intervals are skipped; the next ``since`` reaches
    back to the previous tick). Hooks see time only through ``now``, never a clock of their own.
    """

    interval_s: float

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        """Decide from the last interval's loads; return an override or ``None``."""
        ...
