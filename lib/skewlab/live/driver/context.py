"""One live run in one process: its context (handle, processes, client, guards), created
or resumed, and its spawners."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.control.loop import ThreadLoop
from skewlab.control.scaleout.manager import StateManager
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient, KafkaSettings
from skewlab.live.driver.base import PhasedRun, create_handle
from skewlab.live.driver.experiment import ExperimentError, Hook, new_run_id
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Proc, Procs, module_command
from skewlab.live.driver.producer import ProduceReport
from skewlab.live.driver.settings import kafka_settings, worker_settings
from skewlab.live.driver.supervise import BrokerProbe, RestartPolicy, Supervisor
from skewlab.live.report.tracking import LiveRun
from skewlab.live.report.watch import ProgressFn, Watcher
from skewlab.live.worker.settings import settings_to_json
from skewlab.pipeline.exactness import ExactnessReport
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events

if TYPE_CHECKING:
    from skewlab.quality.report import QualityReport

log = logging.getLogger(__name__)


Counts = Mapping[tuple[float, str], tuple[int, int]]
"""``(window, key) -> (count, value sum)``: a plain count of the run's input."""

TICK_S = 0.25
"""How often the produce and drain loops look at the children and the broker."""


@dataclass
class RunContext:
    """One run in one process: its :class:`RunHandle` plus the live objects of this process."""

    handle: RunHandle
    settings: ExperimentSettings
    detached: bool = False
    """Start processes detached (the DAG) rather than as children (``run_experiment``)."""
    progress: ProgressFn | None = None
    hook: Hook | None = None
    procs: Procs = field(default_factory=Procs)
    client: KafkaClient | None = None
    loop: ThreadLoop[Any] | None = None
    """The run's control loop in this process (rebalancer or state manager), if any."""
    watch: Watcher | None = None
    report: ProduceReport | None = None
    exactness: ExactnessReport | None = None
    expected: Counts | None = None
    quality: QualityReport | None = None
    scale: dict[str, Any] | None = None
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    supervisor: Supervisor | None = None
    probe: BrokerProbe | None = None
    mlflow: LiveRun | None = None
    """The run's open MLflow run (progress logged into it), if any."""

    @property
    def run_dir(self) -> Path:
        """The run's directory (:attr:`files` names what is in it)."""
        return Path(self.handle.run_dir)

    @property
    def files(self) -> RunDir:
        """The names of the run's files and ids."""
        return RunDir.of(self.handle.run_dir)

    @property
    def manager(self) -> StateManager | None:
        """The scale-out state manager running in this process, if any."""
        body = self.loop.body if self.loop is not None else None
        return body if isinstance(body, StateManager) else None

    @property
    def kafka(self) -> KafkaClient:
        """The run's Kafka client (connected on first use)."""
        if self.client is None:
            self.client = connect(self.kafka_settings)
        return self.client

    @property
    def kafka_settings(self) -> KafkaSettings:
        """The run's broker and Kafka client (needs the services phase)."""
        if self.handle.bootstrap is None:
            raise ExperimentError(f"run {self.handle.run_id} has no broker yet")
        return kafka_settings(self.settings.spec, self.handle)

    def watcher(self) -> Watcher:
        """The run's progress watcher (created on first use; also logs to MLflow)."""
        if self.watch is None:
            h = self.handle
            if self.mlflow is None and self.settings.mlflow:
                self.mlflow = LiveRun.find(self.files)
            done = int((h.produced or {}).get("events", 0))  # produced by an earlier task
            self.watch = Watcher(
                self.kafka, h.events_topic, h.routed_topic, h.delta_root, h.run_id,
                _progress_to(self.progress, self.mlflow, h),
                sent=done, total=n_events(self.settings.spec.workload) if done else 0,
            )  # fmt: skip
        return self.watch

    def supervised(self) -> list[int]:
        """The workers the :class:`Supervisor` restarts (a scale-out run's: the instances
        its state manager runs; it starts and stops them itself)."""
        if (mgr := self.manager) is not None:
            return sorted(mgr.running.copy())
        h = self.handle
        return list(h.running) if h.running is not None else list(range(self.settings.workers))

    def guard(self, sent: int | None = None, total: int | None = None) -> None:
        """:meth:`supervise`, then the progress line."""
        self.supervise()
        self.watcher().tick(sent, total)

    def supervise(self) -> None:
        """One look at the broker (fails fast when it is gone) and the children (restarts
        the ones that exited, and the workers hung with records waiting: their offsets
        come from the :meth:`watcher`'s reads)."""
        if self.probe is None and self.handle.bootstrap is not None:
            self.probe = BrokerProbe(self.handle.bootstrap)
        if self.probe is not None:
            self.probe.check()
        if self.supervisor is None:
            routed = bool(self.handle.routed_topic) and self.handle.bootstrap is not None
            self.supervisor = Supervisor(
                self.procs,
                self.handle,
                self.files,
                self.supervised,
                self.restart,
                broker=self.probe,
                progress=self.watcher().worker_offsets if routed else None,
                stall_s=self.settings.stall_s,  # the parsed settings, not the handle's dict
            )
        self.supervisor.check()

    def sleep(self, seconds: float) -> None:
        """Sleep ``seconds``, guarding every :data:`TICK_S` (the producer's pacing)."""
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            time.sleep(min(left, TICK_S))
            self.guard()


