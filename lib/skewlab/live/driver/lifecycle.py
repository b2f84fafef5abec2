"""Ending a live run from outside its driver: ``skewlab stop`` and ``skewlab gc``.

A run's handle records the pid and create time of its driver and of every
process it started (:class:`~skewlab.live.driver.handle.ProcRecord`); a pid whose
create time differs is another process that reused the number and is never
signalled. :func:`stop_run` asks a live driver to stop (SIGTERM: it stops
producing, stops its children and records the run as failed), then kills what
is left of the run's process groups and records the run as stopped.
:func:`gc` does that for every run under a data dir whose driver is gone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from skewlab.errors import SkewlabError
from skewlab.live.driver.handle import TERMINAL, HandleError, RunHandle, Status
from skewlab.live.driver.route_host import attach_any
from skewlab.live.report.tracking import fail_run
from skewlab.rundir import RunDir

__all__ = [
    "INTERRUPT_GRACE_S",
    "EndsOnExit",
    "Interrupted",
    "Stopped",
    "driver_alive",
    "failure_reason",
    "gc",
    "signals_as_interrupts",
    "signals_deferred",
    "stop_run",
    "this_process",
]

_R = TypeVar("_R", bound="EndsOnExit")

log = logging.getLogger(__name__)

INTERRUPT_GRACE_S = 5.0
"""How long an interrupted run's children get to drain what they have before the kill."""

DRIVER_GRACE_S = 30.0
"""How long a driver asked to stop may take to stop its children itself."""


