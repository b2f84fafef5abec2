"""Per-event service (processing) time models of the simulator.

* :class:`ConstantService` -- every event costs the same, like DKG's WorkerBolt
  ``processDuration`` (default 1 ms) or SMALOPS' 50 us consumers.
* :class:`UniformService` -- uniform in ``[low, high]``, like SMALOPS' sweep of
  consumer processing times between 10 and 50 us.

Samples are drawn from an injected :class:`numpy.random.Generator` in stream
order, so two runs over the same seeded stream give every event the same cost
whichever grouping routes it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar, Protocol, runtime_checkable

import numpy as np

from skewlab.errors import ConfigError

__all__ = ["ConstantService", "ServiceTime", "UniformService", "parse_service_us"]


@runtime_checkable
class ServiceTime(Protocol):
    """A frozen service-time model; ``mean`` in seconds."""

    name: ClassVar[str]

    @property
    def mean(self) -> float: ...

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` service times in seconds (``float64``)."""
        ...


def _check_seconds(what: str, value: float) -> None:
    if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what} must be a positive number of seconds, got {value!r}")


@dataclass(frozen=True, slots=True)
class ConstantService:
    """Every event takes ``seconds`` (M/D/1 per worker with Poisson arrivals)."""

    name: ClassVar[str] = "constant"
    seconds: float

    def __post_init__(self) -> None:
        _check_seconds("service time", self.seconds)

    @property
    def mean(self) -> float:
        return float(self.seconds)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, float(self.seconds))


@dataclass(frozen=True, slots=True)
class UniformService:
    """Service time uniform in ``[low, high]`` seconds (``low <= high``)."""

    name: ClassVar[str] = "uniform"
    low: float
    high: float

    def __post_init__(self) -> None:
        _check_seconds("service time low", self.low)
        _check_seconds("service time high", self.high)
        if self.low > self.high:
            raise ConfigError(f"service time low {self.low} exceeds high {self.high}")

    @property
    def mean(self) -> float:
        return 0.5 * (self.low + self.high)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=n)


def parse_service_us(spec: str | float) -> ConstantService | UniformService:
    """Parse microseconds: ``"50"`` -> constant 50 us, ``"10..50"`` -> uniform 10..50 us."""
    text = str(spec).strip()
    try:
        if ".." in text:
            lo_s, hi_s = text.split("..", 1)
            return UniformService(float(lo_s) / 1e6, float(hi_s) / 1e6)
        return ConstantService(float(text) / 1e6)
    except ValueError as exc:
        if isinstance(exc, ConfigError):
            raise ConfigError(f"bad service time {text!r} (us): {exc}") from None
        raise ConfigError(
            f"bad service time {text!r}: expected microseconds like 50 or a range like 10..50"
        ) from None
