"""SHUFFLE grouping: round robin over the workers (DKG seed, "Shuffle").

Perfect balance, no key locality: the results need a cross-worker merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock
from skewlab.grouping._common import FrozenState, make_state, open_state
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.keys import KeyBatch


@dataclass(frozen=True, slots=True)
class ShuffleConfig:
    """SHUFFLE grouping (DKG seed, "Shuffle"): round robin over ``workers`` workers."""

    name: ClassVar[str] = "shuffle"
    workers: int

    def __post_init__(self) -> None:
        check_workers(self.workers)

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> ShuffleRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        start = 0
        if state is not None:
            start = int(open_state(state, self.name, self.workers)["next"])
        return ShuffleRouter(self.workers, start)


class ShuffleRouter:
    """Sends event ``j`` (counted from build) to worker ``(start + j) % workers``."""

    __slots__ = ("_next", "_workers")

    def __init__(self, workers: int, start: int = 0) -> None:
        self._workers = workers
        self._next = start % workers

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``."""
        return self._workers

    def route(self, key: str) -> int:
        """The next worker in round-robin order, whatever ``key`` is (DKG seed, "Shuffle")."""
        w = self._next
        self._next = (w + 1) % self._workers
        return w

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """Vectorized round robin: ``(next + arange(n)) % workers``."""
        n = len(batch)
        out = (np.arange(self._next, self._next + n, dtype=np.int64)) % self._workers
        self._next = (self._next + n) % self._workers
        return out

    def snapshot(self) -> FrozenState:
        """The round robin's position (``next``), so a restored router continues it."""
        return make_state(ShuffleConfig.name, self._workers, next=self._next)
