"""The phases of one live run, each a function over a :class:`RunContext`, in run order:

1. :func:`ensure_services`: the broker (embedded or given) and the Delta root;
2. :func:`create_topics`: ``events`` and ``routed`` (plus a scale-out run's spare partitions);
3. :func:`start_jobs`: the route job and the workers (and a control loop), started and
   waited for;
4. :func:`produce`: the workload to ``events`` at its rate, with progress;
5. :func:`drain`: end of stream; the route job and then the workers drain and exit;
6. :func:`aggregate`: ``partials`` merged into ``results``, checked against a plain count;
7. :func:`check_quality` and :func:`summarize`: the quality suites and the run's summary.

Each phase saves the handle, so the DAG runs one per task. Details: docs/live-run.md,
section ``skewlab.live.driver.phases``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.control.loop import ThreadLoop
from skewlab.control.rebalance_loop import start_loop as start_rebalance_loop
from skewlab.control.scaleout.manager import start_loop as start_manager_loop
from skewlab.control.scaleout.settings import Processes, StateManagerSettings
from skewlab.envsettings import env_settings
from skewlab.faults import crash_point
from skewlab.io.delta.recovery import check_tables
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient, KafkaSettings
from skewlab.live.driver.experiment import (
    ExperimentError,
)
from skewlab.live.driver.handle import Phase as P
from skewlab.live.driver.handle import RunHandle, Status
from skewlab.live.driver.launch import (
    Procs,
    exit_cause,
    first_error,
    route_command,
)
from skewlab.live.driver.producer import ProduceReport
from skewlab.live.driver.producer import produce as produce_workload
from skewlab.live.driver.settings import (
    produce_settings,
    rebalance_settings,
    route_settings,
    routed_partitions,
    state_manager_settings,
)
from skewlab.live.driver.startup import wait_ready
from skewlab.live.driver.supervise import stop_guarded
from skewlab.live.report.aggregate import merge, plain_count, results_counts
from skewlab.live.report.summary import summarize as summarize_run
from skewlab.live.report.tracking import LiveRun, log_run, open_live_run
from skewlab.pipeline import events
from skewlab.pipeline.exactness import ExactnessReport, check
from skewlab.rundir import RunDir
from skewlab.services import get_service
from skewlab.workload.spec import parse_workload

if TYPE_CHECKING:
    from skewlab.live.report.summary import RunSummary
    from skewlab.quality.report import QualityReport

from skewlab.live.driver.context import (
    TICK_S,
    RunContext,
    worker_file,
)

__all__ = [
    "aggregate",
    "check_quality",
    "create_topics",
    "drain",
    "ensure_services",
    "load_expected",
    "produce",
    "produce_and_drain",
    "start_jobs",
    "summarize",
]

log = logging.getLogger(__name__)


def ensure_services(ctx: RunContext) -> str:
    """Phase 1: the bootstrap servers (``--bootstrap``, ``$SKEWLAB_KAFKA_BOOTSTRAP``, else
    the embedded broker under the data dir, started if needed). A local Delta root is
    checked first: a damaged table raises
    :class:`~skewlab.io.delta.store.DamagedTableError` (naming the table
    and its repair command) before any service starts."""
    s = ctx.settings
    bootstrap = start_services(ctx.handle, s.bootstrap)
    if s.mlflow and LiveRun.find(ctx.files) is None:
        ctx.mlflow = open_live_run(s, ctx.files)
    ctx.handle.mark(P.SERVICES)
    return bootstrap


def start_services(h: RunHandle, bootstrap: str | None) -> str:
    """Phase 1 of every kind of run: a local Delta root checked, then the bootstrap
    servers (``bootstrap``, ``$SKEWLAB_KAFKA_BOOTSTRAP``, else the embedded broker under
    the data dir, started if needed) recorded in the handle (not saved)."""
    if "://" not in h.delta_root:
        check_tables(h.delta_root)
    t0 = time.time()
    bootstrap = bootstrap or env_settings().kafka_bootstrap
    if not bootstrap:
        bootstrap = get_service("broker", Path(h.home)).start().url
        h.startup["services"] = round(time.time() - t0, 3)
    h.bootstrap = bootstrap
    return bootstrap


def create_topics(ctx: RunContext) -> None:
    """Phase 2: ``events-<run>`` (P partitions) and ``routed-<run>`` (W + spares)."""
    s, h = ctx.settings, ctx.handle
    h.require(P.SERVICES, "create the topics of")
    ctx.kafka.create_topic(h.events_topic, s.partitions)
    h.n_routed = routed_partitions(s.spec, h)
    ctx.kafka.create_topic(h.routed_topic, h.n_routed)
    h.mark(P.TOPICS)


def start_jobs(ctx: RunContext) -> None:
    """Phase 3: write the job settings, start the route job and W workers, wait for the
    route query (the command is recorded in the handle)."""
    s, h = ctx.settings, ctx.handle
    h.require(P.TOPICS, "start the jobs of")
    route = route_settings(s.spec, h)
    route_json = ctx.files.route_settings
    route_json.write_text(route.to_json())
    for i in range(s.workers):
        worker_file(ctx, i)
    ctx.files.settings.write_text(json.dumps(asdict(s), indent=2))
    h.route_cmd = route_command(route_json, route.spark_master)
    h.t_start = time.time()
    spawned = {"route": time.time()}
    ctx.procs.restart_route()
    for i in range(s.workers):
        spawned[f"worker-{i}"] = time.time()
        ctx.procs.restart_worker(i)
    for j in warm_spares(state_manager_settings(s.spec, h.run_id, h.delta_root)):
        ctx.procs.prewarm_worker(j)
    startup = wait_ready(ctx.files, ctx.procs, list(range(s.workers)), spawned)
    h.spark_ui = startup.pop("spark_ui")
    h.startup.update(startup)
    log.info("run %s warm: %s", h.run_id, h.startup)
    h.mark(P.STARTED)


def produce(ctx: RunContext) -> ProduceReport:
    """Phase 4: produce the workload; the control loop runs meanwhile, stopped at the end.

    The children and the broker are guarded every :data:`TICK_S` meanwhile
    (:meth:`RunContext.guard`). A run resumed after its driver died mid-produce
    produces only the events not yet in ``events`` (per partition, the events
    past its end offset: a partition holds a prefix of its events)."""

    s, h = ctx.settings, ctx.handle
    if h.done(P.PRODUCED) and h.produced is not None:
        return ctx.report or ProduceReport(**h.produced)
    h.require(P.STARTED, "produce into")
    if (rb := rebalance_settings(s.spec, h)) is not None:
        ctx.loop = start_rebalance_loop(rb)
    if (sm := state_manager_settings(s.spec, h.run_id, h.delta_root)) is not None:
        ctx.loop = _start_manager(sm, ctx.kafka_settings, h.routed_topic, ctx.procs, ctx.files)
    workload = parse_workload(s.workload, seed=s.seed)
    ps = produce_settings(s.spec, h.events_topic)
    procs, hook = ctx.procs, ctx.hook
    present = None
    if h.t_produce is not None:  # resumed: a driver produced part of it before
        begins = ctx.kafka.begin_offsets(h.events_topic)
        ends = ctx.kafka.end_offsets(h.events_topic)
        present = {p: e - begins.get(p, 0) for p, e in ends.items()}
        log.info("run %s resumes producing; already in %s: %s", h.run_id, h.events_topic, present)

    def on_chunk(sent: int, total: int) -> None:
        ctx.guard(sent, total)
        if hook is not None:
            hook(sent, procs)
        crash_point("driver.mid_produce")

    ctx.guard(0, ps.events)
    if h.t_produce is None:
        h.t_produce = time.time()  # the first event after warm-up (steady state from here)
        h.save()
    report = produce_workload(
        ctx.kafka, workload, ps, sleep=ctx.sleep, progress=on_chunk, present=present
    )
    ctx.report = report
    if ctx.loop is not None:  # instances restarted while it settles
        stop_guarded(ctx.loop, ctx.guard)
    if (mgr := ctx.manager) is not None:
        mgr.kafka.close()
        h.running = sorted(mgr.running)
    h.produced = {"events": report.events, "seconds": report.seconds}
    h.mark(P.PRODUCED)
    return report


def produce_and_drain(ctx: RunContext) -> None:
    """:func:`produce`, then :func:`drain` in the same process if it owns a state manager."""
    produce(ctx)
    if ctx.manager is not None:
        drain(ctx)


def drain(ctx: RunContext) -> None:
    """Phase 5: stop the route job (it drains all input), then the running workers."""
    s, h = ctx.settings, ctx.handle
    if h.done(P.DRAINED):
        return
    h.require(P.PRODUCED, "drain")
    ctx.files.route_stop.touch()
    _wait_exit(ctx, "route")
    if s.scale_out is not None:
        _end_spares(ctx.kafka, h.routed_topic, s.workers, h.n_routed)
    ctx.files.workers_stop.touch()
    mgr = ctx.manager
    live: list[int]
    if mgr is not None:
        live = sorted(mgr.running)
    else:
        live = list(h.running) if h.running is not None else list(range(s.workers))
    # The original workers first: a set that ends with the stream hands its key's state to
    # a spare instance when the old holder drains; the spare must still be reading then.
    for i in sorted(live, key=lambda i: i >= s.workers):
        if i >= s.workers:
            ctx.files.spares_stop.touch()
        _wait_exit(ctx, f"worker-{i}")
    ctx.files.spares_stop.touch()  # warm spares never started exit (skewlab.live.worker.warm)
    h.t_done = time.time()
    if mgr is not None:
        mgr.track_events(final=True)
        ctx.scale = mgr.report()
        h.scale = json.loads(json.dumps(ctx.scale, default=_plain))
    h.mark(P.DRAINED)


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    return item() if callable(item) else str(value)


def aggregate(ctx: RunContext) -> ExactnessReport:
    """Phase 6: merge ``partials`` into ``results``; check them against ``events``."""
    s, h = ctx.settings, ctx.handle
    h.require(P.DRAINED, "aggregate")
    store = DeltaStore(h.delta_root)
    merge(store, h.run_id)
    expected, _ = plain_count(ctx.kafka, h.events_topic, s.window_s)
    exactness = check(expected, results_counts(store, h.run_id))
    log.info("exactness of %s: %s", h.run_id, exactness.summary())
    ctx.expected, ctx.exactness = expected, exactness
    h.exactness = dataclasses.asdict(exactness)
    if ctx.detached:
        rows = [[w, k, c, v] for (w, k), (c, v) in expected.items()]
        ctx.files.expected.write_text(json.dumps(rows))
    h.mark(P.AGGREGATED)
    return exactness


def load_expected(run_dir: Path) -> dict[tuple[float, str], tuple[int, int]] | None:
    """The plain count :func:`aggregate` saved for a later task (None if not saved)."""
    try:
        rows = json.loads(RunDir.of(run_dir).expected.read_text())
    except FileNotFoundError:
        return None
    return {(w, k): (c, v) for w, k, c, v in rows}


def check_quality(ctx: RunContext) -> QualityReport:
    """Phase 7a: the data-quality suites on the run's tables (input counts as exactness)."""
    from skewlab.quality import check_run

    h = ctx.handle
    expected = ctx.expected if ctx.expected is not None else load_expected(ctx.run_dir)
    report = check_run(
        DeltaStore(h.delta_root),
        h.run_id,
        events_counts=expected,
        window_s=ctx.settings.window_s,
        home=Path(h.home),
    )
    ctx.quality = report
    if ctx.detached:
        ctx.files.quality.write_text(json.dumps(report.to_dict()))
    return report


