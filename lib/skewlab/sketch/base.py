"""The heavy-hitter sketch contract (:class:`Sketch`, :class:`SketchConfig`) and what every
sketch shares (:class:`WindowedSketch`: update paths, windows, ranking of heavy keys).

Thresholds are an ``int`` count of events in the window or a ``float`` share of them in
(0, 1] (SMALOPS' "10% of the messages received"). Lifecycle in full: docs/sketch.md.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
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
    """Raise :class:`~skewlab.errors.ConfigError` unless ``threshold`` is a :data:`Threshold`."""
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
    """``count`` as an int; raise :class:`~skewlab.errors.ConfigError` unless it is an int >= 0."""
    if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
        raise ConfigError(f"count must be an integer >= 0, got {count!r}")
    return int(count)


class WindowedSketch(ABC):
    """The part of a working sketch that does not depend on its algorithm.

    Holds ``config``, the event count ``n`` and the index of the current window,
    and implements :class:`Sketch`'s ``update``, ``update_batch``,
    ``heavy_hitters`` and ``new_window`` on top of four algorithm hooks:
    ``_reset()`` (empty the current window), ``_restore(state)`` (continue
    from a snapshot), ``_apply(names, totals)`` (count distinct keys with
    positive totals) and ``_hits(t)`` (the ``(key, estimate)`` pairs to
    report for a threshold of ``t`` events in the window).
    """

    _n: int
    _slot: dict[str, int]

    def __init__(self, config: Any, state: Any = None) -> None:
        self.config = config
        self._window = 0
        self._reset()
        if state is not None:
            self._restore(state)

    @abstractmethod
    def _reset(self) -> None: ...

    @abstractmethod
    def _restore(self, state: Any) -> None: ...

    @abstractmethod
    def _apply(self, names: list[str], totals: np.ndarray) -> None: ...

    @abstractmethod
    def _hits(self, t: float) -> list[tuple[str, int]]: ...

    @abstractmethod
    def __len__(self) -> int: ...

    @property
    def n(self) -> int:
        """Events counted in the current window."""
        return self._n

    @property
    def window(self) -> int:
        """Index of the current counting window (0 for the first)."""
        return self._window

    def _slots_of(self, names: list[str]) -> np.ndarray:
        """The slot of each of ``names``, -1 for a key not tracked."""
        get = self._slot.get
        return np.fromiter((get(k, -1) for k in names), dtype=np.int64, count=len(names))

    def update(self, key: str, count: int = 1) -> None:
        """Count ``count`` occurrences of ``key``."""
        c = check_count(count)
        if c:
            self._apply([key], np.array([c], dtype=np.int64))

    def update_batch(
        self, keys: KeyBatch | Sequence[str], counts: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Count a batch (a KeyBatch or string keys, optionally weighted by ``counts``)."""
        names, totals = distinct_counts(keys, counts)
        self._apply(names, totals)

    def heavy_hitters(self, threshold: Threshold | None = None) -> dict[str, int]:
        """The sketch's heavy keys for ``threshold`` (default: the config's), hottest first.

        The threshold is taken as a count ``T`` of events in this window; which
        estimates clear it is the sketch's rule (``_hits``), chosen so that no
        key whose true count reaches ``T`` is missed. Ties go by key.
        """
        t = self.config.threshold if threshold is None else threshold
        if self._n == 0:
            check_threshold(t)
            return {}
        pairs = self._hits(threshold_count(t, self._n))
        pairs.sort(key=lambda kv: (-kv[1], kv[0]))
        return dict(pairs)

    def new_window(self) -> WindowReport:
        """Close the window: report its heavy keys (config threshold) and start empty."""
        report = WindowReport(self._window, self._n, self.heavy_hitters())
        logging.getLogger(type(self).__module__).debug(
            "%s window %d closed: n=%d heavy=%d tracked=%d",
            self.config.name,
            self._window,
            self._n,
            len(report.heavy),
            len(self),
        )
        self._reset()
        self._window += 1
        return report


@runtime_checkable
class Sketch(Protocol):
    """A working heavy-hitter sketch over one counting window at a time.

    Memory is bounded by the algorithm's guarantee, not by the number of distinct keys;
    :meth:`snapshot` is immutable and picklable and its config's ``build(state=snap)``
    continues identically.
    """

    @property
    def n(self) -> int:
        """Events counted in the current window."""
        ...

    def update(self, key: str, count: int = 1) -> None:
        """Count ``count`` (an int >= 0) occurrences of ``key`` in the current window."""
        ...

    def update_batch(
        self, keys: KeyBatch | Sequence[str], counts: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Count a batch, aggregated per distinct key first (optionally weighted by ``counts``)."""
        ...

    def estimate(self, key: str) -> int:
        """The sketch's estimate of ``key``'s count in this window (0 if not tracked)."""
        ...

    def heavy_hitters(self, threshold: Threshold | None = None) -> dict[str, int]:
        """Keys whose estimate clears ``threshold`` (default: the config's), hottest first.

        No key whose true count reaches the threshold is missed.
        """
        ...

    def new_window(self) -> WindowReport:
        """Close the window, report its heavy keys, and start an empty one."""
        ...

    def snapshot(self) -> Any:
        """Immutable, picklable state from which ``config.build(state=...)`` continues."""
        ...

    def __len__(self) -> int:
        """Number of keys currently tracked (the memory in use)."""
        ...


@runtime_checkable
class SketchConfig(Protocol):
    """A frozen dataclass of parameters; ``name`` is its registry name."""

    name: ClassVar[str]

    def build(self, state: Any = None) -> Sketch:
        """The working sketch, empty or continuing from ``state``.

        Raises :class:`~skewlab.errors.StateError` for a snapshot of another sketch or size.
        """
        ...
