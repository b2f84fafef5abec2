"""Space saving (Metwally, Agrawal & El Abbadi, ICDT 2005) with ``capacity`` counters.

The steps and bounds are on :class:`SpaceSaving`; why batched merges keep them: docs/sketch.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError, StateError
from skewlab.sketch.base import Threshold, WindowedSketch, check_threshold

MAX_CAPACITY = 100_000_000


@dataclass(frozen=True, slots=True)
class SpaceSavingSnapshot:
    """Immutable, picklable state of a :class:`SpaceSaving`; entries ``(key, count, error)``."""

    capacity: int
    n: int
    window: int
    entries: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class SpaceSavingConfig:
    """Space saving with ``capacity`` counters and a default heavy ``threshold``.

    Estimates overcount by at most ``N / capacity``; every key with true count
    above ``N / capacity`` is monitored. ``threshold`` is a share of the
    window's events in (0, 1] or an absolute ``int`` count (default 0.1).
    """

    name: ClassVar[str] = "space-saving"
    capacity: int = 1000
    threshold: Threshold = 0.1

    def __post_init__(self) -> None:
        k = self.capacity
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_CAPACITY:
            raise ConfigError(
                f"space-saving: capacity must be an integer in [1, {MAX_CAPACITY}], got {k!r}"
            )
        check_threshold(self.threshold, "space-saving: threshold")

    def build(self, state: SpaceSavingSnapshot | None = None) -> SpaceSaving:
        """The working sketch, empty or continuing from ``state``."""
        return SpaceSaving(self, state)


class SpaceSaving(WindowedSketch):
    """Working space-saving summary of at most ``k = capacity`` entries ``(key, count, error)``.

    1. An occurrence of a monitored key does ``count += 1``.
    2. An unmonitored key takes a free entry ``(1, 0)``; when all ``k`` are taken it replaces
       the entry with the minimum count ``m`` by ``(m + 1, m)``.
    3. Guarantees: ``count - error <= true <= count`` for monitored keys, ``error <= m <= N / k``,
       every key with true count ``> m`` is monitored, an unmonitored key's true count is
       ``<= m``. Batches are merged per distinct key and keep these bounds (docs/sketch.md).

    Entries live in ``int64`` arrays of length ``capacity`` (slots ``0 .. used-1``)
    with a dict from key to slot; memory never exceeds ``capacity`` entries
    plus the distinct keys of the batch being applied.
    """

    config: SpaceSavingConfig

    def __init__(self, config: SpaceSavingConfig, state: SpaceSavingSnapshot | None = None):
        self._k = config.capacity
        super().__init__(config, state)

    def _reset(self) -> None:
        self._slot: dict[str, int] = {}
        self._keys: list[str] = []
        self._count = np.zeros(self._k, dtype=np.int64)
        self._err = np.zeros(self._k, dtype=np.int64)
        self._n = 0

    def _restore(self, state: SpaceSavingSnapshot) -> None:
        if not isinstance(state, SpaceSavingSnapshot):
            raise StateError(f"not a space-saving snapshot: {type(state).__name__}")
        if state.capacity != self._k:
            raise StateError(
                f"snapshot capacity {state.capacity} does not match config capacity {self._k}"
            )
        m = len(state.entries)
        self._keys = [e[0] for e in state.entries]
        self._slot = {key: i for i, key in enumerate(self._keys)}
        self._count[:m] = [e[1] for e in state.entries]
        self._err[:m] = [e[2] for e in state.entries]
        self._n = state.n
        self._window = state.window

    @property
    def capacity(self) -> int:
        """``k``: the most entries the summary keeps."""
        return self._k

    def __len__(self) -> int:
        return len(self._keys)

    def min_count(self) -> int:
        """``m``: the minimum count when all entries are taken, else 0 (bounds unmonitored keys)."""
        used = len(self._keys)
        return int(self._count[:used].min()) if used == self._k else 0

    def _apply(self, names: list[str], totals: np.ndarray) -> None:
        if not names:
            return
        used = len(self._keys)
        m = self.min_count()
        slots = self._slots_of(names)
        known = slots >= 0
        self._count[slots[known]] += totals[known]
        self._n += int(totals.sum())
        fresh = np.flatnonzero(~known)
        if not len(fresh):
            return
        room = self._k - used
        if len(fresh) <= room:
            take = fresh
            targets = np.arange(used, used + len(fresh), dtype=np.int64)
            m = 0
        else:
            # Top-k merge: old entries rank as 2*count+1, candidates as 2*(m+c): old win ties.
            rank = np.concatenate([self._count[:used] * 2 + 1, (m + totals[fresh]) * 2])
            keep = np.argpartition(-rank, self._k - 1)[: self._k]
            kept_new = np.sort(keep[keep >= used]) - used
            take = fresh[kept_new]
            kept_old = np.zeros(used, dtype=bool)
            kept_old[keep[keep < used]] = True
            evicted = np.flatnonzero(~kept_old)
            targets = np.concatenate([evicted, np.arange(used, self._k, dtype=np.int64)])
            for s in evicted.tolist():
                del self._slot[self._keys[s]]
        keys = self._keys
        for s, i in zip(targets.tolist(), take.tolist()):
            if s < len(keys):
                keys[s] = names[i]
            else:
                keys.append(names[i])
            self._slot[names[i]] = s
        self._count[targets] = m + totals[take]
        self._err[targets] = m

    def estimate(self, key: str) -> int:
        """``count`` of a monitored key (``true <= count <= true + N / k``); 0 if unmonitored."""
        s = self._slot.get(key)
        return 0 if s is None else int(self._count[s])

    def bounds(self, key: str) -> tuple[int, int]:
        """``(lower, upper)`` bounds of the true count: ``(count - error, count)`` or ``(0, m)``."""
        s = self._slot.get(key)
        if s is None:
            return 0, self.min_count()
        return int(self._count[s] - self._err[s]), int(self._count[s])

    def _hits(self, t: float) -> list[tuple[str, int]]:
        """Monitored keys with ``count >= T`` for ``T = t`` (no false negatives)."""
        used = len(self._keys)
        hit = np.flatnonzero(self._count[:used] >= t)
        return [(self._keys[s], int(self._count[s])) for s in hit.tolist()]

    def snapshot(self) -> SpaceSavingSnapshot:
        """Immutable, picklable state (entries in slot order, so ties break identically)."""
        entries = tuple(
            (k, int(c), int(e))
            for k, c, e in zip(self._keys, self._count.tolist(), self._err.tolist())
        )
        return SpaceSavingSnapshot(self._k, self._n, self._window, entries)