def summarize(ctx: RunContext) -> RunSummary:
    """Phase 7b: the summary and plots, the quality verdict, the MLflow run."""
    s, h = ctx.settings, ctx.handle
    h.require(P.AGGREGATED, "summarize")
    assert h.produced is not None and h.exactness is not None
    assert h.t_start is not None and h.t_produce is not None and h.t_done is not None
    report = ctx.report or ProduceReport(**h.produced)
    exactness = ctx.exactness or ExactnessReport.from_dict(h.exactness)
    scale = ctx.scale if ctx.scale is not None else h.scale
    summary = summarize_run(
        DeltaStore(h.delta_root),
        h.run_id,
        s,
        report,
        exactness,
        h.t_produce,
        h.t_done,
        ctx.run_dir,
        time.time() - h.t_start,
        scale=scale if s.scale_out is not None else None,
        startup=h.startup,
    )
    quality = ctx.quality or _load_quality(ctx.run_dir)
    if quality is None and s.quality:
        quality = check_quality(ctx)
    if quality is not None:
        summary.quality = "passed" if quality.ok else "failed"
        summary.quality_failures = list(quality.failures)
        docs = quality.run_page or quality.data_docs  # the run's own page, else the index
        summary.data_docs = docs.as_uri() if docs else None
    if s.mlflow:
        summary = log_run(summary, s, Path(h.home), quality)
    h.mlflow_run_id = summary.mlflow_run_id
    h.mark(P.SUMMARIZED)
    h.finish(Status.DONE)
    return summary


