"""Load-balance and latency metrics, each as its seed defines it.

Load metrics (DKG ``STD_DEV`` / ``DIST_COST`` / ``THROUGHPUT_RATIO``, DLB Eq. (2) imbScore and
its key-granularity floor, SMALOPS Eq. (2) ``E_LB``) take per-worker loads; every std is the
population one. Latency: :class:`LatencySummary`, exact or from a bounded
:class:`LatencyHistogram`. Which seed defines what, and why: docs/metrics.md.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from skewlab.errors import ConfigError

__all__ = [
    "KeyFloor",
    "LatencyHistogram",
    "LatencySummary",
    "dist_cost",
    "e_lb",
    "imb_score",
    "key_floor",
    "key_floor_assign",
    "key_floor_lower",
    "latency_summary",
    "std_dev_pct",
    "throughput",
]


def _loads(loads: ArrayLike) -> np.ndarray:
    arr = np.asarray(loads, dtype=np.float64).ravel()
    if arr.size == 0:
        raise ConfigError("loads must hold at least one worker's load")
    if np.any(arr < 0) or not np.all(np.isfinite(arr)):
        raise ConfigError("loads must be finite and non-negative")
    return arr


def std_dev_pct(loads: ArrayLike) -> float:
    """DKG ``STD_DEV``: population std of each worker's share of all tuples, in %.

    ``share_w = 100 * load_w / sum(load)``; the result is ``std(share)``. A
    perfectly even split gives 0; all load on one of ``W`` workers gives
    ``100 * sqrt(W - 1) / W``. No load at all gives 0.
    """
    arr = _loads(loads)
    total = float(arr.sum())
    if total == 0.0:
        return 0.0
    return float(np.std(100.0 * arr / total))


def dist_cost(workers_per_key: ArrayLike) -> float:
    """DKG ``DIST_COST = totalWorkersUsed / distinctKeys``.

    ``workers_per_key[k]`` is the number of distinct workers that received key
    ``k``; keys with 0 (never seen) are not distinct keys of the stream and are
    ignored. KEY grouping gives exactly 1, PKG at most 2, SHUFFLE up to ``W``.
    No keys at all gives 0.
    """
    arr = np.asarray(workers_per_key, dtype=np.int64).ravel()
    if np.any(arr < 0):
        raise ConfigError("workers_per_key must be non-negative counts")
    seen = arr[arr > 0]
    if seen.size == 0:
        return 0.0
    return float(seen.sum() / seen.size)


def imb_score(loads: ArrayLike) -> float:
    """DLB Eq. (2): ``imbScore = 100 * std(eng_load) / mean(eng_load)`` (relative std, %).

    DLB rebalances when this exceeds its threshold theta (15 %). Zero mean load
    gives 0 (nothing to balance).
    """
    arr = _loads(loads)
    mean = float(arr.mean())
    if mean == 0.0:
        return 0.0
    return float(100.0 * np.std(arr) / mean)


def e_lb(loads: ArrayLike) -> float:
    """SMALOPS Eq. (2): load-balancing error ``E_LB = sum_j |R_pj - R_avg|``.

    ``loads[j]`` is ``R_pj``, the rate into partition ``p_j`` (SMALOPS counts
    only hot keys' rates; pass whichever rates you balance).
    """
    arr = _loads(loads)
    return float(np.abs(arr - arr.mean()).sum())


def throughput(events: int, seconds: float) -> float:
    """DKG ``THROUGHPUT_RATIO``: ``events / seconds`` (0 when no time has passed)."""
    if events < 0:
        raise ConfigError(f"events must be >= 0, got {events}")
    if seconds < 0:
        raise ConfigError(f"seconds must be >= 0, got {seconds}")
    return 0.0 if seconds == 0 else events / seconds


@dataclass(frozen=True, slots=True)
class LatencySummary:
    """Latency percentiles in seconds over ``n`` samples (all 0 when ``n == 0``).

    The same shape as a row of the ``latency`` Delta table (p50/p90/p99/max/n),
    plus the mean.
    """

    n: int
    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    def to_dict(self) -> dict[str, Any]:
        """The six fields as a plain dict (``n`` .. ``max``), e.g. for a table row or JSON."""
        return asdict(self)

    @classmethod
    def empty(cls) -> LatencySummary:
        """The summary of no samples: ``n == 0`` and every figure 0."""
        return cls(0, 0.0, 0.0, 0.0, 0.0, 0.0)


def latency_summary(samples: ArrayLike) -> LatencySummary:
    """Exact :class:`LatencySummary` of an array of samples (nearest-rank percentiles)."""
    arr = np.asarray(samples, dtype=np.float64).ravel()
    if arr.size == 0:
        return LatencySummary.empty()
    p50, p90, p99 = np.percentile(arr, [50, 90, 99], method="inverted_cdf")
    return LatencySummary(
        n=int(arr.size),
        mean=float(arr.mean()),
        p50=float(p50),
        p90=float(p90),
        p99=float(p99),
        max=float(arr.max()),
    )


class LatencyHistogram:
    """Bounded histogram of non-negative samples on log-spaced bins.

    Memory is fixed (``bins_per_decade * decades + 2`` counters) however many
    samples are added, so it summarises billions of events. ``n``, ``mean``,
    ``min`` and ``max`` are exact. A percentile is the nearest-rank sample's
    bin, interpolated geometrically inside it, so its relative error is below
    one bin width: ``10 ** (1 / bins_per_decade) - 1`` (2.3 % at the default
    100 bins per decade). Samples below ``lo`` (including exact zeros, the
    common no-wait case) fall in an underflow bin reported as the exact
    minimum; samples above ``hi`` in an overflow bin reported as the exact
    maximum.
    """

    __slots__ = ("_counts", "_log_lo", "_max", "_min", "_n", "_sum", "bins_per_decade", "hi", "lo")

    def __init__(self, lo: float = 1e-9, hi: float = 1e6, bins_per_decade: int = 100) -> None:
        if not (0 < lo < hi) or not math.isfinite(hi):
            raise ConfigError(f"need 0 < lo < hi < inf, got lo={lo}, hi={hi}")
        if bins_per_decade < 1:
            raise ConfigError(f"bins_per_decade must be >= 1, got {bins_per_decade}")
        self.lo = float(lo)
        self.hi = float(hi)
        self.bins_per_decade = int(bins_per_decade)
        self._log_lo = math.log10(self.lo)
        inner = math.ceil((math.log10(self.hi) - self._log_lo) * self.bins_per_decade)
        # counts[0] underflow (< lo), counts[1..inner] log bins, counts[-1] overflow (>= hi)
        self._counts = np.zeros(inner + 2, dtype=np.int64)
        self._n = 0
        self._sum = 0.0
        self._min = math.inf
        self._max = 0.0

    @property
    def n(self) -> int:
        """Number of samples added so far (merged histograms included); exact."""
        return self._n

    def _inner(self) -> int:
        return len(self._counts) - 2

    def add(self, samples: ArrayLike) -> None:
        """Count every sample of an array (negative samples raise)."""
        arr = np.asarray(samples, dtype=np.float64).ravel()
        if arr.size == 0:
            return
        lo_v = float(arr.min())
        if lo_v < 0 or not math.isfinite(float(arr.max())):
            raise ConfigError("latency samples must be finite and >= 0")
        inner = self._inner()
        pos = (np.log10(np.maximum(arr, self.lo)) - self._log_lo) * self.bins_per_decade
        idx = np.where(arr < self.lo, 0, np.minimum(pos.astype(np.int64) + 1, inner + 1))
        idx[arr >= self.hi] = inner + 1
        self._counts += np.bincount(idx, minlength=inner + 2)
        self._n += int(arr.size)
        self._sum += float(arr.sum())
        self._min = min(self._min, lo_v)
        self._max = max(self._max, float(arr.max()))

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s counts (same bins required)."""
        if (other.lo, other.hi, other.bins_per_decade) != (self.lo, self.hi, self.bins_per_decade):
            raise ConfigError("cannot merge histograms with different bins")
        self._counts += other._counts
        self._n += other._n
        self._sum += other._sum
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    def _edge(self, i: int) -> float:
        """Lower edge of log bin ``i`` (1-based)."""
        return 10.0 ** (self._log_lo + (i - 1) / self.bins_per_decade)

    def quantile(self, q: float) -> float:
        """The ``q``-quantile (0 <= q <= 1), nearest rank, within one bin width."""
        if not 0.0 <= q <= 1.0:
            raise ConfigError(f"quantile must be in [0, 1], got {q}")
        if self._n == 0:
            return 0.0
        rank = max(1, math.ceil(q * self._n))
        cum = np.cumsum(self._counts)
        i = int(np.searchsorted(cum, rank, side="left"))
        if i == 0:
            return self._min
        if i == len(self._counts) - 1:
            return self._max
        before = int(cum[i - 1])
        frac = (rank - before) / int(self._counts[i])
        lo_e, hi_e = self._edge(i), self._edge(i + 1)
        value = lo_e * (hi_e / lo_e) ** frac
        return float(min(max(value, self._min), self._max))

    def summary(self) -> LatencySummary:
        """:class:`LatencySummary` of every sample added (empty when nothing was added).

        ``n``, ``mean`` and ``max`` are exact; p50/p90/p99 come from :meth:`quantile`, within
        one bin width.
        """
        if self._n == 0:
            return LatencySummary.empty()
        return LatencySummary(
            n=self._n,
            mean=self._sum / self._n,
            p50=self.quantile(0.50),
            p90=self.quantile(0.90),
            p99=self.quantile(0.99),
            max=self._max,
        )

    def cdf(self) -> tuple[np.ndarray, np.ndarray]:
        """``(values, fraction <= value)`` at the upper edge of every non-empty bin (for plots)."""
        if self._n == 0:
            return np.zeros(0), np.zeros(0)
        inner = self._inner()
        uppers = np.empty(len(self._counts))
        uppers[0] = min(self.lo, self._max)
        uppers[1 : inner + 1] = 10.0 ** (
            self._log_lo + np.arange(1, inner + 1) / self.bins_per_decade
        )
        uppers[-1] = self._max
        uppers = np.minimum(uppers, self._max)
        keep = self._counts > 0
        frac = np.cumsum(self._counts) / self._n
        return uppers[keep], frac[keep]


@dataclass(frozen=True, eq=False)
class KeyFloor:
    """How low imbScore can go on one window when whole keys are placed (DLB's problem).

    Placing whole keys on engines to minimise imbScore is NP-hard (DLB section
    3.1: job shop scheduling), so the floor is bracketed:

    * ``lower``: no assignment of whole keys scores below it
      (:func:`key_floor_lower`);
    * ``achievable``: the imbScore of ``assignment``, an assignment we found
      (:func:`key_floor_assign`: LPT, then improving moves and swaps).

    ``lower <= achievable`` always; when they are close the floor is known.
    """

    lower: float
    achievable: float
    assignment: np.ndarray

    @property
    def gap(self) -> float:
        """``achievable - lower`` in imbScore points (how loose the bracket is)."""
        return self.achievable - self.lower


def key_floor_lower(key_loads: ArrayLike, workers: int) -> float:
    """A lower bound on imbScore over every assignment of these keys to ``workers`` engines.

    In any assignment, the ``j`` most loaded engines carry at least the ``j``
    heaviest keys, so the sorted engine loads have prefix sums at least those
    of the sorted key loads (``j <= workers``) and the same total ``S``. The
    least spread vector under these constraints is the water-filling one: for
    ``j = 0, 1, ...`` the ``j``-th heaviest key sits alone on its engine while it
    exceeds ``(S - heavier keys) / (workers - j)``; the rest share the remaining
    engines equally. Its imbScore is returned (``max(mean, hottest key)`` for the
    most loaded engine is the first step of this bound).
    """
    w = _workers(workers)
    loads = _key_loads(key_loads)
    total = float(loads.sum())
    if total <= 0.0:
        return 0.0
    top = np.sort(loads)[::-1][:w]
    engines = np.empty(w)
    rest = total
    for j in range(w):
        level = rest / (w - j)
        if j < top.size and top[j] > level:
            engines[j] = top[j]
            rest -= float(top[j])
        else:
            engines[j:] = level
            break
    return imb_score(engines)


def key_floor_assign(key_loads: ArrayLike, workers: int, *, max_steps: int = 100_000) -> np.ndarray:
    """An assignment of whole keys to engines with a low imbScore (the achievable floor).

    1. LPT: keys heaviest first, each to the least loaded engine (ties: lowest index).
    2. Local search on the sum of squared engine loads (the mean is fixed, so
       this is imbScore): for every pair of engines ``a`` (heavier) and ``b``
       with gap ``g = L_a - L_b``, moving a key of load ``x`` from ``a`` to ``b``
       lowers it by ``2x(g - x)`` and swapping ``x`` on ``a`` with ``y < x`` on
       ``b`` by ``2d(g - d)``, ``d = x - y``; the best move or swap of the pair
       (``x`` or ``d`` nearest ``g / 2``) is applied, pairs taken from the
       widest gap down, until no pair improves or ``max_steps`` is reached.

    Returns the engine of each key (``int64``, aligned with ``key_loads``).
    """
    w = _workers(workers)
    loads = _key_loads(key_loads)
    out = np.zeros(loads.size, dtype=np.int64)
    if loads.size == 0 or w == 1:
        return out
    order = np.argsort(-loads, kind="stable")
    eng = np.zeros(w)
    for i in order.tolist():
        e = int(np.argmin(eng))
        out[i] = e
        eng[e] += loads[i]
    for _ in range(max_steps):
        if not _improve_once(loads, out, eng):
            break
    return out


def _improve_once(loads: np.ndarray, where: np.ndarray, eng: np.ndarray) -> bool:
    """One best move-or-swap on the widest improvable pair of engines; False at a local optimum."""
    by_load = np.argsort(-eng, kind="stable").tolist()
    pairs = [(a, b) for i, a in enumerate(by_load) for b in by_load[i + 1 :]]
    pairs.sort(key=lambda ab: -(eng[ab[0]] - eng[ab[1]]))
    for a, b in pairs:
        g = float(eng[a] - eng[b])
        if g <= 0.0:
            return False
        on_a = np.flatnonzero(where == a)
        xa = loads[on_a]
        best, pick = 0.0, None
        ok = (xa > 0) & (xa < g)
        if ok.any():
            i = int(np.argmin(np.abs(np.where(ok, xa, np.inf) - g / 2)))
            best, pick = 2.0 * xa[i] * (g - xa[i]), (int(on_a[i]), -1)
        on_b = np.flatnonzero(where == b)
        if on_b.size and on_a.size:
            yb_order = np.argsort(loads[on_b], kind="stable")
            yb = loads[on_b][yb_order]
            target = xa - g / 2
            j = np.clip(np.searchsorted(yb, target), 0, yb.size - 1)
            for cand in (j, np.maximum(j - 1, 0)):
                d = xa - yb[cand]
                gain = np.where((d > 0) & (d < g), 2.0 * d * (g - d), 0.0)
                k = int(np.argmax(gain))
                if gain[k] > best:
                    best, pick = float(gain[k]), (int(on_a[k]), int(on_b[yb_order[cand[k]]]))
        if pick is not None and best > 1e-9 * g * g:
            ka, kb = pick
            where[ka] = b
            eng[a] -= loads[ka]
            eng[b] += loads[ka]
            if kb >= 0:
                where[kb] = a
                eng[b] -= loads[kb]
                eng[a] += loads[kb]
            return True
    return False


def key_floor(key_loads: ArrayLike, workers: int) -> KeyFloor:
    """:class:`KeyFloor` of one window: the lower bound and the found assignment's imbScore."""
    loads = _key_loads(key_loads)
    assignment = key_floor_assign(loads, workers)
    w = _workers(workers)
    achieved = imb_score(np.bincount(assignment, weights=loads, minlength=w)) if loads.size else 0.0
    lower = key_floor_lower(loads, w)
    return KeyFloor(lower=min(lower, achieved), achievable=achieved, assignment=assignment)


def _workers(workers: int) -> int:
    if not isinstance(workers, int | np.integer) or isinstance(workers, bool) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    return int(workers)


def _key_loads(key_loads: ArrayLike) -> np.ndarray:
    arr = np.asarray(key_loads, dtype=np.float64).ravel()
    if np.any(arr < 0) or not np.all(np.isfinite(arr)):
        raise ConfigError("key loads must be finite and non-negative")
    return arr
