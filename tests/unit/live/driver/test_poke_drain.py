"""The drain sensor's poke (``Run.poke_drain``) on a grouping run whose children are stand-ins.

The run's context is a small fake (handle, procs with a settable exit code, the
run dir's markers in a tmp dir, a watcher that reports counters); the drain
phase is recorded instead of run. A poke must not wait for a child that is
still draining (it returns False after its look), must ask the children to stop
in the drain's order (route job first, workers once it exited cleanly), must
hand over to the drain phase once every child exited or one failed, and must
log a progress line only when it changed.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from skewlab.live.driver.handle import HandleError, Phase
from skewlab.live.driver.run import Run
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit


@dataclass
class FakeProc:
    rc: int | None = None

    def poll(self) -> int | None:
        return self.rc


@dataclass
class FakeHandle:
    phases: set[str] = field(default_factory=lambda: {Phase.PRODUCED})
    running: list[int] | None = None
    produced: dict[str, Any] = field(default_factory=lambda: {"events": 10_000})

    def done(self, phase: Phase) -> bool:
        return phase in self.phases

    def require(self, phase: Phase, what: str) -> None:
        if phase not in self.phases:
            raise HandleError(f"phase {phase.value!r} not done: cannot {what} the run")


@dataclass
class FakeSettings:
    workers: int = 2
    scale_out: str | None = None


@dataclass
class FakeProcs:
    route: FakeProc = field(default_factory=FakeProc)
    workers: dict[int, FakeProc] = field(default_factory=lambda: {0: FakeProc(), 1: FakeProc()})


class FakeWatcher:
    """Calls ``progress`` (the context's, until the poke installs its own) with the counters."""

    def __init__(self, ctx: FakeCtx) -> None:
        self.ctx = ctx
        self.progress = ctx.progress

    def tick(self, sent: int | None, total: int | None) -> None:
        if self.progress is not None:
            self.progress(dict(self.ctx.counters))


@dataclass
class FakeCtx:
    files: RunDir
    progress: Any = None
    detached: bool = True
    handle: FakeHandle = field(default_factory=FakeHandle)
    settings: FakeSettings = field(default_factory=FakeSettings)
    procs: FakeProcs = field(default_factory=FakeProcs)
    counters: dict[str, float] = field(default_factory=lambda: {"routed": 0.0, "processed": 0.0})
    watch: FakeWatcher | None = None

    def watcher(self) -> FakeWatcher:
        if self.watch is None:
            self.watch = FakeWatcher(self)
        return self.watch


class DrainRecorded(Run):
    """The grouping run over the fake context, its drain only marking the phase done."""

    def drain(self) -> None:
        self.ctx.handle.phases.add(Phase.DRAINED)


@pytest.fixture
def ctx(tmp_path: Path) -> FakeCtx:
    run_dir = RunDir.of(tmp_path / "run")
    run_dir.path.mkdir()
    return FakeCtx(run_dir)


def _poke(ctx: FakeCtx, logger: logging.Logger | None = None) -> bool:
    """One poke (a task's run, as the DAG resumes it) with no waiting: its look happens
    once (the clock is already past)."""
    ticks = iter([0.0, 1e9, 1e9, 1e9])
    run = DrainRecorded(cast(Any, ctx))
    return run.poke_drain(0.0, logger, clock=lambda: next(ticks), sleep=lambda s: None)


def test_waits_for_the_route_job_before_stopping_the_workers(ctx: FakeCtx) -> None:
    assert _poke(ctx) is False
    assert ctx.files.route_stop.exists() and not ctx.files.workers_stop.exists()
    ctx.procs.route.rc = 0
    assert _poke(ctx) is False  # the workers still drain
    assert ctx.files.workers_stop.exists()
    assert not ctx.handle.done(Phase.DRAINED)
    for w in ctx.procs.workers.values():
        w.rc = 0
    assert _poke(ctx) is True and ctx.handle.done(Phase.DRAINED)


def test_a_failed_child_goes_to_the_drain_phase_at_once(ctx: FakeCtx) -> None:
    ctx.procs.route.rc = 0
    ctx.procs.workers[1].rc = -9  # the drain phase restarts it or fails with its cause
    assert _poke(ctx) is True and ctx.handle.done(Phase.DRAINED)


def test_only_running_instances_are_waited_for(ctx: FakeCtx) -> None:
    ctx.handle.running = [0]
    ctx.procs.route.rc = 0
    ctx.procs.workers[0].rc = 0  # worker 1 is not running any more: nothing to wait for
    assert _poke(ctx) is True


def test_a_scale_out_run_or_a_drained_run_is_done(ctx: FakeCtx) -> None:
    ctx.settings.scale_out = "checkpoint"
    assert _poke(ctx) is True and not ctx.files.route_stop.exists()
    ctx.settings.scale_out = None
    ctx.handle.phases.add(Phase.DRAINED)
    assert _poke(ctx) is True and not ctx.files.route_stop.exists()
    # an autoscale run's look is AutoscaleRun._poked (tests/integration/autoscale)


def test_a_run_not_produced_yet_is_refused_before_any_look(ctx: FakeCtx) -> None:
    ctx.handle.phases.clear()
    with pytest.raises(HandleError):
        _poke(ctx)
    assert not ctx.files.route_stop.exists()


def test_progress_is_logged_only_when_it_changes(
    ctx: FakeCtx, caplog: pytest.LogCaptureFixture
) -> None:
    logger = logging.getLogger("skewlab.test.drain")
    caplog.set_level(logging.INFO, logger=logger.name)
    ctx.counters.update(routed=9_000.0, processed=8_000.0)
    for _ in range(3):
        assert _poke(ctx, logger) is False
    ctx.counters.update(routed=10_000.0)
    assert _poke(ctx, logger) is False
    ctx.procs.route.rc = 0
    assert _poke(ctx, logger) is False
    assert _poke(ctx, logger) is False
    lines = [r.getMessage() for r in caplog.records if r.name == logger.name]
    assert len(lines) == 3, lines  # 6 pokes, 3 changes
    assert "9,000 of 10,000" in lines[0] and "10,000 of 10,000" in lines[1]
    assert "route job" in lines[1] and "workers 0, 1" in lines[2]
