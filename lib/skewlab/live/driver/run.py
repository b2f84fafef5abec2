"""A live run as one object, its phases as methods; :func:`run_experiment` runs them all.

1. the broker runs (embedded Apache Kafka unless a bootstrap is given); the run's topics;
2. the Spark route job and the W worker processes start; wait for the route query;
3. produce the workload at its rate with progress (and the rebalancer or state manager);
4. stop: the control loop stops, the route job drains and exits, then the workers;
5. merge ``partials`` into ``results``, check them against a plain count (the verdict),
   summarise, log the MLflow run;
6. delete the run's topics (unless ``keep_topics``).

:class:`Run` owns its resources and releases them whatever happens; the DAG runs one
phase per task over the same handle (:func:`open_run`). Details: docs/live-run.md,
section ``skewlab.live.driver.experiment``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from skewlab.live.autoscale.run import AutoscaleRun
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.driver import ending, phases
from skewlab.live.driver.context import RunContext
from skewlab.live.driver.context import new_run as new_context
from skewlab.live.driver.context import resume as resume_context
from skewlab.live.driver.experiment import ExperimentSettings, Hook
from skewlab.live.driver.handle import Phase, RunHandle, Status
from skewlab.live.driver.lifecycle import INTERRUPT_GRACE_S, EndsOnExit
from skewlab.live.driver.startup import preload, preload_modules, startup_line
from skewlab.live.report.watch import ProgressFn
from skewlab.pipeline.exactness import ExactnessReport
from skewlab.rundir import RunDir

if TYPE_CHECKING:
    from skewlab.live.driver.producer import ProduceReport
    from skewlab.live.report.summary import RunSummary

__all__ = ["INTERRUPT_GRACE_S", "PhasedRun", "Run", "Say", "new_run", "open_run", "run_experiment"]


class PhasedRun(Protocol):
    """What every kind of live run offers (:class:`Run`, :class:`AutoscaleRun`): its
    phases in order, each refused before its predecessor is done, and its end."""

    @property
    def run_id(self) -> str:
        """The run's id (its run dir's name)."""
        ...

    @property
    def files(self) -> RunDir:
        """The names of the run's files and ids."""
        ...

    @property
    def phase(self) -> Phase | None:
        """The last phase done (``None``: none yet)."""
        ...

    @property
    def handle(self) -> RunHandle:
        """The run's saved state (topics, processes, phases done)."""
        ...

    @property
    def exact(self) -> bool | None:
        """The run's verdict once aggregated (``None`` before)."""
        ...

    def produce_task(self) -> None:
        """:meth:`produce` as one task of the DAG: also drains when the run's processes
        are owned by this process (a scale-out run's state manager)."""
        ...

    def services(self) -> str:
        """The bootstrap servers, the embedded broker started if needed."""
        ...

    def topics(self) -> None:
        """Create the run's topics; needs :meth:`services`."""
        ...

    def start(self) -> None:
        """Start the run's jobs and consumers; needs :meth:`topics`."""
        ...

    def produce(self) -> Any:
        """Produce the workload; needs :meth:`start`; returns its report."""
        ...

    def drain(self) -> None:
        """Let the consumers finish and exit; needs :meth:`produce`."""
        ...

    def aggregate(self) -> ExactnessReport:
        """Merge the partial results and check them against the input; needs :meth:`drain`."""
        ...

    def summarize(self) -> Any:
        """Write the summary (and MLflow run); needs :meth:`aggregate`; returns it."""
        ...

    def stop(self, grace_s: float = 0.0) -> list[str]:
        """Stop loops, kill processes (after ``grace_s`` to drain); the names killed.
        Safe after any phase."""
        ...

    def fail(self, exc: BaseException) -> str:
        """Record the run as failed because of ``exc``; the one-line reason."""
        ...

    def release(self) -> None:
        """Leave the run in this process; its processes keep running."""
        ...

    def run_all(self) -> Any:
        """Every phase not done yet, in order, then :meth:`stop`; a failure is recorded
        and raised again."""
        ...


def new_run(
    s: ExperimentSettings | AutoscaleSettings, run_id: str | None = None, detached: bool = False
) -> PhasedRun:
    """A new run of ``s``: a grouping :class:`Run` or an :class:`AutoscaleRun`."""
    if isinstance(s, AutoscaleSettings):
        return AutoscaleRun.new(s, run_id, detached=detached)
    return Run.new(s, run_id, detached=detached)


def open_run(run_dir: str | Path, progress: ProgressFn | None = None) -> PhasedRun:
    """The run saved in ``run_dir``, as the class its handle's ``kind`` names."""
    if RunHandle.load(run_dir).kind == "autoscale":
        return AutoscaleRun.resume(run_dir)
    return Run.resume(run_dir, progress)


Say = Callable[[str], None]
"""Told one line of what a run is doing (:meth:`~skewlab.live.report.watch.ProgressLine.say`)."""


def _silent(_line: str) -> None:
    """The :data:`Say` of a run nobody watches."""


