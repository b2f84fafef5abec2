"""Per-event service (processing) time models of the simulator: constant (DKG's
``processDuration``) and uniform (SMALOPS' 10..50 us sweep), drawn from an injected generator.
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
    def mean(self) -> float:
        """Mean service time in seconds."""
        ...

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
        """``seconds``."""
        return float(self.seconds)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` copies of ``seconds``; ``rng`` is not drawn from."""
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
        """``(low + high) / 2``."""
        return 0.5 * (self.low + self.high)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws from ``U[low, high]`` (``float64``) in stream order from ``rng``."""
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
