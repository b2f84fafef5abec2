"""What one run of :mod:`skewlab.sim.scaleout` returns, and how latency is read off it.

The fluid model records two cumulative curves per step: arrivals ``A`` and
what downstream has seen ``D``. The latency of the tuples arriving in a step is
the horizontal distance from ``A`` to ``D`` (when ``D`` first reaches them) plus
one service time; quantiles weight each step by the tuples that arrived in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ScaleOutEvent", "ScaleOutResult", "arrival_latency", "weighted_quantile"]


@dataclass(frozen=True)
class ScaleOutEvent:
    """A scale event: decided at ``t``, the new instances took over at ``done`` (None: never)."""

    t: float
    kind: str
    before: int
    after: int
    done: float | None


@dataclass
class ScaleOutResult:
    """Series (one sample per ``measure_s``) and totals of one run."""

    policy: str
    t: np.ndarray
    rate: np.ndarray
    instances: np.ndarray
    """Running instances (all roles, starting ones included)."""
    throughput: np.ndarray
    latency_s: np.ndarray
    score: np.ndarray
    events: list[ScaleOutEvent]
    instance_seconds: float
    backup_seconds: float
    """Time during which secondaries (active backups) were running."""
    pause_s: float
    max_pause_s: float
    latency_mean_s: float
    latency_p99_s: float
    fairness: float
    processed: float
    arrived: float
    checkpoints: int
    duration_s: float
    snapshot_stall_s: float = 0.0
    """Instance-seconds stalled taking checkpoint snapshots."""
    state_load_s: float = 0.0
    """Instance-seconds spent loading state (a live copy or a checkpoint read)."""

    @property
    def state_work_s(self) -> float:
        """Instance-seconds of state management: snapshot stalls plus state loading."""
        return self.snapshot_stall_s + self.state_load_s

    @property
    def backup_share(self) -> float:
        """Fraction of the run during which secondaries were running (seed Fig. 12)."""
        return self.backup_seconds / self.duration_s

    @property
    def takeover_s(self) -> list[float]:
        """Per scale event: from the scale decision until the new instances served the outputs."""
        return [e.done - e.t for e in self.events if e.done is not None]

    def takeovers(self, kind: str = "scale-out") -> list[float]:
        """:attr:`takeover_s` of the events of one ``kind`` (``scale-out`` / ``scale-in``)."""
        return [e.done - e.t for e in self.events if e.done is not None and e.kind == kind]


def arrival_latency(
    arrivals: np.ndarray, downs: np.ndarray, steps: int, dt: float, service_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per step ``k < steps``: the latency of the tuples arriving in it and their number.

    ``arrivals`` and ``downs`` are the cumulative curves at step boundaries
    (``len >= steps + 1``; they may run on past ``steps`` while the backlog
    drains). A tuple arriving in step ``k`` leaves at the first boundary where
    ``D`` reaches ``A(k + 1)``.
    """
    total = len(downs) - 1
    times = np.arange(total + 1) * dt
    j = np.searchsorted(downs, arrivals[1 : steps + 1] - 1e-9, side="left")
    ends = times[np.minimum(j, total)]
    lat = np.maximum(ends - times[1 : steps + 1], 0.0) + service_s
    return lat, np.diff(arrivals[: steps + 1])


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` where each counts ``weights`` times (tuples)."""
    order = np.argsort(values)
    cum = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cum, q * cum[-1])])
