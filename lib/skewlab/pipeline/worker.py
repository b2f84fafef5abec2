"""The worker's stateful operator: windowed per-key count and sum, exactly once.

Replays are dropped by per-source-partition offset watermarks; results leave as increments
that the job commits with the watermarks in one transaction (why this is exact:
docs/pipeline.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from skewlab.errors import ConfigError


def window_start(ts: float, window_s: float) -> float:
    """Start of the tumbling event-time window that holds ``ts``."""
    return math.floor(ts / window_s) * window_s


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
        """Add records; return a boolean mask of those taken (False = replay dropped)."""
        n = len(keys)
        taken = np.zeros(n, dtype=bool)
        wm = self._watermarks
        pending = self._pending
        w = self.window_s
        for i in range(n):
            p = int(src_partition[i])
            o = int(src_offset[i])
            if o <= wm.get(p, -1):
                continue
            wm[p] = o
            taken[i] = True
            slot = (float(np.floor(ts[i] / w) * w), keys[i])
            acc = pending.get(slot)
            if acc is None:
                pending[slot] = [1, int(values[i])]
            else:
                acc[0] += 1
                acc[1] += int(values[i])
        k = int(taken.sum())
        self.accepted += k
        self.dropped += n - k
        return taken

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


class LatencyWindows:
    """End-to-end latency samples per window, bounded by reservoir sampling.

    Each window keeps at most ``cap`` samples (Vitter's algorithm R with the
    injected ``rng``), plus the exact count and maximum, so p50/p90/p99 are
    estimates over a uniform sample and ``n``/``max`` are exact.
    """

    def __init__(
        self, window_s: float = 15.0, cap: int = 4096, rng: np.random.Generator | None = None
    ):
        self.window_s = float(window_s)
        self.cap = int(cap)
        self._rng = rng if rng is not None else np.random.default_rng(0)
        self._samples: dict[float, list[float]] = {}
        self._n: dict[float, int] = {}
        self._max: dict[float, float] = {}

    def add(self, window: float, latency_s: float) -> None:
        """Record one latency sample of ``window`` (reservoir-sampled beyond ``cap``)."""
        n = self._n.get(window, 0) + 1
        self._n[window] = n
        if latency_s > self._max.get(window, float("-inf")):
            self._max[window] = latency_s
        s = self._samples.setdefault(window, [])
        if len(s) < self.cap:
            s.append(latency_s)
        else:
            j = int(self._rng.integers(0, n))
            if j < self.cap:
                s[j] = latency_s

    def drain(self) -> list[WindowLatency]:
        """Every window with samples, oldest first; resets them."""
        rows = []
        for w in sorted(self._samples):
            arr = np.asarray(self._samples[w], dtype=np.float64)
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
