"""The settings of one live autoscaling run (light: the CLI imports it to show defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from skewlab.autoscale.base import Capacity
from skewlab.errors import ConfigError
from skewlab.live.autoscale.protocol import GroupSettings, LiveSettings, speed_plan
from skewlab.spec import AUTOSCALE_DEFAULTS

__all__ = ["AutoscaleSettings", "monitor_timing"]


def _d(name: str) -> Any:
    return AUTOSCALE_DEFAULTS[name]


def monitor_timing(iteration_s: float, window_s: float) -> dict[str, float]:
    """The monitor's timing for iterations of ``iteration_s``: the window at most two
    iterations, a quarter of it (at most 3 s) to span, samples 8 and publications 3
    per iteration at least (at most every 1 s / 5 s)."""
    window = min(window_s, iteration_s * 2)
    return {
        "window_s": window,
        "min_span_s": min(3.0, window / 4),
        "sample_s": min(1.0, iteration_s / 8),
        "publish_s": min(5.0, iteration_s / 3),
    }


@dataclass(frozen=True, kw_only=True)
class AutoscaleSettings(GroupSettings):
    """The parameters of one live autoscaling run (the CLI and the DAG build this):
    the :class:`GroupSettings` every process shares, plus the load and the driver's own.

    The workload's speeds are in units of the bin capacity ``C`` (default 5/6
    ``C_bar``); defaults: :data:`skewlab.spec.AUTOSCALE_SETTINGS`.
    """

    workload: str = _d("workload")
    duration_s: float = _d("duration_s")
    home: str = _d("home")
    bootstrap: str | None = _d("bootstrap")
    drain_timeout_s: float = _d("drain_timeout_s")
    mlflow: bool = _d("mlflow")
    experiment: str = _d("experiment")
    keep_topics: bool = _d("keep_topics")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.duration_s >= self.iteration_s > 0:
            raise ConfigError(f"need duration >= iteration > 0 s, got {self.duration_s}, "
                              f"{self.iteration_s}")  # fmt: skip
        speed_plan(self.workload, self.partitions, 1, 1.0)

    @property
    def iterations(self) -> int:
        """Iterations of the run: ``ceil(duration / iteration)``."""
        return math.ceil(self.duration_s / self.iteration_s)

    @property
    def c(self) -> float:
        """The bin capacity ``C`` in bytes/s (``bin_capacity``, else 5/6 ``C_bar``)."""
        return Capacity(self.capacity, self.bin_capacity).c

    def live(
        self, run_id: str, bootstrap: str, run_dir: str, delta_root: str, engine: str = "local"
    ) -> LiveSettings:
        """What every process of run ``run_id`` reads: the shared settings, the run's place,
        room for a consumer per partition plus one (N for Kafka's ``kafka:N``) and where the
        consumers run (``engine``)."""
        max_consumers = self.partitions + 1
        if self.algorithm.startswith("kafka"):
            max_consumers = max(max_consumers, int(self.algorithm.partition(":")[2] or 1))
        return LiveSettings(
            **self.shared(), run_id=run_id, bootstrap=bootstrap, run_dir=run_dir,
            delta_root=delta_root, max_consumers=max_consumers, engine=engine,
        )  # fmt: skip
