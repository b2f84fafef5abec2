"""Streams of write-speed measurements (Landau et al. Sec. VI-B, Eq. 15).

A stream is an ``(N, P)`` array of speeds; ``clip=True`` caps them at ``C`` like the authors'
generator (``clip=False`` is Eq. 15 verbatim; why: docs/autoscale.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from skewlab.errors import ConfigError

__all__ = ["DELTAS", "START_CONDITIONS", "MeasurementStream"]

DELTAS: tuple[int, ...] = (0, 5, 10, 15, 20, 25)
"""The seed's six variabilities (% of C per step)."""

START_CONDITIONS: tuple[str | float, ...] = ("uniform", 0.0, 50.0, 100.0)
"""The seed's four initial speeds: uniform in [0, 100]% C, or 0, 50, 100% of C."""


@dataclass(frozen=True)
class MeasurementStream:
    """Parameters of one seeded stream; :meth:`generate` returns the ``(N, P)`` speeds.

    ``start`` is ``"uniform"`` or a percentage of ``capacity`` in [0, 100].
    The same parameters (and ``seed``) always give the same stream.
    """

    partitions: int = 200
    measurements: int = 500
    delta: float = 5.0
    start: str | float = "uniform"
    capacity: float = 100.0
    clip: bool = True
    seed: int = 1

    def __post_init__(self) -> None:
        for what, v in (("partitions", self.partitions), ("measurements", self.measurements)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{what} must be an int >= 1, got {v!r}")
        if not (0.0 <= self.delta <= 100.0):
            raise ConfigError(f"delta must be in [0, 100] (% of C), got {self.delta!r}")
        if not self.capacity > 0:
            raise ConfigError(f"capacity must be > 0, got {self.capacity!r}")
        if isinstance(self.start, str):
            if self.start != "uniform":
                raise ConfigError(
                    f"start must be 'uniform' or a % of C in [0, 100], got {self.start!r}"
                )
        elif not (0.0 <= float(self.start) <= 100.0):
            raise ConfigError(
                f"start must be 'uniform' or a % of C in [0, 100], got {self.start!r}"
            )

    def generate(self) -> np.ndarray:
        """The stream: row ``k`` holds ``s_j(t_{k+1})`` for every partition ``j``.

        Eq. 15: ``s_j(t_k) = max{0, s_j(t_{k-1}) + phi(delta) / 100 * C}`` with
        ``phi(delta) ~ U[-delta, delta]``, capped at ``C`` when ``clip``. Same seed, same stream.
        """
        rng = np.random.default_rng(self.seed)
        p, n, c = self.partitions, self.measurements, self.capacity
        out = np.empty((n, p))
        if self.start == "uniform":
            out[0] = rng.uniform(0.0, c, size=p)
        else:
            out[0] = float(self.start) / 100.0 * c
        steps = rng.uniform(-self.delta, self.delta, size=(n - 1, p)) / 100.0 * c
        hi = c if self.clip else np.inf
        for k in range(1, n):
            out[k] = np.clip(out[k - 1] + steps[k - 1], 0.0, hi)
        return out