class Run(EndsOnExit):
    """One live run in this process: its context (handle, processes, loop, client).

    Each method is one phase of :mod:`skewlab.live.driver.phases`, in this order:
    :meth:`services`, :meth:`topics`, :meth:`start`, :meth:`produce`,
    :meth:`drain`, :meth:`aggregate`, :meth:`summarize`; a phase whose
    predecessor is not done raises a one-line
    :class:`~skewlab.live.driver.handle.HandleError` (the handle records the phases
    done as :class:`~skewlab.live.driver.handle.Phase` values). :meth:`stop` is safe
    after any phase and runs when a ``with`` block leaves.
    """

    def __init__(self, ctx: RunContext, say: Say | None = None) -> None:
        self.ctx = ctx
        self.say: Say = say or _silent
        """Told, in a line, what each phase of :meth:`run_all` is about to do and what it did."""

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
        return cls(resume_context(run_dir, progress))

    @property
    def run_id(self) -> str:
        """The run's id (its run dir's name, from the handle)."""
        return self.ctx.handle.run_id

    @property
    def files(self) -> RunDir:
        """The names of the run's files and ids."""
        return self.ctx.files

    @property
    def phase(self) -> Phase | None:
        """The last phase done (``None``: none yet)."""
        done = self.ctx.handle.phases
        return Phase(done[-1]) if done else None

    @property
    def handle(self) -> RunHandle:
        """The run's handle (saved in its run dir)."""
        return self.ctx.handle

    @property
    def exact(self) -> bool | None:
        """The verdict once aggregated: merged ``results`` equal the plain count of the
        input (``None`` before :meth:`aggregate`)."""
        saved = self.ctx.handle.exactness
        if saved is None:
            return None
        return ExactnessReport.from_dict(saved).exact

    def services(self) -> str:
        """The bootstrap servers (the embedded broker started if needed)."""
        return phases.ensure_services(self.ctx)

    def topics(self) -> None:
        """``events-<run>`` (P partitions) and ``routed-<run>`` (W + spares) created;
        needs :meth:`services`."""
        phases.create_topics(self.ctx)

    def start(self) -> None:
        """The route job and the workers, running; needs :meth:`topics`."""
        phases.start_jobs(self.ctx)

    def produce(self) -> ProduceReport:
        """The workload produced while the control loop runs; needs :meth:`start`."""
        return phases.produce(self.ctx)

    def produce_task(self) -> None:
        """:meth:`produce`, then :meth:`drain` here if this process owns the state manager."""
        phases.produce_and_drain(self.ctx)

    def drain(self) -> None:
        """The route job and workers drained and exited; needs :meth:`produce`."""
        phases.drain(self.ctx)

    def aggregate(self) -> ExactnessReport:
        """``partials`` merged and checked against the input; needs :meth:`drain`."""
        return phases.aggregate(self.ctx)

    def summarize(self) -> RunSummary:
        """The summary, plots and MLflow run; needs :meth:`aggregate`."""
        return phases.summarize(self.ctx)

    def stop(self, grace_s: float = 0.0) -> list[str]:
        """Loops stopped, processes killed, topics deleted (unless kept); the names killed.
        With ``grace_s`` > 0 the children first get that long to drain and exit."""
        return ending.stop(self.ctx, grace_s)

    def fail(self, exc: BaseException) -> str:
        """Record the run as failed because of ``exc`` (handle status and error); the
        one-line reason."""
        return ending.fail(self.ctx, exc)

    def release(self) -> None:
        """Leave the run in this process (loop signalled, client closed; processes stay)."""
        ending.release(self.ctx)

    def run_all(self) -> RunSummary:
        """Every phase not done yet, in order, then :meth:`stop` whatever happened; a
        failure or an interrupt (:class:`~skewlab.live.driver.lifecycle.Interrupted`) is
        recorded in the handle (``status`` failed, ``error``) and raised again."""
        with self:
            h = self.ctx.handle
            if h.status != Status.DONE.value:  # a resumed run runs again
                h.status, h.error = Status.RUNNING.value, None
                h.save()
            s, say = self.ctx.settings, self.say
            if not h.done(Phase.SERVICES):  # 1.
                say("connecting to the broker (the embedded Apache Kafka starts if needed)")
                bootstrap = self.services()
                took = h.startup.get("services")
                say(f"broker {bootstrap}" + (f", started in {took:.1f} s" if took else ""))
            if not h.done(Phase.TOPICS):
                self.topics()
                say(f"topics {h.events_topic} ({s.partitions} partitions), "
                    f"{h.routed_topic} ({h.n_routed})")  # fmt: skip
            preload(preload_modules(s.quality, s.mlflow))  # imported while Spark starts
            if not h.done(Phase.STARTED):  # 2.
                say(f"starting the route job (Spark session, warm-up batch) and {s.workers} "
                    "workers")  # fmt: skip
                self.start()
                say(startup_line(h.startup, h.spark_ui) or "route job and workers ready")
            say(f"producing {s.n_events:,} events at {s.rate:,.0f}/s")  # 3.
            self.produce()
            say("draining: the route job, then the workers, finish what is queued")  # 4.
            self.drain()
            if not h.done(Phase.AGGREGATED):  # 5.
                say("merging the workers' partials and counting the input for the verdict")
                verdict = self.aggregate()
                say(f"verdict: {'EXACT' if verdict.exact else 'NOT EXACT'}")
            say("summary: quality suites, plots and the MLflow run")
            return self.summarize()


def run_experiment(
    s: ExperimentSettings,
    progress: ProgressFn | None = None,
    hook: Hook | None = None,
    run_id: str | None = None,
    say: Say | None = None,
) -> RunSummary:
    """Run one live experiment (steps 1-6 of the module doc) and return its summary;
    ``say`` is told each phase in a line as it starts (the CLI prints them).

    The phases of :mod:`skewlab.live.driver.phases` in order, in this process (the
    route job and workers are its children); whatever happens,
    :func:`~skewlab.live.driver.ending.stop` runs last: loops stopped, processes killed,
    topics deleted unless ``keep_topics``.
    """
    return Run.new(s, run_id, progress=progress, hook=hook, say=say).run_all()
