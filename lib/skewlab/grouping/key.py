"""KEY grouping: ``abs(murmur3_128(seed 13).asLong()) % W`` (DKG seed, "Key").

Every event of a key goes to one worker: no merge is needed, and hot keys overload it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock
from skewlab.grouping._common import BucketCache, FrozenState, make_state, open_state
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.hashing import DKG_SEED, bucket
from skewlab.keys import KeyBatch


@dataclass(frozen=True, slots=True)
class KeyConfig:
    """KEY grouping (DKG seed, "Key") over ``workers`` workers; stateless."""

    name: ClassVar[str] = "key"
    workers: int

    def __post_init__(self) -> None:
        check_workers(self.workers)

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> KeyRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        if state is not None:
            open_state(state, self.name, self.workers)
        return KeyRouter(self.workers)


class KeyRouter:
    """``route(key) == skewlab.hashing.bucket(key, workers, 13)``, always."""

    __slots__ = ("_buckets", "_workers")

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._buckets = BucketCache(workers)

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``."""
        return self._workers

    def route(self, key: str) -> int:
        """Worker ``abs(murmur3_128(13)(key).asLong()) % W`` (DKG seed, "Key"); stateless."""
        return bucket(key, self._workers, DKG_SEED)

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """One gather from the per-vocabulary bucket cache."""
        return self._buckets.get(batch.vocab, DKG_SEED)[batch.ids]

    def snapshot(self) -> FrozenState:
        """The header only (grouping name, workers, version): there is no state."""
        return make_state(KeyConfig.name, self._workers)
