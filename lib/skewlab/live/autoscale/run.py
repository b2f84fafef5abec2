"""One live autoscaling run: the autoscale kind of the shared run machinery.

:class:`AutoscaleRun` is a :class:`~skewlab.live.driver.base.PhasedRun`: the phases, their
order and guards, the broker, the MLflow run, the drain / verdict / summary steps, the
failure and the stop are the ones every live run has (:mod:`skewlab.live.driver.base`);
the DAG runs one per task as for a grouping run. Its own steps: ``topics`` (data,
monitor, consumer.metadata, processed), ``start`` (the monitor and the controller, which
starts the consumers it decides on: local processes or tasks of the run's workers app,
:mod:`skewlab.live.autoscale.instances`), ``produce`` (the speed plan, the controller
restarted if it dies), the drain (the group's committed offsets reach the ends), the
counts (the evidence against the data topic) and the summary (decisions, plot).
Details: docs/autoscale.md.
"""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.autoscale.instances import ConsumerTask, load_instances
from skewlab.live.autoscale.protocol import (
    LiveSettings,
    Processed,
    Topics,
    downtimes,
    evidence_counts,
    overlaps,
    ownerships,
    percentiles,
    speed_plan,
)
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.autoscale.summary import (
    AutoscaleSummary,
    mlflow_opening,
    plot_run,
    read_decisions,
    read_evidence,
)
from skewlab.live.driver.base import Counts, PhasedRun, create_handle, reopen
from skewlab.live.driver.experiment import ExperimentError, new_run_id
from skewlab.live.driver.handle import Phase as P
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Proc, Procs, module_command
from skewlab.live.driver.spark_launcher import SparkLauncher, worker_engine
from skewlab.live.driver.supervise import BrokerProbe, Roles, Supervisor
from skewlab.live.report.tracking import LiveRun, log_run, open_live_run
from skewlab.pipeline.exactness import ExactnessReport

__all__ = ["AutoscaleRun", "Hook", "run_autoscale"]

log = logging.getLogger(__name__)

TICK_S = 0.1
EXIT_WAIT_S = 30.0
ROLES = ("monitor", "controller")


Hook = Callable[[int, "AutoscaleRun"], None]
"""Called with the iteration index at each iteration boundary of the produce phase."""


