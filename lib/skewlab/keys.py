"""Batches of keys as dense integer ids over a shared vocabulary.

Routing millions of events per second in Python needs arrays, and most of a
skewed stream repeats a few keys. So a batch is an ``int64`` array of ids into a
:class:`KeyVocab` that holds each distinct key once and caches its hashes per
seed (computed once per key, grown as the vocabulary grows). Groupings take a
:class:`KeyBatch`; their snapshots name keys by string, never by id, so a
snapshot taken over one vocabulary restores over another.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from skewlab.hashing import key_hash


class KeyVocab:
    """Distinct keys, in first-seen order, with cached non-negative hashes.

    Invariants: ``keys[i]`` is the key of id ``i``; ids are never reused or
    reordered; ``hashes(seed)[i] == key_hash(keys[i], seed)``.
    """

    __slots__ = ("_hashes", "_index", "keys")

    def __init__(self, keys: Iterable[str] = ()) -> None:
        self.keys: list[str] = []
        self._index: dict[str, int] = {}
        self._hashes: dict[int, np.ndarray] = {}
        for k in keys:
            self.add(k)

    def __len__(self) -> int:
        return len(self.keys)

    def add(self, key: str) -> int:
        """Id of ``key``, adding it if new."""
        i = self._index.get(key)
        if i is None:
            i = len(self.keys)
            self._index[key] = i
            self.keys.append(key)
        return i

    def id_of(self, key: str) -> int | None:
        """The id of ``key``, or ``None`` if the vocabulary has not seen it (never adds)."""
        return self._index.get(key)

    def encode(self, keys: Sequence[str]) -> np.ndarray:
        """Ids of ``keys`` (adding new ones) as an ``int64`` array."""
        add = self.add
        return np.fromiter((add(k) for k in keys), dtype=np.int64, count=len(keys))

    def hashes(self, seed: int) -> np.ndarray:
        """``uint64`` array of ``key_hash(key, seed)`` for every id, cached and extended."""
        cached = self._hashes.get(seed)
        have = 0 if cached is None else len(cached)
        if have == len(self.keys) and cached is not None:
            return cached
        fresh = np.fromiter(
            (key_hash(k, seed) for k in self.keys[have:]),
            dtype=np.uint64,
            count=len(self.keys) - have,
        )
        out = fresh if cached is None else np.concatenate([cached, fresh])
        self._hashes[seed] = out
        return out

    def buckets(self, seed: int, n: int) -> np.ndarray:
        """``key_hash(key, seed) % n`` per id as ``int64``."""
        return (self.hashes(seed) % np.uint64(n)).astype(np.int64)


@dataclass(frozen=True, slots=True)
class KeyBatch:
    """Events' keys as ids into ``vocab`` (``ids.dtype == int64``)."""

    ids: np.ndarray
    vocab: KeyVocab

    @classmethod
    def from_keys(cls, keys: Sequence[str], vocab: KeyVocab | None = None) -> KeyBatch:
        """Encode ``keys`` in order into ``vocab`` (a new one by default), adding unseen keys."""
        v = vocab if vocab is not None else KeyVocab()
        return cls(v.encode(keys), v)

    def __len__(self) -> int:
        return len(self.ids)

    def keys(self) -> list[str]:
        """The keys as strings (slow path: for tests and adapters)."""
        ks = self.vocab.keys
        return [ks[i] for i in self.ids.tolist()]

    def slice(self, start: int, stop: int) -> KeyBatch:
        """Events ``start:stop`` as a batch over the same vocabulary (a view of the ids)."""
        return KeyBatch(self.ids[start:stop], self.vocab)
