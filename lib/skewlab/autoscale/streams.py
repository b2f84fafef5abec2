"""Streams of write-speed measurements (Landau et al. Sec. VI-B, Eq. 15).

A stream is an ``(N, P)`` array of speeds; ``clip=True`` caps them at ``C`` like the authors'
generator (``clip=False`` is Eq. 15 verbatim; why: docs/autoscale.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from skewlab.errors import ConfigError

__all__ = [
    "DELTAS",
    "START_CONDITIONS",
    "MeasurementStream",
    "load_measurements",
    "measurements_array",
]

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


def measurements_array(
    measurements: Sequence[Mapping[str, Mapping[str, float]]],
) -> tuple[np.ndarray, tuple[tuple[str, int], ...]]:
    """``(N, P)`` speeds and the ``(topic, partition)`` of each column, in partition order.

    ``measurements[k]`` maps topic -> partition (a decimal string) -> speed, as the
    authors' monitor sequences do. Columns go topic by topic (topics sorted by name),
    partitions in numeric order within a topic: the order Kafka's assignors sort them in.
    Every measurement must name the same partitions.
    """
    if not measurements:
        raise ConfigError("a measurement stream needs at least one measurement")
    columns = tuple(
        (topic, int(p))
        for topic in sorted(measurements[0])
        for p in sorted(measurements[0][topic], key=int)
    )
    rows = []
    for k, m in enumerate(measurements):
        named = {(t, int(p)) for t, parts in m.items() for p in parts}
        if named != set(columns):
            raise ConfigError(f"measurement {k} names other partitions than measurement 0")
        rows.append([float(m[t][str(p)]) for t, p in columns])
    speeds = np.asarray(rows, dtype=np.float64)
    if (speeds < 0).any():
        raise ConfigError("speeds must be >= 0")
    return speeds, columns


def load_measurements(path: str | Path) -> tuple[np.ndarray, tuple[tuple[str, int], ...]]:
    """:func:`measurements_array` of a JSON file (a list of ``{topic: {partition: speed}}``)."""
    return measurements_array(json.loads(Path(path).read_text()))
