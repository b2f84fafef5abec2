"""The outcome of one simulated run: immutable, picklable, JSON-able."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skewlab.metrics import LatencySummary

__all__ = ["SimResult"]


def _frozen(arr: np.ndarray) -> np.ndarray:
    out = np.array(arr, copy=True)
    out.flags.writeable = False
    return out


@dataclass(frozen=True)
class SimResult:
    """Metrics of one run of one grouping over one stream.

    Load metrics are over the events routed to each worker in the whole run
    (``worker_loads``): ``std_dev`` (DKG STD_DEV, %), ``imb_score`` (DLB Eq. 2),
    ``e_lb`` (SMALOPS Eq. 2, in events) and ``dist_cost`` (DKG DIST_COST).
    ``throughput`` is events / makespan, the makespan running from the first
    arrival to the last departure. ``merge_cost = partials / window_keys``
    (see :mod:`skewlab.sim.tracking`). Latencies are in seconds; ``queue_delay``
    is the wait before service, ``sojourn`` wait + service. ``delay_cdf`` is
    ``(values_s, fraction)`` of the queueing delay for plots. Timings
    ``wall_s`` (whole run), ``route_s`` (inside ``route_batch``) and
    ``workload_s`` (generating events) are wall-clock seconds of this process;
    ``wall_s - route_s - workload_s`` is the simulator's own overhead.
    """

    strategy: str
    workers: int
    splitters: int
    events: int
    rate: float
    service_mean_s: float
    window_s: float
    makespan_s: float
    throughput: float
    worker_loads: tuple[int, ...]
    std_dev: float
    imb_score: float
    e_lb: float
    dist_cost: float
    distinct_keys: int
    partials: int
    window_keys: int
    merge_cost: float
    queue_delay: LatencySummary
    sojourn: LatencySummary
    hook_ticks: int = 0
    overrides: int = 0
    wall_s: float = 0.0
    route_s: float = 0.0
    workload_s: float = 0.0
    window_loads: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    delay_cdf: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0), np.zeros(0))
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "window_loads", _frozen(self.window_loads))
        object.__setattr__(
            self, "delay_cdf", (_frozen(self.delay_cdf[0]), _frozen(self.delay_cdf[1]))
        )

    @property
    def sim_overhead_s(self) -> float:
        """Wall seconds spent in the simulator itself (not routing, not generating)."""
        return max(0.0, self.wall_s - self.route_s - self.workload_s)

    def summary(self) -> dict[str, Any]:
        """The scalar metrics (one table row / one JSON object, no series)."""
        return {
            "strategy": self.strategy,
            "workers": self.workers,
            "splitters": self.splitters,
            "events": self.events,
            "rate": self.rate,
            "service_mean_s": self.service_mean_s,
            "makespan_s": self.makespan_s,
            "throughput": self.throughput,
            "std_dev": self.std_dev,
            "dist_cost": self.dist_cost,
            "imb_score": self.imb_score,
            "e_lb": self.e_lb,
            "distinct_keys": self.distinct_keys,
            "partials": self.partials,
            "window_keys": self.window_keys,
            "merge_cost": self.merge_cost,
            "queue_delay": self.queue_delay.to_dict(),
            "sojourn": self.sojourn.to_dict(),
            "hook_ticks": self.hook_ticks,
            "overrides": self.overrides,
            "wall_s": self.wall_s,
            "route_s": self.route_s,
            "workload_s": self.workload_s,
        }

    def to_dict(self) -> dict[str, Any]:
        """Everything as plain JSON types, series included."""
        out = self.summary()
        out["worker_loads"] = list(self.worker_loads)
        out["window_s"] = self.window_s
        out["window_loads"] = self.window_loads.tolist()
        out["delay_cdf"] = {
            "values_s": self.delay_cdf[0].tolist(),
            "fraction": self.delay_cdf[1].tolist(),
        }
        return out
