"""The worker's stateful operator: windowed per-key count and sum, exactly once.

Replays are dropped by per-source-partition offset watermarks; results leave as increments
that the job commits with the watermarks in one transaction (why this is exact:
docs/pipeline.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from skewlab.errors import ConfigError


def window_start(ts: float, window_s: float) -> float:
    """Start of the tumbling event-time window that holds ``ts``."""
    return math.floor(ts / window_s) * window_s


def window_starts(ts: np.ndarray, window_s: float) -> np.ndarray:
    """:func:`window_start` of every element of ``ts`` (the same doubles)."""
    out: np.ndarray = np.floor(ts / window_s) * window_s
    return out


@dataclass(frozen=True, slots=True)
class Partial:
    """An increment of one (window, key) on one worker."""

    window_start: float
    key: str
    count: int
    sum: int


class WindowedAggregate:
    """Per-key count and sum of ``value`` per tumbling window, deduplicated by source offset.

    Invariant: every (source partition, offset) contributes at most once over
    the operator's life, including across restarts from ``watermarks``: per source partition
    the offsets a worker receives only grow, so a record at or below its partition's watermark
    is a replay and is dropped. Committing each :meth:`drain` with :attr:`watermarks` in one
    transaction makes the sum of increments over all workers exact.
    """

    def __init__(self, window_s: float = 15.0, watermarks: Mapping[int, int] | None = None):
        if not window_s > 0:
            raise ConfigError(f"window_s must be > 0, got {window_s!r}")
        self.window_s = float(window_s)
        self._watermarks: dict[int, int] = dict(watermarks or {})
        self._pending: dict[tuple[float, str], list[int]] = {}
        self.accepted = 0
        self.dropped = 0

    @property
    def watermarks(self) -> dict[int, int]:
        """Highest source offset taken per source partition (a copy)."""
        return dict(self._watermarks)

    def process(
        self,
        keys: Sequence[str],
        ts: Sequence[float],
        values: Sequence[int],
        src_partition: Sequence[int],
        src_offset: Sequence[int],
    ) -> np.ndarray:
        """Add records; return a boolean mask of those taken (False = replay dropped).

        As one record at a time in order: a record is taken iff its offset is above its
        source partition's watermark, which then moves to it; so per source partition a
        record is taken iff its offset is above the watermark before the batch and every
        earlier offset of the batch (a running maximum)."""
        n = len(keys)
        part = np.asarray(src_partition, dtype=np.int64)
        off = np.asarray(src_offset, dtype=np.int64)
        taken = np.zeros(n, dtype=bool)
        wm = self._watermarks
        if n:
            lo = part[0]
            one = bool((part == lo).all())
            groups = [(int(lo), None)] if one else [(int(p), part == p) for p in np.unique(part)]
            for p, sel in groups:
                o = off if sel is None else off[sel]
                w0 = wm.get(p, -1)
                seen = np.maximum.accumulate(o)
                before = np.empty_like(o)
                before[0] = w0
                np.maximum(seen[:-1], w0, out=before[1:])
                t = o > before
                if sel is None:
                    taken = t
                else:
                    taken[sel] = t
                if t.any():
                    wm[p] = max(w0, int(seen[-1]))
        k = int(taken.sum())
        if k:
            self._add_taken(keys, ts, values, taken, k == n)
        self.accepted += k
        self.dropped += n - k
        return taken

    def _add_taken(
        self,
        keys: Sequence[str],
        ts: Sequence[float],
        values: Sequence[int],
        taken: np.ndarray,
        every: bool,
    ) -> None:
        """Count the taken records into their (window, key) increments."""
        starts = window_starts(np.asarray(ts, dtype=np.float64), self.window_s)
        vals = np.asarray(values, dtype=np.int64)
        if not every:
            idx = np.flatnonzero(taken)
            starts, vals = starts[idx], vals[idx]
            keys = [keys[i] for i in idx.tolist()]
        _sum_into(self._pending, starts, keys, vals)

    def accept(self, src_partition: int, src_offset: int) -> bool:
        """Take a record into the operator (``False``: a replay, dropped); see :meth:`add`.

        Split from :meth:`add` for message sets: a record buffered until its
        key's hand-off is taken now (its watermark moves) and added later.
        """
        if src_offset <= self._watermarks.get(src_partition, -1):
            self.dropped += 1
            return False
        self._watermarks[src_partition] = src_offset
        self.accepted += 1
        return True

    def add(self, key: str, ts: float, value: int) -> None:
        """Count one accepted record into its (window, key) increment."""
        slot = (math.floor(ts / self.window_s) * self.window_s, key)
        acc = self._pending.get(slot)
        if acc is None:
            self._pending[slot] = [1, int(value)]
        else:
            acc[0] += 1
            acc[1] += int(value)

    def drain(self) -> list[Partial]:
        """The increments since the last drain, sorted by (window, key); resets them."""
        out = [Partial(ws, key, c, s) for (ws, key), (c, s) in sorted(self._pending.items())]
        self._pending = {}
        return out


def _sum_into(
    pending: dict[tuple[float, str], list[int]],
    starts: np.ndarray,
    keys: Sequence[str],
    values: np.ndarray,
) -> None:
    """Add each record's count (1) and value to ``pending[(window start, key)]``."""
    first = starts[0]
    if (starts == first).all():  # the usual batch: one window, summed per key in numpy
        ws = float(first)
        codes: dict[str, int] = {}
        code = np.fromiter(
            (codes.setdefault(k, len(codes)) for k in keys), dtype=np.int64, count=len(keys)
        )
        counts = np.bincount(code, minlength=len(codes))
        bounds = np.concatenate(([0], np.cumsum(counts)[:-1]))
        sums = np.add.reduceat(values[np.argsort(code, kind="stable")], bounds)
        slots: Iterable[tuple[tuple[float, str], int, int]] = (
            ((ws, k), c, v) for k, c, v in zip(codes, counts.tolist(), sums.tolist())
        )
    else:
        slots = (((w, k), 1, v) for w, k, v in zip(starts.tolist(), keys, values.tolist()))
    get = pending.get
    for slot, c, v in slots:
        acc = get(slot)
        if acc is None:
            pending[slot] = [c, v]
        else:
            acc[0] += c
            acc[1] += v