def _load_quality(run_dir: Path) -> QualityReport | None:
    from skewlab.quality.report import QualityReport

    try:
        return QualityReport.from_dict(json.loads(RunDir.of(run_dir).quality.read_text()))
    except FileNotFoundError:
        return None


WARM_SPARES_ENV = "SKEWLAB_WARM_SPARES"
"""``0``: start no scale-out instance process ahead (:func:`warm_spares`)."""


def warm_spares(sm: StateManagerSettings | None) -> list[int]:
    """The instances whose process a scale-out run starts at start-up, waiting
    (``skewlab.live.worker.warm``): the first spare of each operator, the instance its first
    scale-out starts (none without scale-out, or with ``$SKEWLAB_WARM_SPARES=0``)."""
    if sm is None or not env_settings().warm_spares:
        return []
    return [sp[0] for g in range(sm.workers) if (sp := sm.spares(g))]


def _start_manager(
    sm: StateManagerSettings, kafka: KafkaSettings, routed_topic: str, procs: Procs, files: RunDir
) -> ThreadLoop[Any]:
    """Start the state manager thread with start / stop / readiness of worker processes."""

    def stop(i: int) -> None:
        p = procs.workers.get(i)
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def ready(i: int) -> float | None:
        p = procs.workers.get(i)
        f = files.worker_ready(i)
        if p is None or p.poll() is not None or not f.exists():
            return None
        try:
            return float(f.read_text())
        except ValueError:  # caught mid-write: ready at the next look
            return None

    own = connect(kafka)
    return start_manager_loop(sm, own, routed_topic, Processes(procs.restart_worker, stop, ready))


