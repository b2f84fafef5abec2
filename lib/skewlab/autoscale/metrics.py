"""Rebalance and operational costs of consumer-group assignments (Landau et al.).

Moved partitions (Eq. 9, Sec. IV-A), Rscore (Eq. 11), CBS (Eq. 28), average Rscore (Eq. 29)
and the Pareto front over (CBS, average Rscore) (Sec. VI-E).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment, check_speeds
from skewlab.errors import ConfigError

__all__ = ["average_rscore", "cbs", "moved_partitions", "pareto_front", "rscore"]


def moved_partitions(previous: Assignment | None, current: Assignment) -> np.ndarray:
    """Indices ``j`` with a consumer at both ``k - 1`` and ``k``, and a different one.

    Column ``j`` of ``Delta(k) = X(t_k) - X(t_{k-1})`` (Eq. 9) holds both a 1 and a -1;
    arrivals and departures are not rebalances (Sec. IV-A). ``previous=None``: none moved.
    """
    if previous is None:
        return np.zeros(0, dtype=np.int64)
    if previous.partitions != current.partitions:
        raise ConfigError(
            f"assignments differ in size: {previous.partitions} vs {current.partitions} partitions"
        )
    a, b = previous.array(), current.array()
    return np.flatnonzero((a >= 0) & (b >= 0) & (a != b))


def rscore(
    previous: Assignment | None, current: Assignment, speeds: ArrayLike, capacity: float
) -> float:
    """Eq. 11: the speeds of the moved partitions at ``t_k``, in units of ``C``."""
    if not capacity > 0:
        raise ConfigError(f"capacity must be > 0, got {capacity!r}")
    s = check_speeds(speeds)
    if len(s) != current.partitions:
        raise ConfigError(f"{len(s)} speeds for {current.partitions} partitions")
    return float(s[moved_partitions(previous, current)].sum()) / capacity


def cbs(bins: ArrayLike) -> np.ndarray:
    """Eq. 28 for every algorithm: ``bins[a, i]`` consumers of algorithm ``a`` at iteration ``i``.

    The reference per iteration is the fewest consumers any algorithm of the
    set used, so CBS is relative to the compared set (0 = always the fewest).
    """
    z = np.asarray(bins, dtype=np.float64)
    if z.ndim != 2 or z.shape[0] == 0 or z.shape[1] == 0:
        raise ConfigError(f"bins must be (algorithms, iterations) and non-empty, got {z.shape}")
    best = z.min(axis=0)
    if float(best.min()) <= 0:
        raise ConfigError("every iteration needs at least one consumer to compute CBS")
    return np.asarray(((z - best) / best).mean(axis=1))


def average_rscore(rscores: ArrayLike) -> np.ndarray:
    """Eq. 29: the mean Rscore of each row (``rscores[a, i]``), or of a 1-D series."""
    r = np.asarray(rscores, dtype=np.float64)
    if r.size == 0:
        raise ConfigError("no Rscore values to average")
    return np.asarray(r.mean(axis=-1))


def pareto_front(points: Sequence[Sequence[float]] | np.ndarray) -> list[int]:
    """Indices of the points no other point dominates (all objectives minimised).

    ``q`` dominates ``p`` when ``q <= p`` in every objective and ``q < p`` in
    one. Equal points are all kept. Indices come back in input order.
    """
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2:
        raise ConfigError(f"points must be (n, objectives), got shape {pts.shape}")
    front = []
    for i, p in enumerate(pts):
        dominated = np.any(np.all(pts <= p, axis=1) & np.any(pts < p, axis=1))
        if not dominated:
            front.append(i)
    return front
