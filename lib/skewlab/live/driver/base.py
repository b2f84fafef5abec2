"""The run machinery every kind of live run shares: :class:`PhasedRun`, its phases in order.

A kind (:class:`skewlab.live.driver.run.Run`, grouping; :class:`skewlab.live.autoscale.run.
AutoscaleRun`) fills in what is its own (methods named ``_...``); the rest is here, once.
Each phase is refused before its predecessor is done and saves the handle, so the DAG
runs one phase per task:

1. :meth:`~PhasedRun.services`: the broker, the MLflow run opened (:meth:`~PhasedRun._track`);
2. ``topics``, 3. ``start``, 4. ``produce``: the kind's own;
5. :meth:`~PhasedRun.drain`: the kind's processes finish (``_drain``), then ``t_done``;
6. :meth:`~PhasedRun.aggregate`: the kind's counts (``_counts``) through one exactness check;
7. :meth:`~PhasedRun.summarize`: the kind's summary and MLflow run (``_summary``), the run done;
8. :meth:`~PhasedRun.stop` (safe after any phase, and on leaving a ``with`` block): loops
   signalled, processes asked to exit (``grace_s``), then killed; topics deleted unless kept.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from skewlab.errors import SkewlabError
from skewlab.io.kafka._common import log_librdkafka_to
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.driver.handle import Phase, RunHandle, Status
from skewlab.live.driver.launch import Launcher, LocalLauncher, Proc
from skewlab.live.driver.lifecycle import EndsOnExit, failure_reason, this_process
from skewlab.live.driver.spark_launcher import await_app_exit
from skewlab.live.driver.startup import start_services
from skewlab.live.report.tracking import LiveRun, fail_run
from skewlab.pipeline.exactness import ExactnessReport, check
from skewlab.rundir import RunDir, delta_root_of

__all__ = ["Counts", "KindSettings", "PhasedRun", "Say", "Summary", "create_handle", "reopen"]

log = logging.getLogger(__name__)

Say = Callable[[str], None]
"""Told one line of what a run is doing (:meth:`~skewlab.live.report.watch.ProgressLine.say`)."""

Counts = Mapping[Any, Any]
"""What :func:`~skewlab.pipeline.exactness.check` compares: ``key -> count`` (or a tuple)."""


class KindSettings(Protocol):
    """What the shared phases read of a kind's settings."""

    @property
    def bootstrap(self) -> str | None:
        """The broker to use (``None``: ``$SKEWLAB_KAFKA_BOOTSTRAP``, else the embedded one)."""
        ...

    @property
    def mlflow(self) -> bool:
        """Whether the run is tracked in MLflow."""
        ...

    @property
    def keep_topics(self) -> bool:
        """Whether :meth:`PhasedRun.stop` leaves the run's topics."""
        ...


class Summary(Protocol):
    """What :meth:`PhasedRun.summarize` records of a kind's summary."""

    mlflow_run_id: str | None


S = TypeVar("S", bound=Summary)


def _silent(_line: str) -> None:
    """The :data:`Say` of a run nobody watches."""


def create_handle(
    home: str,
    run_id: str,
    settings: dict[str, Any],
    kind: str = "grouping",
    events_topic: str | None = None,
    detached: bool = False,
) -> RunHandle:
    """The saved handle of a new run ``run_id`` of either kind under data dir ``home``:
    its run dir created, its Delta root, this process as its driver. ``events_topic``
    defaults to the run dir's; a grouping run also gets its ``routed`` topic."""
    root = Path(home).resolve()
    files = RunDir.create(root, run_id)
    handle = RunHandle(
        run_id=run_id,
        home=str(root),
        run_dir=str(files),
        delta_root=delta_root_of(root),
        settings=settings,
        events_topic=events_topic or files.events_topic,
        routed_topic=files.routed_topic if kind == "grouping" else "",
        driver=this_process(),
        detached=detached,
        kind=kind,
    )
    handle.save()
    return handle


def reopen(run_dir: str | Path) -> RunHandle:
    """The handle saved in ``run_dir``, this process recorded (and saved) as its driver."""
    handle = RunHandle.load(run_dir)
    handle.driver = this_process()
    handle.save()
    return handle


