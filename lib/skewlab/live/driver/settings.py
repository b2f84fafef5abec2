"""Each process's settings of a grouping run, derived from its RunSpec and handle.

The one place where a :class:`~skewlab.spec.RunSpec` (what the run does) and
its :class:`~skewlab.live.driver.handle.RunHandle` (where it runs: run dir, broker,
Delta root, topics) become the settings object of one role: the route job,
worker ``i``, the producer, the rebalancer loop (the state manager's, which needs no
handle, are core: :func:`skewlab.runsettings.state_manager_settings`). No other module
copies a run setting into a process's settings.
"""

from __future__ import annotations

from skewlab.control.rebalance_loop import RebalanceSettings
from skewlab.envsettings import env_settings
from skewlab.io.kafka.base import KafkaSettings
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.producer import ProduceSettings
from skewlab.live.worker.settings import WorkerSettings
from skewlab.rundir import RunDir
from skewlab.runsettings import StateManagerSettings, state_manager_settings
from skewlab.spark.route import RouteSettings
from skewlab.spec import (
    RebalanceControl,
    RunSpec,
    ScaleOutControl,
    grouping_params,
    n_events,
)
from skewlab.workload.ramp import parse_ramp

__all__ = [
    "DEFAULT_SPARK_MASTER",
    "WARM_SPARES_ENV",
    "kafka_settings",
    "produce_settings",
    "rebalance_settings",
    "route_settings",
    "routed_partitions",
    "warm_spares",
    "worker_settings",
]

DEFAULT_SPARK_MASTER = "local[2]"
"""The route job's Spark master unless ``$SKEWLAB_SPARK_MASTER`` names one."""


def kafka_settings(spec: RunSpec, h: RunHandle) -> KafkaSettings:
    """The run's broker (from the handle) and Kafka client (from the spec)."""
    return KafkaSettings(h.bootstrap or "", spec.runtime.client)


def rebalance_settings(spec: RunSpec, h: RunHandle) -> RebalanceSettings | None:
    """The rebalancer loop's settings (None: the run does not rebalance)."""
    c = spec.control
    if not isinstance(c, RebalanceControl):
        return None
    return RebalanceSettings(
        run_id=h.run_id,
        delta_root=h.delta_root,
        policy=c.policy,
        workers=spec.grouping.workers,
        interval_s=c.interval_s,
        lead_s=c.lead_s,
        params=dict(c.params),
    )


def routed_partitions(spec: RunSpec, h: RunHandle) -> int:
    """Partitions of ``routed``: W, plus the spare instances of a scale-out run."""
    sm = state_manager_settings(spec, h.run_id, h.delta_root)
    return sm.partitions if sm is not None else spec.grouping.workers


def route_settings(spec: RunSpec, h: RunHandle) -> RouteSettings:
    """The route job's settings (Spark master: ``$SKEWLAB_SPARK_MASTER``, else local[2])."""
    rt = spec.runtime
    return RouteSettings(
        run_id=h.run_id,
        bootstrap=h.bootstrap or "",
        events_topic=h.events_topic,
        routed_topic=h.routed_topic,
        workers=spec.grouping.workers,
        strategy=spec.grouping.strategy,
        strategy_params=grouping_params(spec),
        delta_root=h.delta_root,
        run_dir=h.run_dir,
        client=rt.client,
        window_s=rt.window_s,
        trigger_s=rt.trigger_s,
        max_events_per_trigger=rt.max_events_per_trigger,
        message_sets=spec.message_sets,
        spark_master=env_settings().spark_master or DEFAULT_SPARK_MASTER,
    )


def worker_settings(spec: RunSpec, h: RunHandle, i: int) -> WorkerSettings:
    """Instance ``i``'s settings (``i >= W``: a spare of a scale-out run, which stops
    after the original ones: only those hand state on to it)."""
    rt, files = spec.runtime, RunDir.of(h.run_dir)
    scale_out = isinstance(spec.control, ScaleOutControl)
    return WorkerSettings(
        run_id=h.run_id,
        worker=i,
        topic=h.routed_topic,
        kafka=kafka_settings(spec, h),
        delta_root=h.delta_root,
        window_s=rt.window_s,
        service_us=rt.service_us,
        flush_interval_s=rt.flush_interval_s,
        stop_file=str(files.worker_stop(i, spec.grouping.workers)),
        splitters=spec.workload.partitions if spec.message_sets else 0,
        cost="sleep" if scale_out else "spin",
        ready_file=str(files.worker_ready(i)),
        scale_out=scale_out,
    )


def produce_settings(spec: RunSpec, topic: str) -> ProduceSettings:
    """The producer's settings: the workload's events at its rate (ramped by chunks of
    0.1 s of the first step when ``load_ramp`` is set)."""
    w = spec.workload
    n = n_events(w)
    if w.load_ramp is None:
        return ProduceSettings(topic, w.partitions, n, w.rate, w.payload_bytes)
    factor, interval = parse_ramp(w.load_ramp)
    return ProduceSettings(
        topic,
        w.partitions,
        n,
        w.rate,
        w.payload_bytes,
        chunk=int(min(2048, max(32, w.rate / 10))),
        ramp_factor=factor,
        ramp_interval_s=interval,
    )


WARM_SPARES_ENV = "SKEWLAB_WARM_SPARES"
"""``0``: start no scale-out instance process ahead (:func:`warm_spares`)."""


def warm_spares(sm: StateManagerSettings | None) -> list[int]:
    """The instances whose process a scale-out run starts at start-up, waiting
    (``skewlab.live.worker.warm``): the first spare of each operator, the instance its first
    scale-out starts (none without scale-out, or with ``$SKEWLAB_WARM_SPARES=0``)."""
    if sm is None or not env_settings().warm_spares:
        return []
    return [sp[0] for g in range(sm.workers) if (sp := sm.spares(g))]