class LatencyWindows:
    """End-to-end latency samples per window, bounded by reservoir sampling.

    Each window keeps at most ``cap`` samples (Vitter's algorithm R with the
    injected ``rng``), plus the exact count and maximum, so p50/p90/p99 are
    estimates over a uniform sample and ``n``/``max`` are exact.

    Samples are taken a batch at a time (:meth:`add_many`) with the same result as
    one at a time in the batch's order: the ``i``-th sample of a window goes to slot
    ``i`` while fewer than ``cap`` are kept, after that it replaces slot
    ``j = rng.integers(0, i + 1)`` (0-based ``i``) if ``j < cap``; the draws are made
    in the batch's order over all its windows, one per sample beyond a window's cap.
    """

    def __init__(
        self, window_s: float = 15.0, cap: int = 4096, rng: np.random.Generator | None = None
    ):
        if cap < 1:
            raise ConfigError(f"cap must be >= 1, got {cap}")
        self.window_s = float(window_s)
        self.cap = int(cap)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._samples: dict[float, np.ndarray] = {}
        """window -> its reservoir buffer (``cap`` slots, the first ``min(n, cap)`` used)."""
        self._n: dict[float, int] = {}
        self._max: dict[float, float] = {}

    def add(self, window: float, latency_s: float) -> None:
        """Record one latency sample of ``window`` (reservoir-sampled beyond ``cap``)."""
        self.add_many(np.array([window], dtype=np.float64), np.array([latency_s], dtype=np.float64))

    def add_many(self, windows: np.ndarray, latencies: np.ndarray) -> None:
        """Record ``latencies[i]`` in window ``windows[i]`` for every ``i``, in order (as
        many :meth:`add` calls; class doc)."""
        w = np.asarray(windows, dtype=np.float64)
        lat = np.asarray(latencies, dtype=np.float64)
        if w.shape != lat.shape or w.ndim != 1:
            raise ValueError(f"windows and latencies differ in shape: {w.shape}, {lat.shape}")
        if not len(w):
            return
        first = w[0]
        if (w == first).all():  # the usual batch: one window
            groups: list[tuple[float, np.ndarray | slice]] = [(float(first), slice(None))]
        else:
            groups = [(float(u), np.flatnonzero(w == u)) for u in np.unique(w)]
        cap = self.cap
        counts = np.empty(len(w), dtype=np.int64)
        for u, idx in groups:  # each sample's count in its window, itself included
            n0 = self._n.get(u, 0)
            k = len(lat[idx])
            counts[idx] = np.arange(n0 + 1, n0 + k + 1)
            self._n[u] = n0 + k
            top = float(lat[idx].max())
            if top > self._max.get(u, float("-inf")):
                self._max[u] = top
        beyond = counts > cap
        draws = np.full(len(w), cap, dtype=np.int64)
        if beyond.any():  # one draw per sample beyond its window's cap, in batch order
            draws[beyond] = self._rng.integers(0, counts[beyond])
        for u, idx in groups:
            c, x, j = counts[idx], lat[idx], draws[idx]
            buf = self._samples.get(u)
            if buf is None:
                buf = self._samples[u] = np.empty(cap, dtype=np.float64)
            fill = c <= cap
            buf[c[fill] - 1] = x[fill]
            hit = np.flatnonzero(j < cap)
            if len(hit):  # the last sample drawn into a slot is the one it keeps
                rev = hit[::-1]
                _, last = np.unique(j[rev], return_index=True)
                keep = rev[last]
                buf[j[keep]] = x[keep]

    def drain(self) -> list[WindowLatency]:
        """Every window with samples, oldest first; resets them."""
        rows = []
        for w in sorted(self._samples):
            arr = self._samples[w][: min(self._n[w], self.cap)].copy()
            p50, p90, p99 = (float(x) for x in np.percentile(arr, [50, 90, 99]))
            rows.append(WindowLatency(w, p50, p90, p99, self._max[w], self._n[w], arr))
        self._samples, self._n, self._max = {}, {}, {}
        return rows


@dataclass(frozen=True, slots=True)
class WindowLatency:
    """One window's latency (seconds): percentiles of the sample, exact max and count.

    ``sample`` is the reservoir itself (at most ``cap`` values), so windows and
    workers can be merged later: weight each sample value by ``n / len(sample)``.
    """

    window_start: float
    p50: float
    p90: float
    p99: float
    max: float
    n: int
    sample: np.ndarray