def _progress_to(
    progress: ProgressFn | None, mlflow: LiveRun | None, h: RunHandle
) -> ProgressFn | None:
    """``progress``, plus the counters logged into the open MLflow run (by seconds of
    event time since the first event produced)."""
    if mlflow is None:
        return progress

    def both(p: dict[str, float]) -> None:
        if progress is not None:
            progress(p)
        if h.t_produce is not None:
            try:
                mlflow.progress(
                    time.time() - h.t_produce, p["produced"], p["routed"], p["processed"], p["lag"]
                )
            except Exception as exc:  # progress in MLflow must never stop the run
                log.warning("MLflow progress of %s not logged: %s", h.run_id, exc)

    if progress is not None and hasattr(progress, "every_s"):
        both.every_s = progress.every_s  # type: ignore[attr-defined]
    return both


def bind_spawners(ctx: RunContext, run: PhasedRun[Any]) -> None:
    """Give ``ctx.procs`` its restart functions: each (re)starts the route job or
    worker ``i`` as ``run``'s process (:meth:`~skewlab.live.driver.base.PhasedRun.spawn`:
    its launcher, recorded in the handle), and kills what is left of the previous
    process of that name first."""
    files = ctx.files

    def start(name: str, cmd: list[str]) -> Proc:
        old = ctx.handle.procs.get(name)
        if old is not None:  # a restart: what is left of the old group must be gone
            run.launcher.attach(old).kill()
        return run.spawn(name, cmd)

    def start_route() -> None:
        files.route_ready.unlink(missing_ok=True)  # written again once this one is warm
        ctx.procs.route = start("route", ctx.handle.route_cmd)

    warm: set[int] = set()
    """Instances whose process waits to be released (:func:`skewlab.live.worker.warm.main`)."""

    def start_worker(i: int) -> None:
        files.worker_ready(i).unlink(missing_ok=True)
        p = ctx.procs.workers.get(i)
        if i in warm:
            warm.discard(i)
            if p is not None and p.poll() is None:
                files.worker_go(i).touch()
                return
        path = worker_file(ctx, i)
        cmd = module_command("skewlab.live.worker.process", str(path))
        ctx.procs.workers[i] = start(f"worker-{i}", cmd)

    def prewarm_worker(i: int) -> None:
        p = ctx.procs.workers.get(i)
        if i in warm or (p is not None and p.poll() is None):
            return  # waiting already, or running
        files.worker_go(i).unlink(missing_ok=True)
        path = worker_file(ctx, i)
        stop = files.worker_stop(i, ctx.settings.workers)
        cmd = [sys.executable, "-m", "skewlab.live.worker.warm", str(files.worker_go(i)), str(stop)]
        ctx.procs.workers[i] = start(f"worker-{i}", [*cmd, str(path)])
        warm.add(i)

    ctx.procs.restart_route, ctx.procs.restart_worker = start_route, start_worker
    ctx.procs.prewarm_worker = prewarm_worker


def worker_file(ctx: RunContext, i: int) -> Path:
    """Instance ``i``'s settings file (written from the run's spec if missing)."""
    path = ctx.files.worker_settings(i)
    if not path.exists():
        path.write_text(settings_to_json(worker_settings(ctx.settings.spec, ctx.handle, i)))
    return path


def new_run(
    s: ExperimentSettings,
    run_id: str | None = None,
    progress: ProgressFn | None = None,
    hook: Hook | None = None,
    detached: bool = False,
) -> RunContext:
    """A new run of ``s``: its id, ``<data dir>/runs/<run>/`` and a saved handle (its
    spawners are bound by the run that owns it: :func:`bind_spawners`)."""
    handle = create_handle(s.home, run_id or new_run_id(s.strategy), asdict(s), detached=detached)
    return RunContext(handle, s, detached=detached, progress=progress, hook=hook)


def resume(handle: RunHandle, progress: ProgressFn | None = None) -> RunContext:
    """The context of the run of ``handle`` (reopened in this process: detached, this process
    its driver), its settings parsed and validated once here. Its processes are found again
    from their records by the run that owns it
    (:meth:`~skewlab.live.driver.base.PhasedRun.attached`)."""
    return RunContext(handle, ExperimentSettings(**handle.settings), True, progress)