class Interrupted(KeyboardInterrupt):
    """The driver got SIGTERM or SIGINT: handled like Ctrl-C (``signum`` says which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While inside: the first SIGTERM or SIGINT raises :class:`Interrupted` in the main
    thread; later ones are logged and ignored, so the clean-up the first one started
    (stop producing, stop the children, record the run as failed) runs to its end.
    Outside the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    seen: list[int] = []

    def handler(signum: int, frame: object) -> None:
        if seen:
            log.warning("%s ignored: stopping the run already", signal.Signals(signum).name)
            return
        seen.append(signum)
        raise Interrupted(signum)

    old = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)


def failure_reason(exc: BaseException) -> str:
    """One line: why ``exc`` ended a run."""
    if isinstance(exc, KeyboardInterrupt):
        signum = getattr(exc, "signum", signal.SIGINT)
        return f"interrupted by {signal.Signals(signum).name}"
    if isinstance(exc, SkewlabError):
        return " ".join(str(exc).split())
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """While inside, SIGTERM and SIGINT wait (blocked) until the block ends, so a clean-up
    runs to its end; a signal that came meanwhile is delivered when it leaves. Outside
    the main thread this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = {signal.SIGTERM, signal.SIGINT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class EndsOnExit:
    """A run as a context manager: leaving the block records a failure (``fail``) and then
    stops the run's processes (``stop``, with :data:`INTERRUPT_GRACE_S` to drain after an
    interrupt), with SIGTERM / SIGINT deferred so a second Ctrl-C cannot cut it short."""

    def fail(self, exc: BaseException) -> str:
        """Record the run as failed because of ``exc``; the one-line reason."""
        raise NotImplementedError

    def stop(self, grace_s: float = 0.0) -> list[str]:
        """Stop the run's processes (``grace_s`` to drain first); what was killed."""
        raise NotImplementedError

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with signals_deferred():
            if exc is not None:
                self.fail(exc)
            self.stop(INTERRUPT_GRACE_S if isinstance(exc, KeyboardInterrupt) else 0.0)


@dataclass(frozen=True)
class Stopped:
    """What :func:`stop_run` did to one run."""

    run_id: str
    killed: list[str]
    """Names of the run's processes that were still running (``driver``, ``route``...)."""
    status: str
    """The run's status afterwards."""


def _same_process(pid: int, create_time: float) -> bool:
    import psutil

    try:
        p = psutil.Process(pid)
        if abs(p.create_time() - create_time) > 0.01:
            return False
        return bool(p.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def this_process() -> list[float]:
    """``[pid, create_time]`` of this process: what a handle's ``driver`` records."""
    import psutil

    return [float(os.getpid()), float(psutil.Process().create_time())]


def driver_alive(h: RunHandle) -> bool:
    """Whether the process that drives run ``h`` (this pid, this create time) runs."""
    if not h.driver:
        return False
    pid, created = int(h.driver[0]), float(h.driver[1])
    return _same_process(pid, created)


def _wait(cond: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def stop_run(
    run_dir: str | Path, reason: str = "stopped by skewlab stop", grace_s: float = DRIVER_GRACE_S
) -> Stopped:
    """Stop run ``run_dir`` from any process (see the module doc); safe to repeat."""
    h = RunHandle.load(run_dir)
    killed = []
    if driver_alive(h) and h.driver is not None and int(h.driver[0]) != os.getpid():
        pid = int(h.driver[0])
        killed.append("driver")
        os.kill(pid, signal.SIGTERM)
        if not _wait(lambda: not driver_alive(h), grace_s):
            log.warning("driver %d of %s did not stop in %.0f s: killed", pid, h.run_id, grace_s)
            if driver_alive(h):
                os.kill(pid, signal.SIGKILL)
        h = RunHandle.load(run_dir)  # the driver saved its end
    procs = [attach_any(rec) for rec in h.procs.values()]
    for p in procs:
        if p.alive():
            killed.append(p.rec.name)
        p.kill()  # its group, or what is left of it
    if not _wait(lambda: not any(p.alive() for p in procs), 30.0):
        names = [p.rec.name for p in procs if p.alive()]
        log.warning("still running after SIGKILL: %s", ", ".join(names))
    if Status(h.status) is not Status.DONE:
        h.status, h.error = Status.RUNNING.value, None
        h.finish(Status.STOPPED, reason)
        fail_run(RunDir.of(h.run_dir), reason)
    return Stopped(h.run_id, killed, h.status)


def handles(home: str | Path) -> Iterator[tuple[Path, RunHandle | HandleError]]:
    """Each run dir under data dir ``home`` that has a handle, oldest first, with its
    handle (or the :class:`HandleError` that reading it raised)."""
    runs = Path(home).resolve() / "runs"
    for d in sorted(runs.iterdir()) if runs.is_dir() else []:
        if RunDir.of(d).handle.is_file():
            try:
                yield d, RunHandle.load(d)
            except HandleError as exc:
                yield d, exc


def gc(home: str | Path) -> list[Stopped]:
    """:func:`stop_run` every run under data dir ``home`` whose driver is gone and that
    has not ended or still has processes running. Runs driven task by task (the DAG:
    ``detached``) have no driver between tasks and are left alone."""
    out = []
    for d, h in handles(home):
        if isinstance(h, HandleError):
            log.warning("skipping %s: %s", d, h)
            continue
        if h.detached or driver_alive(h):
            continue
        running = any(attach_any(rec).alive() for rec in h.procs.values())
        if running or Status(h.status) not in TERMINAL:
            out.append(stop_run(d, reason="stopped by skewlab gc: its driver is gone"))
    return out


@dataclass(frozen=True)
class RunState:
    """Where one run of a data dir stands, as ``skewlab status`` lists it."""

    run_id: str
    state: str
    """``live`` (its driver runs), ``airflow`` (driven task by task), ``orphaned`` (its
    driver is gone, processes still run), ``interrupted`` (driver and processes gone,
    not ended), ``finished``, ``failed`` or ``stopped``."""
    detail: str
    """The verdict of a finished run, the error of a failed or stopped one."""
    action: str
    """The command that deals with it (``-``: nothing to do)."""


def verdict(exactness: dict[str, Any] | None) -> str:
    """``EXACT`` / ``NOT exact`` of a handle's exactness report (``no verdict`` if none)."""
    if not exactness:
        return "no verdict"
    wrong = sum(int(exactness.get(k, 0)) for k in ("lost", "doubled", "sum_mismatches"))
    return "NOT exact" if wrong else "EXACT"


def run_state(h: RunHandle) -> RunState:
    """:class:`RunState` of the run behind handle ``h``."""
    status = Status(h.status)
    resume = f"skewlab resume {h.run_id}"
    if status is Status.DONE:
        return RunState(h.run_id, "finished", verdict(h.exactness), "-")
    if h.detached and status not in TERMINAL:
        return RunState(h.run_id, "airflow", "driven task by task by its DAG run", "-")
    if driver_alive(h):
        pid = int(h.driver[0]) if h.driver else 0
        return RunState(h.run_id, "live", f"driver pid {pid}", f"skewlab stop {h.run_id}")
    alive = [name for name, rec in h.procs.items() if attach_any(rec).alive()]
    if alive:
        what = f"driver gone, still running: {', '.join(sorted(alive))}"
        return RunState(h.run_id, "orphaned", what, f"{resume} (or skewlab gc)")
    if status is Status.RUNNING:
        return RunState(h.run_id, "interrupted", "driver and processes gone", resume)
    return RunState(h.run_id, status.value, h.error or "-", resume)


def run_states(home: str | Path) -> list[RunState]:
    """:func:`run_state` of every run under data dir ``home``, oldest first (a handle
    that cannot be read is listed as such)."""
    return [
        RunState(d.name, "unreadable", str(h), "-") if isinstance(h, HandleError) else run_state(h)
        for d, h in handles(home)
    ]
