"""Fairness degree of a scale-out: seed Eq. 3-6.

For operator ``op`` the resources it consumes, ``cur_op(t)``, and the resources
it needs to not be a bottleneck, ``need_op(t)``, are integrated over the run
(Eq. 3, 4) and the fairness degree at ``t_k`` is their ratio (Eq. 5)::

    fd_op(t_k) = int_0^t_k cur_op(t) dt / int_0^t_k need_op(t) dt

The seed states ``fd in [0, 1]`` because a bottlenecked operator never has more
than it needs. We make that hold for any run by counting only the resources
that serve the need, ``min(cur, need)``: capacity beyond the need (idle
backups, over-provisioning) does not make a scale-out fairer. The application
average over the ``n`` operators that are bottlenecked at ``t_k`` is Eq. 6::

    Fd_app(t_k) = (1 / n) * sum_i fd_op_i(t_k)

Resources are in instance units (one instance = one unit of capacity) in the
simulator; any unit works as long as ``cur`` and ``need`` share it.
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
        if dt < 0 or cur < 0 or need < 0:
            raise ConfigError("dt, cur and need must be >= 0")
        self.given += dt * min(cur, need)
        self.needed += dt * need

    @property
    def fd(self) -> float:
        return self.given / self.needed if self.needed > 0 else 1.0
