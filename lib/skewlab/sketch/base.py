"""The heavy-hitter sketch contract and the helpers every sketch shares.

A *sketch* counts keys of a stream in bounded memory and reports the heavy
ones. Like groupings (STYLE.md rule 1):

1. ``cfg = LossyCountingConfig(epsilon=0.001, threshold=0.1)`` validates itself
   and raises :class:`~skewlab.errors.ConfigError` naming what is allowed.
2. ``sk = cfg.build()`` returns the working sketch; ``sk.update(key, count)``
   counts one key, ``sk.update_batch(batch, counts)`` a whole
   :class:`~skewlab.keys.KeyBatch` (or a sequence of string keys) at once: the
   batch is first aggregated per distinct key (``np.unique`` of the ids, keys
   looked up as strings for distinct ids only), then each distinct key is
   applied with its count. Both algorithms keep their guarantees under such
   aggregated (weighted) updates.
3. ``sk.estimate(key)``, ``sk.heavy_hitters(threshold)``, ``sk.n`` (events
   counted in the current window).
4. ``sk.new_window()`` closes the counting window (SMALOPS uses one counter per
   strictly demarcated window), returns its :class:`WindowReport` and starts a
   fresh, empty window.
5. ``snap = sk.snapshot()`` is an immutable, picklable value naming keys by
   string; ``cfg.build(state=snap)`` continues with identical behaviour.

Thresholds: an ``int`` is an absolute count of events in the window; a
``float`` in ``(0, 1]`` is a share of the window's events ``n`` (SMALOPS' "10%
of the messages received").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch

Threshold = int | float
"""An absolute count (``int >= 1``) or a share of the window's events (``float`` in (0, 1])."""


def check_threshold(threshold: object, what: str = "threshold") -> None:
    """Validate a :data:`Threshold`."""
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(
            f"{what} must be an int count >= 1 or a float share in (0, 1], got {threshold!r}"
        )
    if isinstance(threshold, int):
        if threshold < 1:
            raise ConfigError(f"{what} as a count must be >= 1, got {threshold!r}")
    elif not 0.0 < threshold <= 1.0:
        raise ConfigError(f"{what} as a share of the window must be in (0, 1], got {threshold!r}")


def threshold_count(threshold: Threshold, n: int) -> float:
    """The threshold as a number of events in a window of ``n`` events."""
    check_threshold(threshold)
    if isinstance(threshold, int):
        return float(threshold)
    return threshold * n


@dataclass(frozen=True, slots=True)
class WindowReport:
    """One closed counting window: its index, its event count and its heavy keys.

    ``heavy`` maps each reported key to its estimated count, hottest first.
    """

    window: int
    n: int
    heavy: Mapping[str, int]


def distinct_counts(
    keys: KeyBatch | Sequence[str], counts: Sequence[int] | np.ndarray | None = None
) -> tuple[list[str], np.ndarray]:
    """Aggregate a batch to ``(distinct keys, total count per key)``.

    For a :class:`KeyBatch` this is ``np.unique`` over the int ids (plus a
    ``bincount`` when ``counts`` weights the events), then one string lookup per
    distinct id. Zero totals are dropped; negative counts raise ConfigError.
    """
    w: np.ndarray | None = None
    if counts is not None:
        w = np.asarray(counts)
        if w.ndim != 1 or len(w) != len(keys):
            raise ConfigError(f"counts must be one int per key ({len(keys)}), got shape {w.shape}")
        if w.dtype.kind not in "iu":
            raise ConfigError(f"counts must be integers, got dtype {w.dtype}")
        w = w.astype(np.int64)
        if len(w) and int(w.min()) < 0:
            raise ConfigError("counts must be >= 0")
    if isinstance(keys, KeyBatch):
        if w is None:
            uniq, totals = np.unique(keys.ids, return_counts=True)
        else:
            uniq, inverse = np.unique(keys.ids, return_inverse=True)
            totals = np.bincount(inverse, weights=w, minlength=len(uniq)).astype(np.int64)
        totals = totals.astype(np.int64)
        if w is not None and len(totals) and int(totals.min()) == 0:
            keep = totals > 0
            uniq, totals = uniq[keep], totals[keep]
        names = keys.vocab.keys
        return [names[i] for i in uniq.tolist()], totals
    if isinstance(keys, str):
        raise ConfigError("update_batch takes a KeyBatch or a sequence of keys, not one string")
    if w is None:
        tally: Counter[str] = Counter(keys)
    else:
        tally = Counter()
        for k, c in zip(keys, w.tolist()):
            if c:
                tally[k] += c
    return list(tally), np.fromiter(tally.values(), dtype=np.int64, count=len(tally))


def check_count(count: object) -> int:
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise ConfigError(f"count must be an integer >= 0, got {count!r}")
    return int(count)


@runtime_checkable
class Sketch(Protocol):
    """A working heavy-hitter sketch over one counting window at a time."""

    @property
    def n(self) -> int:
        """Events counted in the current window."""
        ...

    def update(self, key: str, count: int = 1) -> None: ...

    def update_batch(
        self, keys: KeyBatch | Sequence[str], counts: Sequence[int] | np.ndarray | None = None
    ) -> None: ...

    def estimate(self, key: str) -> int: ...

    def heavy_hitters(self, threshold: Threshold | None = None) -> dict[str, int]: ...

    def new_window(self) -> WindowReport: ...

    def snapshot(self) -> Any: ...

    def __len__(self) -> int:
        """Number of keys currently tracked (the memory in use)."""
        ...


@runtime_checkable
class SketchConfig(Protocol):
    """A frozen dataclass of parameters; ``name`` is its registry name."""

    name: ClassVar[str]

    def build(self, state: Any = None) -> Sketch: ...
