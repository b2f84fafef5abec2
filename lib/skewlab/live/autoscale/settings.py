"""The settings of one live autoscaling run (light: the CLI imports it to show defaults)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from skewlab.autoscale import AutoscalerConfig, Capacity
from skewlab.errors import ConfigError
from skewlab.live.autoscale.protocol import LiveSettings, speed_plan

__all__ = ["AutoscaleSettings"]


@dataclass(frozen=True)
class AutoscaleSettings:
    """The parameters of one live autoscaling run (the CLI builds this).

    ``capacity`` is the consumer capacity ``C_bar`` in bytes/s; the workload's
    speeds are in units of the bin capacity ``C`` (default 5/6 ``C_bar``).
    """

    algorithm: str = "mwf"
    partitions: int = 32
    capacity: float = 120_000.0
    bin_capacity: float | None = None
    workload: str = "stream:delta=5"
    duration_s: float = 300.0
    iteration_s: float = 30.0
    window_s: float = 30.0
    min_span_s: float = 3.0
    sample_s: float = 1.0
    publish_s: float = 5.0
    record_bytes: int = 100
    client: str = "confluent"
    home: str = ".skewlab"
    bootstrap: str | None = None
    drain_timeout_s: float = 120.0
    mlflow: bool = True
    experiment: str = "skewlab-autoscale-live"
    keep_topics: bool = False

    def __post_init__(self) -> None:
        AutoscalerConfig(self.algorithm, self.capacity, self.bin_capacity)
        if not self.duration_s >= self.iteration_s > 0:
            raise ConfigError(f"need duration >= iteration > 0 s, got {self.duration_s}, "
                              f"{self.iteration_s}")  # fmt: skip
        speed_plan(self.workload, self.partitions, 1, 1.0)
        self.live("check", "127.0.0.1:1", ".", ".")

    @property
    def iterations(self) -> int:
        return math.ceil(self.duration_s / self.iteration_s)

    @property
    def c(self) -> float:
        return Capacity(self.capacity, self.bin_capacity).c

    def live(self, run_id: str, bootstrap: str, run_dir: str, delta_root: str) -> LiveSettings:
        max_consumers = self.partitions + 1
        if self.algorithm.startswith("kafka"):
            max_consumers = max(max_consumers, int(self.algorithm.partition(":")[2] or 1))
        return LiveSettings(
            run_id=run_id, bootstrap=bootstrap, run_dir=run_dir, delta_root=delta_root,
            partitions=self.partitions, consumer_capacity=self.capacity,
            algorithm=self.algorithm, capacity=self.bin_capacity, client=self.client,
            iteration_s=self.iteration_s, window_s=self.window_s, min_span_s=self.min_span_s,
            sample_s=self.sample_s, publish_s=self.publish_s, record_bytes=self.record_bytes,
            max_consumers=max_consumers,
        )  # fmt: skip
