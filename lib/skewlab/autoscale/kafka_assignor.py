"""Kafka's load-blind range / round-robin assignors over a fixed group of N consumers.

The seed's baseline (Landau et al. Sec. VI-C, "Kafka's assignment strategy"): equal partition
counts whatever the speeds, never rebalanced, capacity ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment, check_speeds
from skewlab.errors import ConfigError

__all__ = ["KafkaAssignor"]


@dataclass(frozen=True)
class KafkaAssignor:
    """Kafka's ``range`` or ``round-robin`` assignor over ``consumers`` members."""

    strategy: Literal["range", "round-robin"] = "range"
    consumers: int = 1

    def __post_init__(self) -> None:
        if self.strategy not in ("range", "round-robin"):
            raise ConfigError(f"strategy must be 'range' or 'round-robin', got {self.strategy!r}")
        if isinstance(self.consumers, bool) or not isinstance(self.consumers, int):
            raise ConfigError(f"consumers must be an int >= 1, got {self.consumers!r}")
        if self.consumers < 1:
            raise ConfigError(f"consumers must be >= 1, got {self.consumers}")

    @property
    def name(self) -> str:
        """``kafka:N`` (range) or ``kafka-rr:N`` (round-robin)."""
        base = "kafka" if self.strategy == "range" else "kafka-rr"
        return f"{base}:{self.consumers}"

    def assign(
        self,
        speeds: ArrayLike,
        previous: Assignment | None,
        capacity: float,
        rng: np.random.Generator | None = None,
    ) -> Assignment:
        """The fixed assignment over ``consumers`` (``rng`` is accepted and unused).

        Range: partitions in index order cut into ``N`` contiguous ranges, the first
        ``P mod N`` consumers one more. Round-robin: partition ``j`` -> consumer ``j mod N``.
        All ``N`` consumers are members even when ``N > P``; speeds and ``previous`` are
        ignored, so a consumer may be over capacity.
        """
        p = len(check_speeds(speeds))
        n = self.consumers
        j = np.arange(p)
        if self.strategy == "round-robin":
            owner = j % n
        else:
            per, extra = divmod(p, n)
            # the first `extra` consumers hold per+1 partitions, the rest per
            cut = extra * (per + 1)
            owner = np.where(j < cut, j // (per + 1), extra + (j - cut) // max(per, 1))
        return Assignment.from_owner(owner, members=range(n))
