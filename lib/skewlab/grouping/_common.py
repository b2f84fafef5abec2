"""Private helpers shared by the grouping modules.

* :class:`FrozenState`: the immutable, picklable mapping every ``snapshot()``
  returns (``types.MappingProxyType`` cannot be pickled).
* :func:`open_state`: checks that a snapshot belongs to the grouping and worker
  count it is restored into (:class:`~skewlab.errors.StateError` otherwise).
* :class:`BucketCache`: ``key_hash(key, seed) % workers`` per vocabulary id,
  cached and extended as the vocabulary grows, so batch paths index arrays
  instead of hashing strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from skewlab.errors import ConfigError, StateError
from skewlab.frozen import FrozenMapping
from skewlab.keys import KeyVocab

SNAPSHOT_VERSION = 1


class FrozenState(FrozenMapping):
    """A grouping snapshot: a read-only mapping that pickles (values should be immutable)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"FrozenState({self._data!r})"


def make_state(name: str, workers: int, **fields: Any) -> FrozenState:
    """A snapshot with the common header (grouping name, workers, version)."""
    return FrozenState(
        {"grouping": name, "workers": workers, "version": SNAPSHOT_VERSION, **fields}
    )


def open_state(state: Mapping[str, Any], name: str, workers: int) -> Mapping[str, Any]:
    """Return ``state`` after checking its header against ``name`` and ``workers``."""
    got = state.get("grouping")
    if got != name:
        raise StateError(f"snapshot of grouping {got!r} cannot restore a {name!r} grouping")
    if state.get("workers") != workers:
        raise StateError(
            f"snapshot for {state.get('workers')!r} workers cannot restore {workers} workers"
        )
    if state.get("version") != SNAPSHOT_VERSION:
        raise StateError(
            f"snapshot version {state.get('version')!r} is not {SNAPSHOT_VERSION} ({name})"
        )
    return state


def check_int(name: str, value: object, low: int) -> None:
    """Raise :class:`ConfigError` unless ``value`` is an int (not bool) ``>= low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")


def check_seconds(name: str, value: object) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite number of seconds ``>= 0``."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not np.isfinite(value)
        or value < 0
    ):
        raise ConfigError(f"{name} must be a finite number of seconds >= 0, got {value!r}")


class BucketCache:
    """``key_hash(key, seed) % workers`` per id of one vocabulary, per seed.

    Invariant: ``get(vocab, seed)[i] == skewlab.hashing.bucket(vocab.keys[i],
    workers, seed)`` for every id ``i`` of ``vocab``. Switching to another
    vocabulary drops the cache; a growing vocabulary extends it.
    """

    __slots__ = ("_arrays", "_vocab", "workers")

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._vocab: KeyVocab | None = None
        self._arrays: dict[int, np.ndarray] = {}

    def get(self, vocab: KeyVocab, seed: int) -> np.ndarray:
        """``int64`` buckets of every id of ``vocab`` for ``seed``."""
        if vocab is not self._vocab:
            self._vocab = vocab
            self._arrays = {}
        have = self._arrays.get(seed)
        n_have = 0 if have is None else len(have)
        if have is not None and n_have == len(vocab):
            return have
        fresh = (vocab.hashes(seed)[n_have:] % np.uint64(self.workers)).astype(np.int64)
        out = fresh if have is None else np.concatenate([have, fresh])
        self._arrays[seed] = out
        return out
