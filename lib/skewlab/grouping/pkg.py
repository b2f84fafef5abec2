"""PARTIAL_KEY grouping (PKG): the better of two hashed choices.

Nasir et al., "The Power of Both Choices" (ICDE 2015), as the DKG seed's "Partial Key"
describes it; steps on :meth:`PKGRouter.route`, notes on the hash in docs/grouping.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock
from skewlab.errors import StateError
from skewlab.grouping._common import BucketCache, FrozenState, make_state, open_state
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.hashing import DKG_SEED, PKG_SECOND_SEED, bucket
from skewlab.keys import KeyBatch


@dataclass(frozen=True, slots=True)
class PKGConfig:
    """PARTIAL_KEY grouping (PKG, the DKG seed's "Partial Key") over ``workers`` workers."""

    name: ClassVar[str] = "pkg"
    workers: int

    def __post_init__(self) -> None:
        check_workers(self.workers)

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> PKGRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        loads = [0] * self.workers
        if state is not None:
            loads = list(open_state(state, self.name, self.workers)["loads"])
            if len(loads) != self.workers:
                raise StateError(f"pkg snapshot has {len(loads)} loads for {self.workers}")
        return PKGRouter(self.workers, loads)


class PKGRouter:
    """Two-choice router; ``loads()`` are its cumulative per-worker counts."""

    __slots__ = ("_buckets", "_loads", "_workers")

    def __init__(self, workers: int, loads: list[int]) -> None:
        self._workers = workers
        self._loads = loads
        self._buckets = BucketCache(workers)

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``."""
        return self._workers

    def loads(self) -> tuple[int, ...]:
        """Events sent to each worker so far (this splitter's view)."""
        return tuple(self._loads)

    def candidates(self, key: str) -> tuple[int, int]:
        """``(c1, c2)`` of PKG step 1."""
        w = self._workers
        return bucket(key, w, DKG_SEED), bucket(key, w, PKG_SECOND_SEED)

    def route(self, key: str) -> int:
        """PKG for one event of ``key``; returns the worker and counts the event on it.

        1. ``c1 = abs(murmur3_128(13)) % W``, ``c2 = abs(murmur3_128(17)) % W`` (may coincide);
        2. the event goes to ``c2`` only when ``load[c1] > load[c2]`` (ties keep ``c1``),
           ``load`` being this router's own cumulative count per worker;
        3. the chosen worker's load grows by one.

        So each key reaches at most two workers (DKG seed, "Partial Key").
        """
        c1, c2 = self.candidates(key)
        loads = self._loads
        chosen = c2 if loads[c1] > loads[c2] else c1
        loads[chosen] += 1
        return chosen

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """Steps 1-3 per event over cached candidate arrays (same result as ``route``)."""
        vocab, ids = batch.vocab, batch.ids
        first = self._buckets.get(vocab, DKG_SEED)[ids].tolist()
        second = self._buckets.get(vocab, PKG_SECOND_SEED)[ids].tolist()
        loads = self._loads
        out: list[int] = []
        append = out.append
        for c1, c2 in zip(first, second):
            if loads[c1] > loads[c2]:
                c1 = c2
            loads[c1] += 1
            append(c1)
        return np.array(out, dtype=np.int64)

    def snapshot(self) -> FrozenState:
        """The per-worker loads; a restored router makes the same choices from there."""
        return make_state(PKGConfig.name, self._workers, loads=tuple(self._loads))
