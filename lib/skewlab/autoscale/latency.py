"""The per-byte latency model of a consumer group (Landau et al. Sec. VI-C, Eq. 16-27).

Each consumer has a fixed queue (Eq. 17-22) and a rebalanced queue (Eq. 16, 24-27);
:class:`LatencyModel` turns assignments and a stream into :class:`LatencySegments`, which
answer percentiles exactly. Equations and choices where the seed is silent: docs/autoscale.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment
from skewlab.errors import ConfigError
from skewlab.metrics import LatencySummary

__all__ = ["LatencyModel", "LatencySegments", "LatencyStats"]


@dataclass(frozen=True)
class LatencyStats:
    """Percentiles (s) of the per-byte latency and the share of bytes with latency > 0."""

    summary: LatencySummary
    positive_share: float
    """Fraction of bytes whose latency is above 0 (the seed's Fig. 7, as a share)."""
    positive_p50: float
    positive_p90: float
    positive_p99: float
    """Percentiles over the bytes with latency > 0 only (the seed's Fig. 8 boxplots)."""


class LatencySegments:
    """Linear latency segments ``max(slope * i + intercept, 0)`` over ``i in [0, bytes]``.

    One segment per queue and iteration instead of one sample per byte; bytes count as a
    continuous mass, so percentiles are exact (closed-form counts below a latency).
    """

    def __init__(self, slope: ArrayLike, intercept: ArrayLike, nbytes: ArrayLike) -> None:
        self.slope = np.asarray(slope, dtype=np.float64).ravel()
        self.intercept = np.asarray(intercept, dtype=np.float64).ravel()
        self.nbytes = np.asarray(nbytes, dtype=np.float64).ravel()
        if not (self.slope.shape == self.intercept.shape == self.nbytes.shape):
            raise ConfigError("slope, intercept and bytes must have the same length")
        if self.nbytes.size and float(self.nbytes.min()) < 0:
            raise ConfigError("bytes must be >= 0")

    @property
    def total(self) -> float:
        """Bytes covered by all segments."""
        return float(self.nbytes.sum())

    def count_le(self, x: float) -> float:
        """Bytes whose latency is ``<= x`` (``x >= 0``), summed over all segments."""
        m, b, t = self.slope, self.intercept, self.nbytes
        out = np.where(b <= x, t, 0.0)  # m == 0
        with np.errstate(divide="ignore", invalid="ignore"):
            cross = (x - b) / m  # where m * i + b == x
        up = m > 0
        out = np.where(up, np.clip(cross, 0.0, t), out)
        down = m < 0
        out = np.where(down, t - np.clip(cross, 0.0, t), out)
        return float(out.sum())

    def max(self) -> float:
        """The largest latency of any byte (0 without bytes)."""
        if not self.nbytes.size:
            return 0.0
        ends = np.maximum(self.intercept, self.slope * self.nbytes + self.intercept)
        return float(np.maximum(ends, 0.0).max())

    def mean(self) -> float:
        """Byte-weighted mean latency (each clipped segment integrated exactly)."""
        if self.total <= 0:
            return 0.0
        m, b, t = self.slope, self.intercept, self.nbytes
        end = m * t + b
        lo, hi = np.minimum(b, end), np.maximum(b, end)
        both = t * (b + end) / 2.0
        with np.errstate(divide="ignore", invalid="ignore"):
            tri = hi * (hi / np.abs(m)) / 2.0  # only the positive part (a triangle)
        area = np.where(lo >= 0, both, np.where(hi <= 0, 0.0, tri))
        return float(area.sum() / self.total)

    def quantile(self, q: float, positive_only: bool = False) -> float:
        """The smallest latency ``x`` with at least a share ``q`` of bytes at or below it.

        ``positive_only`` restricts the bytes to those with latency > 0 (0 if none).
        """
        if not 0.0 <= q <= 1.0:
            raise ConfigError(f"q must be in [0, 1], got {q!r}")
        zero = self.count_le(0.0)
        base = zero if positive_only else 0.0
        total = self.total - base
        if total <= 0 or total <= 1e-12 * self.total:
            return 0.0
        goal = q * total * (1.0 - 1e-12)
        if zero - base >= goal:
            return 0.0
        lo, hi = 0.0, self.max()
        for _ in range(100):
            mid = (lo + hi) / 2.0
            if self.count_le(mid) - base >= goal:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-9 * max(hi, 1e-9):
                break
        return hi

    def stats(self) -> LatencyStats:
        """Percentiles, mean, max and the share of bytes with latency > 0, in one record."""
        total = self.total
        summary = LatencySummary(
            n=round(total),
            mean=self.mean(),
            p50=self.quantile(0.50),
            p90=self.quantile(0.90),
            p99=self.quantile(0.99),
            max=self.max(),
        )
        positive = 0.0 if total <= 0 else 1.0 - self.count_le(0.0) / total
        return LatencyStats(
            summary,
            positive,
            positive_p50=self.quantile(0.50, positive_only=True),
            positive_p90=self.quantile(0.90, positive_only=True),
            positive_p99=self.quantile(0.99, positive_only=True),
        )


@dataclass(frozen=True)
class LatencyModel:
    """Sec. VI-C parameters: real consumer capacity ``C_bar``, 30 s iterations, 5 s rebalance."""

    consumer_capacity: float
    iteration_s: float = 30.0
    rebalance_s: float = 5.0

    def __post_init__(self) -> None:
        if not self.consumer_capacity > 0:
            raise ConfigError(f"consumer_capacity must be > 0, got {self.consumer_capacity!r}")
        if not self.iteration_s > 0:
            raise ConfigError(f"iteration_s must be > 0, got {self.iteration_s!r}")
        if not 0 <= self.rebalance_s < self.iteration_s:
            raise ConfigError(
                f"rebalance_s must be in [0, iteration_s={self.iteration_s}), "
                f"got {self.rebalance_s!r}"
            )

    def segments(self, assignments: Sequence[Assignment], stream: ArrayLike) -> LatencySegments:
        """Every queue-iteration's latency segment for ``assignments[k]`` under ``stream[k]``.

        Per consumer ``c`` and iteration ``k``: the fixed queue (kept partitions, Eq. 17) has
        ``W_F`` (Eq. 18), ``R_F = C_bar`` if ``W_R = 0`` else ``min(C_bar, W_F)``, slope
        ``1/R_F - 1/W_F`` (Eq. 19), intercept the backlog carried from ``k - 1`` (Eq. 20), over
        ``T_F = iteration_s * W_F`` bytes (Eq. 21-22). The rebalanced queue (partitions moved
        to ``c``, Eq. 16) has ``W_R`` (Eq. 24), ``R_R = C_bar - R_F``, slope
        ``1/R_R - 1/W_R`` (Eq. 25) and intercept ``rebalance_s`` over ``iteration_s * W_R``
        bytes (Eq. 26-27). Raises ConfigError when the stream and assignments disagree.
        """
        speeds = np.asarray(stream, dtype=np.float64)
        if speeds.ndim != 2 or speeds.shape[0] != len(assignments):
            raise ConfigError(
                f"stream must be (iterations={len(assignments)}, partitions), got {speeds.shape}"
            )
        cbar, span = self.consumer_capacity, self.iteration_s
        slopes: list[float] = []
        icepts: list[float] = []
        sizes: list[float] = []
        carry: dict[int, float] = {}
        prev: np.ndarray | None = None
        for k, a in enumerate(assignments):
            s = speeds[k]
            own = a.array()
            if len(own) != len(s):
                raise ConfigError(f"iteration {k}: {len(s)} speeds for {len(own)} partitions")
            moved = (own >= 0) & (prev >= 0) & (own != prev) if prev is not None else own < -1
            valid = own >= 0
            w_f = np.bincount(own[valid & ~moved], weights=s[valid & ~moved], minlength=1)
            w_r = np.bincount(own[moved], weights=s[moved], minlength=1)
            nxt: dict[int, float] = {}
            for c in a.members:
                wf = float(w_f[c]) if c < len(w_f) else 0.0
                wr = float(w_r[c]) if c < len(w_r) else 0.0
                r_f = cbar if wr == 0 else min(cbar, wf)
                r_r = cbar - r_f
                if wf > 0:
                    m_f = 1.0 / r_f - 1.0 / wf  # Eq. 19
                    b_f = carry.get(c, 0.0)  # Eq. 20
                    t_f = span * wf  # Eq. 21
                    slopes.append(m_f)
                    icepts.append(b_f)
                    sizes.append(t_f)
                    nxt[c] = max(m_f * t_f + b_f, 0.0)  # Eq. 22 at i = T_F
                if wr > 0:
                    m_r = (1.0 / r_r - 1.0 / wr) if r_r > 0 else 1.0 / wr  # Eq. 25
                    slopes.append(m_r)
                    icepts.append(self.rebalance_s)
                    sizes.append(span * wr)  # Eq. 26
            carry = nxt
            prev = own
        return LatencySegments(slopes, icepts, sizes)
