"""One live experiment on the embedded (or a real) stack, start to verdict.

``run_experiment(settings)`` does, in order:

1. make sure the broker runs (embedded tansu under the data dir, unless a
   bootstrap is given), and create the run's topics ``events-<run>`` (P
   partitions) and ``routed-<run>`` (W partitions);
2. start the Spark route job and the W worker processes (subprocesses, logs
   under ``<data dir>/runs/<run>/``) and wait until the route query is up;
3. produce the workload at the target rate, showing progress (produced /
   routed / processed, current imbalance); with ``rebalance`` set, the
   rebalancer loop (:mod:`skewlab.control.rebalance_loop`) runs in a thread meanwhile
   and the route job and workers move keys by message sets; with ``scale_out``
   set, the state manager (:mod:`skewlab.control.scaleout_loop`) does instead: it
   scores the workers, starts / stops instances on the spare partitions of
   ``routed`` (created up front) and moves keys by the same message sets;
4. stop: the control loop stops, the route job drains all input and exits
   (end-of-stream goes to the spare partitions too), then the running workers
   drain their partitions, flush to Delta and exit;
5. merge ``partials`` into ``results`` and check them against a plain count of
   ``events`` (the verdict), compute the summary, log the MLflow run;
6. delete the run's topics (the broker keeps topics in memory).

Each step is a phase function of :mod:`skewlab.live.phases` over a run
handle saved in ``<run>/handle.json``; ``run_experiment`` runs them all in
this process, the ``skewlab_experiment`` DAG one per task. Process handles are
exposed through ``hooks`` so the crash tests can kill the route job or a
worker mid-stream and restart it.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import make_grouping
from skewlab.live.launch import SPARK_MASTER_ENV, Procs
from skewlab.live.producer import ramp_events
from skewlab.live.watch import ProgressFn
from skewlab.workload import parse_workload

if TYPE_CHECKING:
    from skewlab.live.summary import RunSummary

__all__ = [
    "BOOTSTRAP_ENV",
    "DELTA_ROOT_ENV",
    "SPARK_MASTER_ENV",
    "ExperimentError",
    "ExperimentSettings",
    "Hook",
    "Procs",
    "ProgressFn",
    "delta_root_of",
    "new_run_id",
    "run_experiment",
]

log = logging.getLogger(__name__)


class ExperimentError(SkewlabError):
    """A part of the live run failed; the message says which and where its log is."""


@dataclass(frozen=True)
class ExperimentSettings:
    """The parameters of one live run (the CLI and the DAG build this)."""

    strategy: str = "dkg"
    workers: int = 4
    partitions: int = 4
    workload: str = "zipf:s=1.1,v=2.72"
    rate: float = 5_000.0
    duration_s: float = 20.0
    events: int | None = None
    service_us: float = 0.0
    window_s: float = 15.0
    payload_bytes: int = 100
    seed: int = 1
    client: str = "confluent"
    home: str = ".skewlab"
    bootstrap: str | None = None
    trigger_s: float = 1.0
    max_events_per_trigger: int | None = None
    flush_interval_s: float = 1.0
    strategy_params: dict[str, Any] = field(default_factory=dict)
    mlflow: bool = True
    experiment: str | None = None
    keep_topics: bool = False
    quality: bool = True
    """Run the Great Expectations suites on the run's tables (skewlab.quality)."""
    rebalance: str | None = None
    rebalance_interval_s: float = 10.0
    rebalance_lead_s: float = 1.0
    rebalance_params: dict[str, Any] = field(default_factory=dict)
    scale_out: str | None = None
    """Scale-out policy of the state manager: checkpoint | active-backup | restart."""
    scale_out_interval_s: float = 1.0
    scale_out_lead_s: float = 0.5
    max_instances: int = 2
    """Instances per scaled worker at most (spare partitions of routed: W x (this - 1))."""
    scale_out_params: dict[str, Any] = field(default_factory=dict)
    load_ramp: str | None = None
    """``FACTORx/INTERVALs``: the rate multiplies by FACTOR every INTERVAL seconds."""

    def __post_init__(self) -> None:
        if self.load_ramp is not None:
            from skewlab.control.scaleout_loop import parse_ramp

            parse_ramp(self.load_ramp)
        if self.scale_out is not None:
            if self.rebalance is not None:
                raise ConfigError("--scale-out and --rebalance both write assignments; pick one")
            if self.strategy != "key":
                raise ConfigError(
                    f"--scale-out runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            self.state_manager_settings("check", "")
        if self.rebalance is not None:
            from skewlab.control.rebalance_loop import POLICIES

            if self.rebalance not in POLICIES:
                raise ConfigError(
                    f"rebalance must be one of {', '.join(POLICIES)}, got {self.rebalance!r}"
                )
            if self.strategy != "key":
                raise ConfigError(
                    f"--rebalance runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            from skewlab.rebalance import make_rebalancer

            make_rebalancer(self.rebalance, workers=self.workers, **self.rebalance_params)
            if not self.rebalance_interval_s > 0:
                raise ConfigError(
                    f"rebalance interval must be > 0 s, got {self.rebalance_interval_s}"
                )
        if not 1 <= self.workers <= 64:
            raise ConfigError(f"workers must be in 1..64, got {self.workers}")
        if not 1 <= self.partitions <= 64:
            raise ConfigError(f"partitions must be in 1..64, got {self.partitions}")
        if not self.rate > 0:
            raise ConfigError(f"rate must be > 0 events/s, got {self.rate}")
        if self.events is None and not self.duration_s > 0:
            raise ConfigError(f"duration must be > 0 s, got {self.duration_s}")
        if self.events is not None and self.events < 1:
            raise ConfigError(f"events must be >= 1, got {self.events}")
        if self.service_us < 0:
            raise ConfigError(f"service time must be >= 0 us, got {self.service_us}")
        if not self.window_s > 0:
            raise ConfigError(f"window must be > 0 s, got {self.window_s}")
        make_grouping(self.strategy, workers=self.workers, **self.strategy_params)
        parse_workload(self.workload, seed=self.seed)

    @property
    def n_events(self) -> int:
        if self.events is not None:
            return self.events
        if self.load_ramp is not None:
            from skewlab.control.scaleout_loop import parse_ramp

            return ramp_events(self.rate, self.duration_s, *parse_ramp(self.load_ramp))
        return max(1, round(self.rate * self.duration_s))

    @property
    def message_sets(self) -> bool:
        return self.rebalance is not None or self.scale_out is not None

    def state_manager_settings(self, run_id: str, delta_root: str) -> Any:
        from skewlab.control.scaleout_loop import StateManagerSettings

        assert self.scale_out is not None
        return StateManagerSettings(
            run_id=run_id,
            delta_root=delta_root,
            policy=self.scale_out,
            workers=self.workers,
            service_us=self.service_us,
            max_instances=self.max_instances,
            interval_s=self.scale_out_interval_s,
            lead_s=self.scale_out_lead_s,
            params=dict(self.scale_out_params),
        )


Hook = Callable[[int, Procs], None]
"""Called with the number of events produced so far (after each produce chunk)."""


BOOTSTRAP_ENV = "SKEWLAB_KAFKA_BOOTSTRAP"
"""A Kafka to use instead of the embedded broker (``--bootstrap`` wins)."""
DELTA_ROOT_ENV = "SKEWLAB_DELTA_ROOT"
"""Where the Delta tables live (a path or ``s3://...``); default ``<data dir>/delta``."""


def delta_root_of(home: Path) -> str:
    """The Delta root of runs under data dir ``home`` (``$SKEWLAB_DELTA_ROOT`` wins)."""
    return os.environ.get(DELTA_ROOT_ENV) or str(home / "delta")


def new_run_id(strategy: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{strategy}-{stamp}-{uuid.uuid4().hex[:6]}"


def run_experiment(
    s: ExperimentSettings,
    progress: ProgressFn | None = None,
    hook: Hook | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Run one live experiment (steps 1-6 of the module doc) and return its summary.

    The phases of :mod:`skewlab.live.phases` in order, in this process (the
    route job and workers are its children); whatever happens, :func:`~skewlab.live.phases.stop`
    runs last: loops stopped, processes killed, topics deleted unless ``keep_topics``.
    """
    from skewlab.live import phases

    ctx = phases.new_run(s, run_id, progress=progress, hook=hook)
    try:
        phases.ensure_services(ctx)
        phases.create_topics(ctx)
        phases.start_jobs(ctx)
        phases.produce(ctx)
        phases.drain(ctx)
        phases.aggregate(ctx)
        return phases.summarize(ctx)
    finally:
        phases.stop(ctx)
