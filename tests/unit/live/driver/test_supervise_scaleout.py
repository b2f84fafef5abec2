"""Supervisor on a scale-out run: the state manager's instances are restarted when they
crash, never when the manager stopped or restarted them itself (issue 18)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Procs
from skewlab.live.driver.supervise import RestartPolicy, Supervisor
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit


class FakeProc:
    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            self.returncode = -9


class Manager:
    """The part of a state manager the supervisor sees: the instances it runs."""

    def __init__(self, procs: Procs) -> None:
        self.procs = procs
        self.running = {0, 1}

    def start(self, j: int) -> None:
        self.procs.restart_worker(j)
        self.running.add(j)

    def stop(self, j: int) -> None:  # kill first, forget after (as the manager does)
        self.procs.workers[j].kill()
        self.running.discard(j)


def _setup(tmp_path: Path) -> tuple[Procs, RunHandle, Manager, list[str], Supervisor, list[float]]:
    files = RunDir.create(tmp_path, "key-so")
    handle = RunHandle("key-so", str(tmp_path), str(files), str(tmp_path / "delta"), {})
    started: list[str] = []
    procs = Procs(route=FakeProc(), workers={0: FakeProc(), 1: FakeProc()})

    def restart_worker(i: int) -> None:
        started.append(f"worker-{i}")
        procs.workers[i] = FakeProc()

    procs.restart_worker = restart_worker
    mgr = Manager(procs)
    now = [100.0]
    sup = Supervisor(
        procs, handle, files, lambda: sorted(mgr.running), RestartPolicy(3, 0.5, 2.0, 5.0),
        lambda: now[0],
    )  # fmt: skip
    return procs, handle, mgr, started, sup, now


def test_a_crashed_new_instance_is_restarted(tmp_path: Path) -> None:
    procs, handle, mgr, started, sup, now = _setup(tmp_path)
    mgr.start(3)  # a spare instance the manager started
    assert started == ["worker-3"]
    procs.workers[3].returncode = 86  # crashed
    sup.check()
    now[0] += 0.5
    sup.check()
    assert started == ["worker-3", "worker-3"] and handle.restarts == {"worker-3": 1}


def test_an_instance_stopped_by_the_manager_is_not_restarted(tmp_path: Path) -> None:
    _procs, handle, mgr, started, sup, now = _setup(tmp_path)
    mgr.stop(1)
    sup.check()
    now[0] += 10
    sup.check()
    assert started == [] and sup.pending == {} and handle.restarts == {}


def test_an_exit_seen_before_the_manager_forgot_the_instance_is_dropped(tmp_path: Path) -> None:
    procs, handle, mgr, started, sup, now = _setup(tmp_path)
    procs.workers[1].kill()  # the manager's stop: killed, not yet discarded
    sup.check()
    assert "worker-1" in sup.pending
    mgr.running.discard(1)  # ... and now forgotten
    now[0] += 10
    sup.check()
    assert started == [] and sup.pending == {} and handle.restarts == {}


def test_an_instance_the_manager_restarted_itself_is_not_restarted_again(tmp_path: Path) -> None:
    procs, handle, mgr, started, sup, now = _setup(tmp_path)
    procs.workers[0].kill()  # restart policy: stop the operator ...
    sup.check()  # (exit seen in between)
    mgr.running.discard(0)
    mgr.start(0)  # ... and start it again as a new instance
    fresh = procs.workers[0]
    now[0] += 10
    sup.check()
    assert started == ["worker-0"] and procs.workers[0] is fresh and handle.restarts == {}


class SlowLoop:
    """A control loop that ends only once ``release`` is set (a manager settling)."""

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.stopped = False

    def stop(self) -> None:
        self.release.wait(30)
        self.stopped = True


def test_children_are_guarded_while_the_loop_settles() -> None:
    from skewlab.live.driver.supervise import stop_guarded

    loop = SlowLoop()
    looks: list[int] = []

    def guard() -> None:
        looks.append(1)
        if len(looks) == 3:  # the loop ends after the third look at the children
            loop.release.set()

    stop_guarded(loop, guard, tick_s=0.01)
    assert loop.stopped and len(looks) >= 3


def test_a_guard_failure_while_the_loop_settles_is_raised() -> None:
    from skewlab.live.driver.supervise import ChildFailed, stop_guarded

    loop = SlowLoop()

    def guard() -> None:
        raise ChildFailed("worker 3 failed after 3 restart(s)")

    with pytest.raises(ChildFailed):
        stop_guarded(loop, guard, tick_s=0.01)
    loop.release.set()


class EngineProc(FakeProc):
    """A worker run by an engine that retries it itself (a Spark task): its exit means the
    engine gave up, or the job was cancelled on purpose."""

    retried_by_engine = True


def test_an_engine_run_instance_the_manager_restarts_does_not_fail_the_run(tmp_path: Path) -> None:
    procs, handle, mgr, started, sup, now = _setup(tmp_path)
    procs.workers[0] = EngineProc()
    procs.workers[0].kill()  # restart policy: the manager cancels the operator's job ...
    sup.check()  # (its end seen before the manager forgot it: the failure waits)
    assert "worker-0" in sup.pending and started == []
    mgr.running.discard(0)
    mgr.start(0)  # ... and starts it again as a new job
    now[0] += 10
    sup.check()
    assert started == ["worker-0"] and sup.pending == {} and handle.restarts == {}


def test_an_engine_run_instance_the_manager_forgot_does_not_fail_the_run(tmp_path: Path) -> None:
    procs, handle, mgr, started, sup, now = _setup(tmp_path)
    procs.workers[1] = EngineProc()
    procs.workers[1].kill()  # the manager's stop: cancelled, not yet discarded
    sup.check()
    mgr.running.discard(1)
    now[0] += 10
    sup.check()
    assert started == [] and sup.pending == {} and handle.restarts == {}


def test_an_engine_run_instance_that_exits_unasked_fails_the_run_one_backoff_later(
    tmp_path: Path,
) -> None:
    from skewlab.live.driver.supervise import ChildFailed

    procs, handle, _mgr, started, sup, now = _setup(tmp_path)
    procs.workers[1] = EngineProc()
    procs.workers[1].returncode = 86  # the engine's retries are used
    sup.check()
    now[0] += 0.4
    sup.check()  # not yet: a manager's stop would have shown by the next backoff
    now[0] += 0.1
    with pytest.raises(ChildFailed, match=r"worker 1 failed after 0 restart\(s\): exit 86"):
        sup.check()
    assert started == [] and handle.restarts == {}