def _end_spares(client: KafkaClient, topic: str, first: int, n: int) -> None:
    """End of stream on the spare partitions (the route job ends its W own ones)."""

    for w in range(first, n):
        client.produce(topic, b"", partition=w, headers=[(events.END_HEADER, b"1")])
    client.flush()


def _wait_exit(ctx: RunContext, name: str, timeout_s: float = 600.0) -> None:
    """Wait until child ``name`` (``route``, ``worker-<i>``) exits after its stop marker,
    guarding meanwhile: a supervised child that fails is restarted (and drains again);
    an unsupervised one (a scale-out instance) fails the run with its cause."""
    procs = ctx.procs
    what = "route job" if name == "route" else name.replace("-", " ")
    index = None if name == "route" else int(name.split("-", 1)[1])
    deadline = time.monotonic() + timeout_s
    while True:
        ctx.guard()
        p = procs.route if index is None else procs.workers.get(index)
        if p is None:
            raise ExperimentError(f"{what} was never started")
        rc = p.poll()
        supervised = index is None or index in ctx.supervised()
        if rc == 0 and (ctx.supervisor is None or name not in ctx.supervisor.pending):
            return
        if rc is not None and rc != 0 and not supervised:
            raise ExperimentError(f"{what} failed ({exit_cause(rc, ctx.files.log(name))})")
        if time.monotonic() > deadline:
            log_path = ctx.files.log(name)
            err = first_error(log_path)
            seen_err = f"; first error in its log: {err}" if err else ""
            raise ExperimentError(
                f"{what} did not finish within {timeout_s:.0f} s{seen_err}; log: {log_path}"
            )
        time.sleep(TICK_S)