class PhasedRun(EndsOnExit, Generic[S]):
    """One live run in this process, of any kind: its handle, settings and Kafka client.

    The phases in the module doc's order; :meth:`run_all` runs those not done yet.
    ``S`` is the kind's summary (what :meth:`summarize` and :meth:`run_all` return).
    """

    settings: KindSettings

    def __init__(
        self,
        handle: RunHandle,
        settings: KindSettings,
        say: Say | None = None,
        detached: bool = False,
    ) -> None:
        self.handle = handle
        """The run's saved state (topics, processes, phases done)."""
        self.settings = settings
        self.detached = detached
        """Start processes detached (the DAG, a resumed run) rather than as children."""
        self.say: Say = say or _silent
        """Told, in a line, what each phase of :meth:`run_all` is about to do and what it did."""

    # -- what the run is -----------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The run's id (its run dir's name, from the handle)."""
        return self.handle.run_id

    @property
    def files(self) -> RunDir:
        """The names of the run's files and ids."""
        return RunDir.of(self.handle.run_dir)

    @property
    def phase(self) -> Phase | None:
        """The last phase done (``None``: none yet)."""
        done = self.handle.phases
        return Phase(done[-1]) if done else None

    @property
    def exact(self) -> bool | None:
        """The verdict once aggregated: every input counted once (``None`` before
        :meth:`aggregate`)."""
        saved = self.handle.exactness
        return None if saved is None else ExactnessReport.from_dict(saved).exact

    @property
    def launcher(self) -> Launcher:
        """Where the run's processes start: local processes, detached if the run is."""
        return LocalLauncher(self.detached)

    def spawn(self, name: str, cmd: list[str]) -> Proc:
        """Start process ``name`` running ``cmd`` (its log ``<run dir>/<name>.log``) and
        record it in the handle, saved: another process finds it there (:meth:`attached`)."""
        proc, rec = self.launcher.start(name, cmd, self.files.log(name))
        self.handle.procs[name] = rec
        self.handle.save()
        return proc

    def attached(self) -> dict[str, Proc]:
        """The processes the handle records, found again by pid and create time."""
        return {name: self.launcher.attach(rec) for name, rec in self.handle.procs.items()}

    @property
    def kafka(self) -> KafkaClient:
        """The run's Kafka client, connected on first use (needs :meth:`services`)."""
        raise NotImplementedError

    # -- the phases ----------------------------------------------------------------------

    def services(self) -> str:
        """Phase 1: the bootstrap servers (``bootstrap``, ``$SKEWLAB_KAFKA_BOOTSTRAP``, else
        the embedded broker under the data dir, started if needed). A local Delta root is
        checked first: a damaged table raises
        :class:`~skewlab.io.delta.store.DamagedTableError` (naming the table and its repair
        command) before any service starts. The run's MLflow run opens here."""
        bootstrap = start_services(self.handle, self.settings.bootstrap)
        if self.settings.mlflow and LiveRun.find(self.files) is None:
            self._track()
        self.handle.mark(Phase.SERVICES)
        return bootstrap

    def topics(self) -> None:
        """Phase 2: the run's topics; needs :meth:`services`."""
        raise NotImplementedError

    def start(self) -> None:
        """Phase 3: the run's processes, running; needs :meth:`topics`."""
        raise NotImplementedError

    def produce(self) -> Any:
        """Phase 4: the run's load; needs :meth:`start`; returns what was produced."""
        raise NotImplementedError

    def produce_task(self) -> None:
        """:meth:`produce` as one task of the DAG (a kind whose processes this process owns
        drains there too)."""
        self.produce()

    def drain(self) -> None:
        """Phase 5: the run's processes finish what is queued and exit (``_drain``), then
        ``t_done`` and what the kind keeps of them (``_drained``)."""
        h = self.handle
        if h.done(Phase.DRAINED):
            return
        h.require(Phase.PRODUCED, "drain")
        self._drain()
        h.t_done = time.time()
        self._drained()
        h.mark(Phase.DRAINED)

    def poke_drain(
        self,
        wait_s: float = 15.0,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> bool:
        """One look of the DAG's drain sensor (``wait_for_completion``): True once the run is
        drained (phase 5, finished by :meth:`drain`), False while its processes still drain
        after ``wait_s`` (``_poked``: the sensor frees its worker slot until its next look).
        Refused as :meth:`drain` is before ``produce``; raises as :meth:`drain` does when a
        process failed. ``logger`` gets the kind's progress line, if it has one."""
        h = self.handle
        if h.done(Phase.DRAINED):
            return True
        h.require(Phase.PRODUCED, "drain")
        if not self._poked(wait_s, logger, clock, sleep):
            return False
        self.drain()
        return True

    def aggregate(self) -> ExactnessReport:
        """Phase 6: the verdict: the kind's expected and actual counts (``_counts``) through
        :func:`~skewlab.pipeline.exactness.check`, saved in the handle."""
        h = self.handle
        h.require(Phase.DRAINED, "aggregate")
        expected, actual = self._counts()
        report = check(expected, actual)
        log.info("exactness of %s: %s", h.run_id, report.summary())
        h.exactness = asdict(report)
        self._checked(report)
        h.mark(Phase.AGGREGATED)
        return report

    def summarize(self) -> S:
        """Phase 7: the kind's summary, plots and MLflow run (``_summary``); the run done."""
        h = self.handle
        h.require(Phase.AGGREGATED, "summarize")
        summary = self._summary()
        h.mlflow_run_id = summary.mlflow_run_id
        h.mark(Phase.SUMMARIZED)
        h.finish(Status.DONE)
        return summary

    def stop(self, grace_s: float = 0.0) -> list[str]:
        """Phase 8 (safe after any phase): stop the loops, ask the processes to exit (given
        ``grace_s`` to drain what they have), kill what still runs, delete the topics
        unless ``keep_topics``, close the client (and the run's ``kafka.log``: librdkafka's
        lines go nowhere after). Returns the names of the processes it killed. A broker
        known gone gets no topic deletion and no flush."""
        h = self.handle
        self._signal()
        lost = self._broker_lost()
        if not lost:
            self._ask_to_exit(grace_s)
        killed = []
        for name, p in self._processes():
            if p.poll() is None:
                killed.append(name)
            p.kill()  # its group: also members that outlived it (a Spark job's JVM)
            with contextlib.suppress(Exception):
                p.wait(timeout=60)
        killed += self._kill_rest()
        if not self.settings.keep_topics and h.bootstrap is not None and not lost:
            for t in self._topics():
                try:
                    self.kafka.delete_topic(t)
                except SkewlabError as exc:
                    log.warning("could not delete topic %s: %s", t, exc)
        self._close(0.0 if lost else 10.0)
        log_librdkafka_to(None)  # the run's kafka.log is complete (a supervised run's)
        h.mark(Phase.STOPPED)
        if await_app_exit(self.files.path):  # it leaves on seeing the phase
            killed.append("workers-app")
        return killed

    def fail(self, exc: BaseException) -> str:
        """Record the run as failed (handle ``status`` / ``error``, its MLflow run FAILED)
        because of ``exc``; the one-line reason. A run that already ended keeps its end."""
        reason = failure_reason(exc)
        self.handle.finish(Status.FAILED, reason)
        log.info("run %s failed: %s", self.run_id, reason)
        fail_run(self.files, reason)  # never raises: MLflow must not hide the run's failure
        return reason

    def release(self) -> None:
        """Leave the run in this process: its loops asked to stop, its client closed (its
        processes and topics stay: they belong to the run, :meth:`stop` ends them). What a
        DAG task does after its phase."""
        self._signal()
        self._close(10.0)

    def run_all(self) -> S:
        """Every phase not done yet, in order, then :meth:`stop` whatever happened; a
        failure or an interrupt (:class:`~skewlab.live.driver.lifecycle.Interrupted`) is
        recorded in the handle (``status`` failed, ``error``) and raised again."""
        with self:
            h = self.handle
            if h.status != Status.DONE.value:  # a resumed run runs again
                h.status, h.error = Status.RUNNING.value, None
                if h.done(Phase.STOPPED):  # a failed driver's stop: its processes run again
                    h.phases.remove(Phase.STOPPED.value)  # (a workers app ends on the mark)
                h.save()
            steps: list[tuple[Phase, Callable[[], Any]]] = [
                (Phase.SERVICES, self.services), (Phase.TOPICS, self.topics),
                (Phase.STARTED, self.start), (Phase.PRODUCED, self.produce),
                (Phase.DRAINED, self.drain), (Phase.AGGREGATED, self.aggregate),
            ]  # fmt: skip
            for phase, step in steps:
                if not h.done(phase):
                    self._before(phase)
                    self._after(phase, step())
            self._before(Phase.SUMMARIZED)
            return self.summarize()

    # -- what a kind fills in ------------------------------------------------------------

    def _track(self) -> None:
        """Open the run's MLflow run (RUNNING from now, ``<run dir>/mlflow.json``)."""
        raise NotImplementedError

    def _drain(self) -> None:
        """Wait until the run's processes finished what is queued and exited."""
        raise NotImplementedError

    def _poked(
        self,
        wait_s: float,
        logger: logging.Logger | None,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
    ) -> bool:
        """Whether the run's processes finished draining (or one failed: :meth:`drain`
        handles it), looking until ``clock`` passes ``wait_s`` from now."""
        raise NotImplementedError

    def _drained(self) -> None:
        """What the kind keeps once its processes drained (nothing by default)."""

    def _counts(self) -> tuple[Counts, Counts]:
        """``(expected, actual)``: what the input holds, what the run processed."""
        raise NotImplementedError

    def _checked(self, report: ExactnessReport) -> None:
        """What the kind records beside the verdict ``report`` (nothing by default)."""

    def _summary(self) -> S:
        """The run's summary, its plots and MLflow run (unless disabled)."""
        raise NotImplementedError

    def _before(self, phase: Phase) -> None:
        """Called by :meth:`run_all` before it runs ``phase`` (nothing by default)."""

    def _after(self, phase: Phase, result: Any) -> None:
        """Called by :meth:`run_all` with what ``phase`` returned (nothing by default)."""

    def _signal(self) -> None:
        """Ask the run's loops in this process to stop (nothing by default)."""

    def _broker_lost(self) -> bool:
        """Whether the run's broker is known to be gone (no by default)."""
        return False

    def _ask_to_exit(self, grace_s: float) -> None:
        """Ask the run's processes to drain and exit; wait at most ``grace_s``."""

    def _processes(self) -> Iterable[tuple[str, Proc]]:
        """The run's processes started from this process or its handle, by name."""
        raise NotImplementedError

    def _kill_rest(self) -> list[str]:
        """Kill what the run's processes started themselves; the names (none by default)."""
        return []

    def _topics(self) -> Iterable[str]:
        """The run's topics (what :meth:`stop` deletes)."""
        raise NotImplementedError

    def _close(self, flush_s: float) -> None:
        """Close the run's Kafka client, flushing for up to ``flush_s``."""
        raise NotImplementedError
