"""A grouping run: the grouping kind of the shared run machinery, as one object.

:class:`Run` is a :class:`~skewlab.live.driver.base.PhasedRun` (phases, order, guards,
broker, drain / verdict / summary steps, failure and stop shared with the autoscale kind)
that owns its context (:class:`~skewlab.live.driver.context.RunContext`). Its own steps:

2. :meth:`Run.topics`: ``events`` and ``routed`` (plus a scale-out run's spare partitions);
3. :meth:`Run.start`: the route job and the W workers (and warm spares), waited for;
4. :meth:`Run.produce`: the workload at its rate, the rebalancer or state manager running;
5. the drain: end of stream; the route job, then the workers, drain and exit;
6. the counts: ``partials`` merged into ``results``, against a plain count of ``events``;
7. the summary: the quality suites, the summary and plots, the MLflow run.
:func:`new_run` and :func:`open_run` give the run of either kind. Details: docs/live-run.md.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.control.loop import ThreadLoop
from skewlab.control.rebalance_loop import start_loop as start_rebalance_loop
from skewlab.control.scaleout.manager import start_loop as start_manager_loop
from skewlab.control.scaleout.settings import Processes
from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient, KafkaSettings
from skewlab.live.autoscale.run import AutoscaleRun
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.driver.base import Counts, PhasedRun, Say, reopen
from skewlab.live.driver.context import TICK_S, RunContext, bind_spawners, worker_file
from skewlab.live.driver.context import new_run as new_context
from skewlab.live.driver.context import resume as resume_context
from skewlab.live.driver.experiment import ExperimentError, Hook
from skewlab.live.driver.handle import Phase, RunHandle
from skewlab.live.driver.handle import Phase as P
from skewlab.live.driver.launch import (
    Launcher,
    LocalLauncher,
    Proc,
    Procs,
    exit_cause,
    first_error,
    route_command,
)
from skewlab.live.driver.producer import ProduceReport, open_producer
from skewlab.live.driver.producer import produce as produce_workload
from skewlab.live.driver.route_host import HostLauncher
from skewlab.live.driver.settings import (
    produce_settings,
    rebalance_settings,
    route_settings,
    routed_partitions,
    warm_spares,
)
from skewlab.live.driver.spark_launcher import SparkLauncher, SparkProc, worker_engine
from skewlab.live.driver.startup import (
    preload,
    preload_modules,
    startup_line,
    wait_ready,
)
from skewlab.live.driver.supervise import stop_guarded
from skewlab.live.report.aggregate import merge, plain_count, results_counts
from skewlab.live.report.summary import summarize as summarize_run
from skewlab.live.report.tracking import log_run, open_live_run
from skewlab.live.report.watch import ProgressFn
from skewlab.pipeline import events
from skewlab.pipeline.exactness import ExactnessReport
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings, StateManagerSettings, state_manager_settings
from skewlab.spec import n_events
from skewlab.workload.spec import parse_workload

if TYPE_CHECKING:
    from skewlab.live.report.summary import RunSummary
    from skewlab.quality.report import QualityReport

log = logging.getLogger(__name__)

__all__ = ["Run", "new_run", "open_run", "run_experiment"]


def new_run(
    s: ExperimentSettings | AutoscaleSettings, run_id: str | None = None, detached: bool = False
) -> PhasedRun[Any]:
    """A new run of ``s``: a grouping :class:`Run` or an :class:`AutoscaleRun`."""
    if isinstance(s, AutoscaleSettings):
        return AutoscaleRun.new(s, run_id, detached=detached)
    return Run.new(s, run_id, detached=detached)


def open_run(run_dir: str | Path, progress: ProgressFn | None = None) -> PhasedRun[Any]:
    """The run saved in ``run_dir``, as the class its handle's ``kind`` names (the handle
    read once: :func:`~skewlab.live.driver.base.reopen`)."""
    handle = reopen(run_dir)
    if handle.kind == "autoscale":
        return AutoscaleRun.reopened(handle)
    return Run.reopened(handle, progress)


class Run(PhasedRun["RunSummary"]):
    """One grouping run in this process; it owns its context (handle, processes, loop,
    client).

    The phases of :class:`~skewlab.live.driver.base.PhasedRun`, in its order, each
    refused with a one-line :class:`~skewlab.live.driver.handle.HandleError` before its
    predecessor is done; :meth:`stop` is safe after any phase and runs when a ``with``
    block leaves. This kind's own steps are the module doc's.
    """

    settings: ExperimentSettings

    def __init__(self, ctx: RunContext, say: Say | None = None) -> None:
        super().__init__(ctx.handle, ctx.settings, say, ctx.detached)
        self.ctx = ctx
        bind_spawners(ctx, self)

    @property
    def launcher(self) -> Launcher:
        """Where this run's processes start: local processes (detached for the DAG), the
        workers as Spark tasks when ``$SKEWLAB_WORKER_ENGINE=spark``, the route job on the
        warm route host of ``$SKEWLAB_ROUTE_HOST`` if one runs."""
        local = LocalLauncher(self.detached)
        if worker_engine() == "spark":
            return HostLauncher(SparkLauncher(self.files.path, local))
        return HostLauncher(local)

    @classmethod
    def new(
        cls,
        s: ExperimentSettings,
        run_id: str | None = None,
        progress: ProgressFn | None = None,
        hook: Hook | None = None,
        detached: bool = False,
        say: Say | None = None,
    ) -> Run:
        """A new run of ``s`` (its run dir and handle written; nothing started)."""
        ctx = new_context(s, run_id, progress=progress, hook=hook, detached=detached)
        return cls(ctx, say)

    @classmethod
    def resume(cls, run_dir: str | Path, progress: ProgressFn | None = None) -> Run:
        """The run saved in ``run_dir``, its processes found again from their records."""
        return cls.reopened(reopen(run_dir), progress)

    @classmethod
    def reopened(cls, handle: RunHandle, progress: ProgressFn | None = None) -> Run:
        """The run of ``handle`` (:func:`~skewlab.live.driver.base.reopen`: read once in this
        process), its settings parsed once, its processes found again from their records."""
        run = cls(resume_context(handle, progress))
        procs = run.ctx.procs
        for name, proc in run.attached().items():
            if isinstance(proc, SparkProc):
                proc.adopt()
            if name == "route":
                procs.route = proc
            else:
                procs.workers[int(name.split("-", 1)[1])] = proc
        return run

    @property
    def kafka(self) -> KafkaClient:
        """The run's Kafka client (the context's, connected on first use)."""
        return self.ctx.kafka

    def topics(self) -> None:
        """Phase 2: ``events-<run>`` (P partitions) and ``routed-<run>`` (W + spares)."""
        ctx = self.ctx
        s, h = ctx.settings, ctx.handle
        h.require(P.SERVICES, "create the topics of")
        ctx.kafka.create_topic(h.events_topic, s.partitions)
        h.n_routed = routed_partitions(s.spec, h)
        ctx.kafka.create_topic(h.routed_topic, h.n_routed)
        h.mark(P.TOPICS)

    def start(self) -> None:
        """Phase 3: write the job settings, start the route job and W workers, wait for the
        route query (the command is recorded in the handle). With the Spark worker engine
        the workers app starts first, so that its JVM starts while the route job (or the
        route host's answer) is awaited: the workers' tasks need it before they are ready."""
        ctx = self.ctx
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
        if worker_engine() == "spark":
            SparkLauncher(ctx.files.path).app(share=True)  # spawned only if none is warm
        spawned = {"route": time.time()}
        ctx.procs.restart_route()
        for i in range(s.workers):
            spawned[f"worker-{i}"] = time.time()
            ctx.procs.restart_worker(i)
        for j in warm_spares(state_manager_settings(s.spec, h.run_id, h.delta_root)):
            ctx.procs.prewarm_worker(j)
        # The producer connects (and gets its producer id) while the jobs start: connected
        # only at the first event, it held a run's first ~0.5 s of events (session 31).
        open_producer(ctx.kafka, h.events_topic)
        startup = wait_ready(ctx.files, ctx.procs, list(range(s.workers)), spawned)
        h.spark_ui = startup.pop("spark_ui")
        h.startup.update(startup)
        log.info("run %s warm: %s", h.run_id, h.startup)
        h.mark(P.STARTED)

    def produce(self) -> ProduceReport:
        """Phase 4: produce the workload; the control loop runs meanwhile, stopped at the end.

        The children and the broker are guarded every :data:`TICK_S` meanwhile
        (:meth:`RunContext.guard`). A run resumed after its driver died mid-produce
        produces only the events not yet in ``events`` (per partition, the events
        past its end offset: a partition holds a prefix of its events)."""
        ctx = self.ctx

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
            log.info(
                "run %s resumes producing; already in %s: %s", h.run_id, h.events_topic, present
            )

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

    def produce_task(self) -> None:
        """:func:`produce`, then :func:`drain` in the same process if it owns a state manager."""
        self.produce()
        if self.ctx.manager is not None:
            self.drain()

    def _drain(self) -> None:
        """Stop the route job (it drains all input), then the running workers."""
        ctx = self.ctx
        s, h = ctx.settings, ctx.handle
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

    def _poked(
        self,
        wait_s: float,
        logger: logging.Logger | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> bool:
        """Asks the route job to finish (``route.stop``), and once it has exited cleanly,
        the workers (``workers.stop``), as :meth:`drain` does, but without waiting for them:
        True once every child has exited (or one failed), False while one still drains
        after ``wait_s``. A scale-out run drained in ``produce`` already.

        ``logger`` gets one progress line (stage, routed, processed) per look, and only
        when the line differs from the last one logged for this run
        (:attr:`RunDir.drain_progress`): a drain that makes no progress logs nothing.
        """
        ctx = self.ctx
        if ctx.settings.scale_out is not None:
            return True
        seen: dict[str, float] = {}
        watch = ctx.watcher()
        shown = watch.progress

        def keep(p: dict[str, float]) -> None:
            seen.update(p)
            if shown is not None:
                shown(p)

        watch.progress = keep
        try:
            watch.tick(None, None)  # MLflow's series go on from where produce left them
            deadline = clock() + wait_s
            waiting = self._still_draining()
            while waiting is not None and clock() < deadline:
                sleep(0.5)
                waiting = self._still_draining()
            if waiting is None:
                return True
            if logger is not None:
                watch.tick(None, None)
                line = _drain_line(waiting, seen, ctx.handle.produced or {})
                _log_change(ctx.files, logger, line)
            return False
        finally:
            watch.progress = shown

    def _still_draining(self) -> str | None:
        """What the drain waits for (``route job``, ``workers 0, 2``), or None when every
        child has exited (or one exited with an error: :meth:`drain` handles it)."""
        ctx = self.ctx
        ctx.files.route_stop.touch()
        route = ctx.procs.route
        rc = route.poll() if route is not None else 1
        if rc is None:
            return "route job"
        if rc != 0:
            return None
        ctx.files.workers_stop.touch()
        s, h = ctx.settings, ctx.handle
        live = list(h.running) if h.running is not None else list(range(s.workers))
        running = []
        for i in live:
            proc = ctx.procs.workers.get(i)
            code = proc.poll() if proc is not None else 1
            if code is not None and code != 0:
                return None
            if code is None:
                running.append(i)
        if running:
            return "worker" + ("s " if len(running) > 1 else " ") + ", ".join(map(str, running))
        return None

    def _drained(self) -> None:
        """A scale-out run's last bookkeeping: instances running, scale events closed."""
        ctx = self.ctx
        if (mgr := ctx.manager) is not None:
            mgr.track_events(final=True)
            ctx.scale = mgr.report()
            ctx.handle.scale = json.loads(json.dumps(ctx.scale, default=_plain))

    def _counts(self) -> tuple[Counts, Counts]:
        """``partials`` merged into ``results``; a plain count of ``events`` against them."""
        ctx = self.ctx
        h = ctx.handle
        store = DeltaStore(h.delta_root)
        merge(store, h.run_id)
        expected, _ = plain_count(ctx.kafka, h.events_topic, ctx.settings.window_s)
        ctx.expected = expected
        return expected, results_counts(store, h.run_id)

    def _checked(self, report: ExactnessReport) -> None:
        """The verdict kept for the summary; the plain count saved for a later task."""
        ctx = self.ctx
        ctx.exactness = report
        if ctx.detached and ctx.expected is not None:
            rows = [[w, k, c, v] for (w, k), (c, v) in ctx.expected.items()]
            ctx.files.expected.write_text(json.dumps(rows))

    def check_quality(self) -> QualityReport:
        """Phase 7a: the data-quality suites on the run's tables (input counts as exactness)."""
        ctx = self.ctx
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

    def _summary(self) -> RunSummary:
        """Phase 7b: the summary and plots, the quality verdict, the MLflow run."""
        ctx = self.ctx
        s, h = ctx.settings, ctx.handle
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
            quality = self.check_quality()
        if quality is not None:
            summary.quality = "passed" if quality.ok else "failed"
            summary.quality_failures = list(quality.failures)
            docs = quality.run_page or quality.data_docs  # the run's own page, else the index
            summary.data_docs = docs.as_uri() if docs else None
        if s.mlflow:
            summary = log_run(summary, s, Path(h.home), quality)
        return summary

    # -- what the shared phases ask of this kind -----------------------------------------

    def _track(self) -> None:
        self.ctx.mlflow = open_live_run(self.ctx.settings, self.ctx.files)

    def _signal(self) -> None:
        if self.ctx.loop is not None:
            self.ctx.loop.signal()

    def _broker_lost(self) -> bool:
        probe = self.ctx.probe
        return probe is not None and probe.lost

    def _ask_to_exit(self, grace_s: float) -> None:
        """With ``grace_s`` > 0 (an interrupted run), the route job and the workers are
        asked to drain what they have (stop markers) and given that long to exit."""
        if grace_s > 0:
            _drain_briefly(self.ctx, grace_s)

    def _processes(self) -> Iterable[tuple[str, Proc]]:
        procs = self.ctx.procs
        if procs.route is not None:
            yield "route", procs.route
        for i, p in list(procs.workers.items()):
            yield f"worker-{i}", p

    def _topics(self) -> Iterable[str]:
        return (self.ctx.handle.events_topic, self.ctx.handle.routed_topic)

    def _close(self, flush_s: float) -> None:
        ctx = self.ctx
        if ctx.client is not None:
            ctx.client.close(flush_s=flush_s)  # 0: no broker, no flush
            ctx.client = None

    def _before(self, phase: Phase) -> None:
        """What :meth:`run_all` is about to do, in a line (and the modules a later phase
        needs imported while Spark starts)."""
        s, say = self.ctx.settings, self.say
        if phase is Phase.SERVICES:
            say("connecting to the broker (the embedded Apache Kafka starts if needed)")
        elif phase is Phase.STARTED:
            preload(preload_modules(s.quality, s.mlflow))  # imported while Spark starts
            say(f"starting the route job (Spark session, warm-up batch) and {s.workers} "
                "workers")  # fmt: skip
        elif phase is Phase.PRODUCED:
            say(f"producing {n_events(s.spec.workload):,} events at {s.rate:,.0f}/s")
        elif phase is Phase.DRAINED:
            say("draining: the route job, then the workers, finish what is queued")
        elif phase is Phase.AGGREGATED:
            say("merging the workers' partials and counting the input for the verdict")
        elif phase is Phase.SUMMARIZED:
            say("summary: quality suites, plots and the MLflow run")

    def _after(self, phase: Phase, result: Any) -> None:
        """What a phase of :meth:`run_all` did, in a line."""
        h, say = self.ctx.handle, self.say
        if phase is Phase.SERVICES:
            took = h.startup.get("services")
            say(f"broker {result}" + (f", started in {took:.1f} s" if took else ""))
        elif phase is Phase.TOPICS:
            say(f"topics {h.events_topic} ({self.ctx.settings.partitions} partitions), "
                f"{h.routed_topic} ({h.n_routed})")  # fmt: skip
        elif phase is Phase.STARTED:
            say(startup_line(h.startup, h.spark_ui) or "route job and workers ready")
        elif phase is Phase.AGGREGATED:
            say(f"verdict: {'EXACT' if result.exact else 'NOT EXACT'}")


def run_experiment(
    s: ExperimentSettings,
    progress: ProgressFn | None = None,
    hook: Hook | None = None,
    run_id: str | None = None,
    say: Say | None = None,
) -> RunSummary:
    """Run one live experiment (every phase; this kind's own as the module doc lists them) and
    return its summary; ``say`` is told each phase in a line as it starts (the CLI prints them).

    :meth:`Run.run_all` in this process (the route job and workers are its children);
    whatever happens, :meth:`Run.stop` runs last: loops stopped, processes killed,
    topics deleted unless ``keep_topics``.
    """
    return Run.new(s, run_id, progress=progress, hook=hook, say=say).run_all()


def _drain_line(waiting: str, seen: Mapping[str, float], produced: Mapping[str, Any]) -> str:
    total = produced.get("events")
    of = f" of {int(total):,}" if total is not None else ""
    return (
        f"draining: waiting for the {waiting}; routed {int(seen.get('routed', 0)):,}{of} "
        f"events, processed {int(seen.get('processed', 0)):,}"
    )


def _log_change(files: RunDir, logger: logging.Logger, line: str) -> None:
    """Log ``line`` unless it is the last line logged for this run."""
    try:
        last = files.drain_progress.read_text()
    except OSError:
        last = None
    if line != last:
        logger.info("%s", line)
        files.drain_progress.write_text(line)


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # numpy scalars
    return item() if callable(item) else str(value)


def load_expected(run_dir: Path) -> dict[tuple[float, str], tuple[int, int]] | None:
    """The plain count :func:`aggregate` saved for a later task (None if not saved)."""
    try:
        rows = json.loads(RunDir.of(run_dir).expected.read_text())
    except FileNotFoundError:
        return None
    return {(w, k): (c, v) for w, k, c, v in rows}


def _load_quality(run_dir: Path) -> QualityReport | None:
    from skewlab.quality.report import QualityReport

    try:
        return QualityReport.from_dict(json.loads(RunDir.of(run_dir).quality.read_text()))
    except FileNotFoundError:
        return None


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


def _drain_briefly(ctx: RunContext, grace_s: float) -> None:
    """Ask the children to drain and exit; wait at most ``grace_s`` in all."""
    deadline = time.monotonic() + grace_s
    files, procs = ctx.files, ctx.procs

    def wait(ps: list[Proc]) -> None:
        while any(p.poll() is None for p in ps) and time.monotonic() < deadline:
            time.sleep(0.1)

    if procs.route is not None:
        files.route_stop.touch()
        wait([procs.route])
    files.workers_stop.touch()
    files.spares_stop.touch()
    wait(list(procs.workers.values()))
