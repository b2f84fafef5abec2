"""The grouping contract: a frozen config (:class:`GroupingConfig`) that builds a router
(:class:`Grouping`); the same object runs in the simulator, the Spark route job and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from skewlab.clock import Clock
from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch

Snapshot = Mapping[str, Any]
"""A grouping's state: an immutable (read-only) picklable mapping."""


@runtime_checkable
class Grouping(Protocol):
    """A working router for one splitter instance (DKG's SplitterBolt, one ``events`` partition).

    Lifecycle (STYLE.md rule 1):

    1. ``cfg = DKGConfig(workers=10)`` validates its parameters in ``__post_init__`` and raises
       :class:`~skewlab.errors.ConfigError` naming what is allowed.
    2. ``g = cfg.build(clock=clock)`` returns the router; ``clock`` gives the time used for
       warm-ups and intervals (default: :class:`~skewlab.clock.ManualClock` at 0).
    3. ``g.route(key)`` decides one event; ``g.route_batch(batch)`` decides a whole
       :class:`~skewlab.keys.KeyBatch` in order and must give exactly the decisions that calling
       ``route`` on each key in turn would give.
    4. ``snap = g.snapshot()`` is an immutable, picklable value that names keys by string;
       ``cfg.build(state=snap, clock=clock)`` continues with identical decisions from there on.
    """

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``; every decision is in ``range(W)``."""
        ...

    def route(self, key: str) -> int:
        """Worker (``0 <= w < workers``) of one event with ``key``."""
        ...

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """Workers (``int64``) of every event of ``batch``, in order."""
        ...

    def snapshot(self) -> Snapshot:
        """Immutable, picklable state from which ``build(state=...)`` continues."""
        ...


@runtime_checkable
class GroupingConfig(Protocol):
    """A frozen dataclass of parameters, validated on construction; ``name``: its registry name."""

    name: ClassVar[str]
    workers: int

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> Grouping:
        """A fresh router, or one continuing from ``state`` (a :meth:`Grouping.snapshot`).

        Raises :class:`~skewlab.errors.StateError` when ``state`` belongs to another grouping
        or worker count.
        """
        ...


def check_workers(workers: int) -> None:
    """Raise :class:`~skewlab.errors.ConfigError` unless ``workers`` is an int >= 1."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