class AutoscaleRun(PhasedRun[AutoscaleSummary]):
    """One autoscale run in this process: its handle, settings, processes and client.

    The phases of :class:`~skewlab.live.driver.base.PhasedRun`, in its order; what is
    this kind's: :meth:`topics` (data, monitor, consumer.metadata, processed; the
    processes' ``settings.json``), :meth:`start` (monitor and controller; the controller
    starts the consumers it decides on), :meth:`produce` (iteration ``k`` writes partition
    ``p`` at ``plan[k, p]`` bytes/s for ``iteration_s``; consumers and lag sampled and the
    hook called at each boundary), the drain (the group's committed offsets reach the
    true ends, then the stop file and the processes' exit), the verdict (the evidence
    against the data topic, no ownership overlap) and the summary (decisions, plot).
    """

    settings: AutoscaleSettings

    def __init__(
        self,
        handle: RunHandle,
        s: AutoscaleSettings,
        detached: bool = False,
        hook: Hook | None = None,
    ) -> None:
        super().__init__(handle, s, detached=detached)
        self.s, self.hook = s, hook
        self.procs: dict[str, Proc] = {}
        self.samples: list[dict[str, float]] = []
        self._client: KafkaClient | None = None
        self._written: LiveSettings | None = None
        """``settings.json`` as the processes read it (read once, by :attr:`engine`)."""
        self._live: LiveSettings | None = None
        self._evidence: list[Processed] = []
        self.mlflow: LiveRun | None = LiveRun.find(self.files) if s.mlflow else None
        """The run's MLflow run (opened by :meth:`services`), if it logs to MLflow."""
        self.probe: BrokerProbe | None = None
        self.supervisor: Supervisor | None = None
        """Watches the monitor and the controller (made by :meth:`supervise`)."""

    @classmethod
    def new(
        cls,
        s: AutoscaleSettings,
        run_id: str | None = None,
        hook: Hook | None = None,
        detached: bool = False,
    ) -> AutoscaleRun:
        """A new run of ``s`` (its run dir and handle written; nothing started)."""
        run_id = run_id or new_run_id(s.algorithm.replace(":", ""))
        handle = create_handle(s.home, run_id, asdict(s), "autoscale", Topics.of(run_id).data,
                               detached)  # fmt: skip
        return cls(handle, s, detached, hook)

    @classmethod
    def resume(cls, run_dir: str | Path) -> AutoscaleRun:
        """The run saved in ``run_dir``, its processes found again from their records."""
        return cls.reopened(reopen(run_dir))

    @classmethod
    def reopened(cls, handle: RunHandle) -> AutoscaleRun:
        """The run of ``handle`` (:func:`~skewlab.live.driver.base.reopen`: read once in this
        process), its settings parsed once, its processes found again from their records."""
        run = cls(handle, AutoscaleSettings(**handle.settings), detached=True)
        run.procs = run.attached()
        run.samples = list((handle.produced or {}).get("samples", []))
        return run

    # -- what the run is -----------------------------------------------------------------

    @property
    def engine(self) -> str:
        """Where the consumers run (``local`` / ``spark``): as ``settings.json`` says once
        written (phase ``topics``), else :func:`worker_engine`."""
        if self._written is None:
            try:
                self._written = LiveSettings.from_file(self.files.settings)
            except (OSError, ValueError, TypeError):
                return worker_engine()
        return self._written.engine

    @property
    def live(self) -> LiveSettings:
        """The settings every process of the run reads (needs the broker)."""
        h, live = self.handle, self._live
        if h.bootstrap is None:
            raise ExperimentError(f"run {h.run_id} has no broker yet")
        if live is None or (live.bootstrap, live.engine) != (h.bootstrap, self.engine):
            live = self._live = self.s.live(
                h.run_id, h.bootstrap, h.run_dir, h.delta_root, self.engine
            )
        return live

    @property
    def kafka(self) -> KafkaClient:
        """The run's Kafka client, connected on first use (needs the broker)."""
        if self._client is None:
            self._client = connect(self.live.kafka)
        return self._client

    @property
    def exact(self) -> bool | None:
        """The verdict once aggregated: every offset processed once and no two consumers
        owning a partition at overlapping times (``None`` before :meth:`aggregate`)."""
        exact, scale = super().exact, self.handle.scale
        if exact is None or scale is None:
            return None
        return exact and int(scale["overlaps"]) == 0

    def state(self) -> dict[str, Any]:
        """The controller's persisted state (``{}`` before its first write)."""
        try:
            return dict(json.loads(self.files.controller_state.read_text()))
        except (OSError, ValueError):
            return {}

    def consumer_pids(self) -> dict[int, int]:
        """``{consumer id: pid}`` of the running consumers from the controller's persisted
        state (``{}`` before it); a Spark task's: its current attempt's (none before one)."""
        procs, _ = load_instances(self.state())
        return {c: p.pid for c, p in procs.items() if p.pid > 0}

    def consumer_tasks(self) -> dict[int, ConsumerTask]:
        """``{consumer id: task}`` of the running consumers run as Spark tasks."""
        procs, _ = load_instances(self.state())
        return {c: p for c, p in procs.items() if isinstance(p, ConsumerTask)}

    def lag(self) -> int:
        """Records of the data topic not yet committed by the group."""
        live = self.live
        ends = self.kafka.end_offsets(live.topics.data)
        done = self.kafka.committed(live.group, live.topics.data)
        return sum(e - done.get(p, 0) for p, e in ends.items())

    # -- processes -----------------------------------------------------------------------

    def _start(self, role: str) -> None:
        cmd = module_command(f"skewlab.live.autoscale.{role}", str(self.files.settings))
        self.procs[role] = self.spawn(role, cmd)

    def start_controller(self) -> None:
        """Start the controller process and record it in the handle (crash tests restart it)."""
        self._start("controller")

    def kill_controller(self) -> None:
        """SIGKILL the controller process, if started here, and wait for it."""
        p = self.procs.get("controller")
        if p is not None:
            p.kill()
            p.wait()

    def _progress(self, t_s: float, sent: int, lag: int) -> None:
        """Log the counters to the run's MLflow run (records go straight to consumers:
        produced = routed)."""
        if self.mlflow is not None:
            self.mlflow.progress(t_s, sent, sent, sent - lag, lag)

    def supervise(self) -> None:
        """One look at the broker (fails fast when it is gone) and at the monitor and the
        controller: one that exits unasked is restarted after its backoff, within the run's
        budget (:class:`~skewlab.live.driver.supervise.Supervisor`, as a grouping run's
        route job and workers; the controller resumes from its state file)."""
        h = self.handle
        if self.probe is None and h.bootstrap is not None:
            self.probe = BrokerProbe(h.bootstrap)
        if self.probe is not None:
            self.probe.check()
        if self.supervisor is None:
            roles = Roles(lambda: self.procs, self._start, self.files.stop)
            self.supervisor = Supervisor(Procs(), h, self.files, list, broker=self.probe,
                                         roles=roles)  # fmt: skip
        self.supervisor.check()

    # -- this kind's phases --------------------------------------------------------------

    def topics(self) -> None:
        """Phase 2: the run's four topics, and ``settings.json`` for its processes."""
        self.handle.require(P.SERVICES, "create the topics of")
        live = self.live
        topics = live.topics
        sizes = (
            (topics.data, self.s.partitions),
            (topics.monitor, 1),
            (topics.metadata, live.max_consumers + 1),
            (topics.processed, self.s.partitions),
        )
        for name, n in sizes:
            self.kafka.create_topic(name, n)
        self.files.settings.write_text(live.to_json())
        self.handle.mark(P.TOPICS)

    def start(self) -> None:
        """Phase 3: the monitor and the controller, running; with the ``spark`` engine the
        workers app first, up: the warm one beside a route host if there is one (as a
        grouping run's), else the run's own (the controller's consumers are its jobs; its
        Spark start, in ``handle.startup``, is not part of the load)."""
        self.handle.require(P.TOPICS, "start the processes of")
        self.handle.t_start = time.time()
        if self.engine == "spark":
            began = time.monotonic()
            app = SparkLauncher(self.files.path).wait_app(share=True)
            self.handle.startup["workers_app"] = time.monotonic() - began
            log.info("workers app %s of %s ready, UI %s", app["app_id"], self.run_id, app["ui"])
        for role in ROLES:
            self._start(role)
        self.handle.mark(P.STARTED)

    def produce(self) -> int:
        """Phase 4: the load of the speed plan; the records produced."""
        s, h = self.s, self.handle
        h.require(P.STARTED, "produce into")
        plan = speed_plan(s.workload, s.partitions, s.iterations, s.c)
        topic, value = self.live.topics.data, b"x" * s.record_bytes
        credit = np.zeros(s.partitions)
        sent = 0
        h.t_produce = t0 = last = time.time()
        k_seen = -1
        while (now := time.time()) - t0 < s.duration_s:
            k = min(int((now - t0) / s.iteration_s), s.iterations - 1)
            if k != k_seen:
                k_seen = k
                lag = self.lag()
                running = len(load_instances(self.state())[0])
                self.samples.append(
                    {"t": now - t0, "iteration": k, "consumers": running, "lag": lag}
                )
                self._progress(now - t0, sent, lag)
                if self.hook is not None:
                    self.hook(k, self)
            self.supervise()
            credit += plan[k] * (now - last)
            last = now
            n = np.floor(credit / s.record_bytes).astype(np.int64)
            credit -= n * s.record_bytes
            for p in np.flatnonzero(n):
                for _ in range(int(n[p])):
                    self.kafka.produce(topic, value, partition=int(p))
            sent += int(n.sum())
            self.kafka.flush()
            time.sleep(max(0.0, TICK_S - (time.time() - now)))
        self._progress(time.time() - t0, sent, self.lag())
        h.produced = {"events": sent, "seconds": time.time() - t0, "samples": self.samples}
        h.mark(P.PRODUCED)
        return sent

    def produce_task(self) -> None:
        """:meth:`produce` as a DAG task (the drain is a task of its own)."""
        log.info("produced %s records", self.produce())

    def _committed_all(
        self,
        wait_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> bool:
        """Whether the group committed every record within ``wait_s`` (progress logged,
        processes checked meanwhile)."""
        h = self.handle
        until = clock() + wait_s
        t0, sent = h.t_produce or time.time(), int((h.produced or {}).get("events", 0))
        while (lag := self.lag()) > 0:
            self._progress(time.time() - t0, sent, lag)
            self.supervise()
            if clock() >= until:
                return False
            sleep(0.25)
        self._progress(time.time() - t0, sent, 0)
        return True

    def _drain(self) -> None:
        """Wait until the group committed every record, then stop the processes."""
        if not self._committed_all(self.s.drain_timeout_s):
            raise ExperimentError(
                f"run {self.run_id} did not drain within {self.s.drain_timeout_s:g} s "
                f"({self.lag()} records left)"
            )
        self.files.stop.touch()  # the controller stops its consumers, then everyone exits
        for role in ("controller", "monitor"):
            p = self.procs.get(role)
            if p is None:
                continue
            try:
                p.wait(timeout=EXIT_WAIT_S)
            except subprocess.TimeoutExpired:
                log.warning("%s did not exit within %g s; killed", role, EXIT_WAIT_S)
                p.kill()
                p.wait()

    def _poked(
        self,
        wait_s: float,
        logger: logging.Logger | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> bool:
        """Whether the group committed every record within ``wait_s`` (its progress goes
        to the MLflow run, no line to ``logger``)."""
        return self._committed_all(wait_s, clock, sleep)

    def _counts(self) -> tuple[Counts, Counts]:
        """The evidence of the ``processed`` topic against the data topic's offsets."""
        self._evidence = read_evidence(self.kafka, self.live)
        ends = self.kafka.end_offsets(self.live.topics.data)
        return evidence_counts(self._evidence, ends)

    def _checked(self, report: ExactnessReport) -> None:
        """Beside the verdict: ownership overlaps, latency percentiles, hand-off downtimes."""
        evidence = self._evidence
        bad = overlaps(ownerships(evidence))
        for a, b in bad[:5]:
            log.error("partition %d read by consumers %d and %d at once", a.partition,
                      a.consumer, b.consumer)  # fmt: skip
        log.info("%s: %d overlaps", self.run_id, len(bad))
        handoffs = [x for d in read_decisions(self.live) for x in d["handoffs"] if "stop_sent" in x]
        lat = [x for e in evidence if e.kind == "batch" for x in e.latency_ms]
        self.handle.scale = {
            "overlaps": len(bad),
            "latency": percentiles(lat),
            "downtime": downtimes(handoffs, evidence),
        }

    def _summary(self) -> AutoscaleSummary:
        """The summary (decisions from Delta), its plot and MLflow run (unless disabled)."""
        s, h = self.s, self.handle
        assert h.exactness is not None and h.scale is not None and h.t_start is not None
        report = ExactnessReport.from_dict(h.exactness)
        summary = AutoscaleSummary(
            run_id=h.run_id, algorithm=s.algorithm, workload=s.workload,
            records=report.expected_events, exact=bool(self.exact),
            exactness=report.summary(), overlaps=int(h.scale["overlaps"]),
            latency=h.scale["latency"], decisions=read_decisions(self.live),
            samples=self.samples, downtime=h.scale["downtime"], iteration_s=s.iteration_s,
            wall_s=time.time() - h.t_start, run_dir=h.run_dir, lost=report.lost,
            doubled=report.doubled,
        )  # fmt: skip
        if s.mlflow:
            summary.plots.append(str(plot_run(summary, self.files.path / "autoscale.png")))
            summary = log_run(summary, mlflow_opening(s), Path(h.home))
        return summary

    # -- what the shared phases ask of this kind -----------------------------------------

    def _track(self) -> None:
        self.mlflow = open_live_run(mlflow_opening(self.s), self.files)

    def _ask_to_exit(self, grace_s: float) -> None:
        """The stop file asks the controller to stop its consumers and everyone to exit;
        with ``grace_s`` > 0 (an interrupted run) they get that long before the kill."""
        self.files.stop.touch()
        deadline = time.monotonic() + grace_s
        while any(p.poll() is None for p in self.procs.values()) and time.monotonic() < deadline:
            time.sleep(0.1)

    def _processes(self) -> Iterable[tuple[str, Proc]]:
        return list(self.procs.items())

    def _kill_rest(self) -> list[str]:
        """The consumers the controller's state records (running or retiring)."""
        killed = []
        procs, retiring = load_instances(self.state())
        for c, proc in [*procs.items(), *retiring]:
            if proc.alive():
                killed.append(f"consumer-{c}" if c >= 0 else f"consumer pid {proc.pid}")
            proc.kill()
        return killed

    def _broker_lost(self) -> bool:
        return self.probe is not None and self.probe.lost

    def _topics(self) -> Iterable[str]:
        return self.live.topics.all()

    def _close(self, flush_s: float) -> None:
        if self._client is not None:
            self._client.close(flush_s)
            self._client = None


def run_autoscale(
    s: AutoscaleSettings, hook: Hook | None = None, run_id: str | None = None
) -> AutoscaleSummary:
    """One whole run in this process: ``AutoscaleRun.new(s, run_id, hook).run_all()``."""
    return AutoscaleRun.new(s, run_id, hook).run_all()
