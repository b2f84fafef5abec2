"""Lossy counting (Manku & Motwani, VLDB 2002), SMALOPS' heavy-stream detector (Sec. II).

One counter per strictly demarcated window; the steps and bounds are on :class:`LossyCounter`,
why batched updates keep them: docs/sketch.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError, StateError
from skewlab.sketch.base import Threshold, WindowedSketch, check_threshold


@dataclass(frozen=True, slots=True)
class LossyCountingSnapshot:
    """Immutable, picklable state of a :class:`LossyCounter`; entries are ``(key, f, delta)``."""

    epsilon: float
    n: int
    window: int
    pruned_at: int
    entries: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class LossyCountingConfig:
    """Lossy counting with error ``epsilon`` and a default heavy ``threshold`` (SMALOPS).

    ``epsilon`` in (0, 1): estimates undercount by at most ``epsilon * N``.
    ``threshold``: a share of the window's events in (0, 1] (default 0.1, SMALOPS'
    10%) or an absolute ``int`` count; a share must exceed ``epsilon``.
    """

    name: ClassVar[str] = "lossy-counting"
    epsilon: float = 0.001
    threshold: Threshold = 0.1

    def __post_init__(self) -> None:
        e = self.epsilon
        if isinstance(e, bool) or not isinstance(e, int | float) or not 0.0 < e < 1.0:
            raise ConfigError(f"lossy-counting: epsilon must be a number in (0, 1), got {e!r}")
        check_threshold(self.threshold, "lossy-counting: threshold")
        if isinstance(self.threshold, float) and self.threshold <= e:
            raise ConfigError(
                f"lossy-counting: a threshold share ({self.threshold}) must exceed epsilon ({e})"
            )

    @property
    def width(self) -> int:
        """Bucket width ``ceil(1 / epsilon)`` (rounding noise of ``1 / epsilon`` ignored)."""
        inv = 1.0 / self.epsilon
        near = round(inv)
        return int(near) if abs(inv - near) < 1e-9 * inv else math.ceil(inv)

    def build(self, state: LossyCountingSnapshot | None = None) -> LossyCounter:
        """The working sketch, empty or continuing from ``state``."""
        return LossyCounter(self, state)


class LossyCounter(WindowedSketch):
    """Working lossy counter with bucket width ``w = ceil(1 / epsilon)``, over ``N`` events.

    1. Entries are ``(key, f, delta)``; a tracked key's occurrence does ``f += 1``, an untracked
       key enters as ``(key, 1, floor(N_before / w))``.
    2. At each bucket boundary ``b = N / w`` entries with ``f + delta <= b`` are deleted.
    3. Guarantees: ``f <= true <= f + delta``, ``delta <= epsilon * N``; reporting
       ``f >= (s - epsilon) * N`` misses no key with true count ``>= s * N``. Batches are
       applied per distinct key and keep these bounds (docs/sketch.md).

    Entries live in parallel ``int64`` arrays indexed by slot, with a dict from
    key to slot; deleted slots are reused, so memory is the peak entry count.
    """

    config: LossyCountingConfig

    def __init__(self, config: LossyCountingConfig, state: LossyCountingSnapshot | None = None):
        self._w = config.width
        self._eps = float(config.epsilon)
        super().__init__(config, state)

    def _reset(self) -> None:
        self._slot: dict[str, int] = {}
        self._keys: list[str | None] = []
        self._f = np.zeros(0, dtype=np.int64)
        self._d = np.zeros(0, dtype=np.int64)
        self._live = np.zeros(0, dtype=bool)
        self._free: list[int] = []
        self._n = 0
        self._pruned_at = 0

    def _restore(self, state: LossyCountingSnapshot) -> None:
        if not isinstance(state, LossyCountingSnapshot):
            raise StateError(f"not a lossy-counting snapshot: {type(state).__name__}")
        if state.epsilon != self._eps:
            raise StateError(
                f"snapshot epsilon {state.epsilon} does not match config epsilon {self._eps}"
            )
        m = len(state.entries)
        self._keys = [e[0] for e in state.entries]
        self._slot = {k: i for i, k in enumerate(self._keys) if k is not None}
        self._f = np.fromiter((e[1] for e in state.entries), dtype=np.int64, count=m)
        self._d = np.fromiter((e[2] for e in state.entries), dtype=np.int64, count=m)
        self._live = np.ones(m, dtype=bool)
        self._n = state.n
        self._window = state.window
        self._pruned_at = state.pruned_at

    # ------------------------------------------------------------------ updates

    def __len__(self) -> int:
        return len(self._slot)

    def _grow(self, extra: int) -> list[int]:
        """Slots for ``extra`` new entries: freed ones first, then new array space."""
        take = self._free[-extra:] if extra <= len(self._free) else list(self._free)
        del self._free[len(self._free) - len(take) :]
        more = extra - len(take)
        if more:
            start = len(self._keys)
            self._keys.extend([None] * more)
            self._f = np.concatenate([self._f, np.zeros(more, dtype=np.int64)])
            self._d = np.concatenate([self._d, np.zeros(more, dtype=np.int64)])
            self._live = np.concatenate([self._live, np.zeros(more, dtype=bool)])
            take.extend(range(start, start + more))
        return take

    def _apply(self, names: list[str], totals: np.ndarray) -> None:
        """Steps 1-2 for distinct ``names`` with positive ``totals``."""
        if not names:
            return
        delta = self._n // self._w
        slots = self._slots_of(names)
        known = slots >= 0
        self._f[slots[known]] += totals[known]
        fresh = np.flatnonzero(~known)
        if len(fresh):
            new_slots = self._grow(len(fresh))
            idx = np.asarray(new_slots, dtype=np.int64)
            self._f[idx] = totals[fresh]
            self._d[idx] = delta
            self._live[idx] = True
            keys = self._keys
            for s, i in zip(new_slots, fresh.tolist()):
                keys[s] = names[i]
                self._slot[names[i]] = s
        self._n += int(totals.sum())
        bucket = self._n // self._w
        if bucket > self._pruned_at:
            self._prune(bucket)

    def _prune(self, bucket: int) -> None:
        """Step 2: delete entries with ``f + delta <= bucket``."""
        dead = np.flatnonzero(self._live & (self._f + self._d <= bucket))
        keys, slot = self._keys, self._slot
        for s in dead.tolist():
            del slot[keys[s]]  # type: ignore[arg-type]
            keys[s] = None
        self._live[dead] = False
        self._f[dead] = 0
        self._d[dead] = 0
        self._free.extend(dead.tolist())
        self._pruned_at = bucket

    # ------------------------------------------------------------------ queries

    def estimate(self, key: str) -> int:
        """``f`` of ``key`` (0 if untracked): ``true - epsilon * N <= estimate <= true``."""
        s = self._slot.get(key)
        return 0 if s is None else int(self._f[s])

    def bounds(self, key: str) -> tuple[int, int]:
        """``(lower, upper)`` bounds of the true count: ``(f, f + delta)``, or ``(0, b)``."""
        s = self._slot.get(key)
        if s is None:
            return 0, self._pruned_at
        return int(self._f[s]), int(self._f[s] + self._d[s])

    def _hits(self, t: float) -> list[tuple[str, int]]:
        """Step 3's report: keys with ``f >= T - epsilon * N`` for ``T = t``."""
        cut = t - self._eps * self._n
        hit = np.flatnonzero(self._live & (self._f >= cut))
        keys = self._keys
        return [(str(keys[s]), int(self._f[s])) for s in hit.tolist()]

    def snapshot(self) -> LossyCountingSnapshot:
        """Immutable, picklable state; ``config.build(state=snap)`` continues identically."""
        live = np.flatnonzero(self._live).tolist()
        keys = self._keys
        entries = tuple((str(keys[s]), int(self._f[s]), int(self._d[s])) for s in live)
        return LossyCountingSnapshot(self._eps, self._n, self._window, self._pruned_at, entries)
