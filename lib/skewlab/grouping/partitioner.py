"""Fixed partitioners beside KEY: Kafka's default partitioner and DLB's modulo KG.

Each sends every event of a key to one worker computed from the key alone, as KEY does, with
another function (:data:`skewlab.hashing.PARTITIONERS`): ``kafka`` is the Java client's
``toPositive(murmur2(keyBytes)) % numPartitions`` (the "hashing" baseline SMALOPS compares
with), ``modulo`` is DLB's KG, "a simple modulo hash function on the tuple's key"
(``key % |Engines|``, keys naming integers), ``murmur3`` is KEY itself. Not in the grouping
registry: these are the papers' baselines for the reproductions, not strategies a run picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.clock import Clock
from skewlab.errors import ConfigError
from skewlab.grouping._common import FrozenState, make_state, open_state
from skewlab.grouping.base import Snapshot, check_workers
from skewlab.hashing import PARTITIONERS, partitioner
from skewlab.keys import KeyBatch, KeyVocab

__all__ = ["PartitionerConfig", "PartitionerRouter"]


@dataclass(frozen=True, slots=True)
class PartitionerConfig:
    """A fixed partitioner over ``workers`` workers: ``kafka``, ``modulo`` or ``murmur3``."""

    name: ClassVar[str] = "partitioner"
    workers: int
    partitioner: str = "kafka"

    def __post_init__(self) -> None:
        check_workers(self.workers)
        if self.partitioner not in PARTITIONERS:
            raise ConfigError(
                f"partitioner must be one of {', '.join(PARTITIONERS)}, got {self.partitioner!r}"
            )

    def build(self, state: Snapshot | None = None, clock: Clock | None = None) -> PartitionerRouter:
        """The router; ``clock`` is accepted for the contract and unused."""
        if state is not None:
            open_state(state, self.name, self.workers)
        return PartitionerRouter(self.workers, self.partitioner)


class PartitionerRouter:
    """``route(key) == PARTITIONERS[partitioner](key, workers)``, always."""

    __slots__ = ("_cache", "_fn", "_kind", "_vocab", "_workers")

    def __init__(self, workers: int, kind: str) -> None:
        self._workers = workers
        self._kind = kind
        self._fn = partitioner(kind)
        self._vocab: KeyVocab | None = None
        self._cache = np.zeros(0, dtype=np.int64)

    @property
    def workers(self) -> int:
        """Number of downstream workers ``W``."""
        return self._workers

    def route(self, key: str) -> int:
        """The worker the partitioner gives ``key``; stateless."""
        return self._fn(key, self._workers)

    def route_batch(self, batch: KeyBatch) -> np.ndarray:
        """One gather from a per-vocabulary cache (extended as the vocabulary grows)."""
        vocab = batch.vocab
        if vocab is not self._vocab:
            self._vocab, self._cache = vocab, np.zeros(0, dtype=np.int64)
        have = self._cache.size
        if have < len(vocab):
            fresh = [self._fn(k, self._workers) for k in vocab.keys[have:]]
            self._cache = np.concatenate([self._cache, np.asarray(fresh, dtype=np.int64)])
        return self._cache[batch.ids]

    def snapshot(self) -> FrozenState:
        """The header and the partitioner's name: there is no other state."""
        return make_state(PartitionerConfig.name, self._workers, partitioner=self._kind)
