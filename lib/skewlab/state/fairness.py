"""Fairness degree of a scale-out: seed Eq. 3-6.

``fd_op(t_k) = int min(cur, need) dt / int need dt`` per operator (Eq. 3-5, given resources
capped at the need so ``fd`` stays in [0, 1]) and ``Fd_app`` = the mean over the bottlenecked
operators (Eq. 6). Why the cap and which units: docs/state.md, "Fairness degree".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike

from skewlab.errors import ConfigError

__all__ = ["FairnessTracker", "app_fairness", "fairness_degree"]


def fairness_degree(dt: ArrayLike, cur: ArrayLike, need: ArrayLike) -> np.ndarray:
    """``fd(t_k)`` after each step ``k`` (Eq. 5) from per-step durations and rates.

    Steps with ``int need = 0`` so far read as 1.0 (nothing was needed, all of it
    was given).
    """
    d, c, n = (np.asarray(x, dtype=np.float64) for x in (dt, cur, need))
    if not d.shape == c.shape == n.shape or d.ndim != 1:
        raise ConfigError("dt, cur and need must be 1-d arrays of one length")
    if (d < 0).any() or (c < 0).any() or (n < 0).any():
        raise ConfigError("dt, cur and need must be >= 0")
    given = np.cumsum(d * np.minimum(c, n))
    needed = np.cumsum(d * n)
    out = np.ones_like(needed)
    np.divide(given, needed, out=out, where=needed > 0)
    return out


def app_fairness(fds: Sequence[float], bottlenecked: Sequence[bool] | None = None) -> float:
    """``Fd_app`` (Eq. 6): the mean ``fd`` of the bottlenecked operators (all if not given).

    1.0 when no operator is bottlenecked (there is nothing unfair to average).
    """
    values = np.asarray(fds, dtype=np.float64)
    if bottlenecked is not None:
        mask = np.asarray(bottlenecked, dtype=bool)
        if mask.shape != values.shape:
            raise ConfigError("bottlenecked must have one flag per fd")
        values = values[mask]
    if ((values < 0) | (values > 1)).any():
        raise ConfigError("every fd must be in [0, 1]")
    return float(values.mean()) if values.size else 1.0


class FairnessTracker:
    """Eq. 5 accumulated step by step (what the simulator and a live loop update)."""

    def __init__(self) -> None:
        self.given = 0.0
        self.needed = 0.0

    def add(self, dt: float, cur: float, need: float) -> None:
        """Account one step of ``dt`` seconds with ``cur`` resources given and ``need`` needed.

        Adds ``dt * min(cur, need)`` to the given and ``dt * need`` to the needed integral;
        raises :class:`ConfigError` if any argument is negative.
        """
        if dt < 0 or cur < 0 or need < 0:
            raise ConfigError("dt, cur and need must be >= 0")
        self.given += dt * min(cur, need)
        self.needed += dt * need

    @property
    def fd(self) -> float:
        """``fd(t_k)`` so far (Eq. 5): given / needed, 1.0 while nothing was needed."""
        return self.given / self.needed if self.needed > 0 else 1.0
