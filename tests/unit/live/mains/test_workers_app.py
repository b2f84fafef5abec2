"""The workers app: when it stops serving (:func:`skewlab.live.mains.workers_app.ended`: once
the run is stopped or done, never while a failed run may still be resumed), and what a task
attempt leaves to the next (no ready marker: :func:`~skewlab.live.mains.workers_app.
run_instance`)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from skewlab.live.driver.handle import Phase, RunHandle, Status
from skewlab.live.mains.workers_app import ended
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit


def _handle(tmp_path: Path) -> RunHandle:
    files = RunDir.create(tmp_path, "key-app")
    h = RunHandle("key-app", str(tmp_path), str(files.path), str(tmp_path / "delta"), {})
    h.save()
    return h


def test_a_running_run_is_served(tmp_path: Path) -> None:
    h = _handle(tmp_path)
    assert ended(Path(h.run_dir)) is None


def test_a_failed_run_is_served_until_it_is_stopped(tmp_path: Path) -> None:
    h = _handle(tmp_path)
    h.finish(Status.FAILED, "worker 0 failed after 0 restart(s)")  # a driver dying mid-stop
    assert ended(Path(h.run_dir)) is None  # the next driver resumes it with its workers
    h.status, h.error = Status.RUNNING.value, None  # ... as the next driver does
    h.save()
    assert ended(Path(h.run_dir)) is None
    h.finish(Status.FAILED, "gave up")
    h.mark(Phase.STOPPED)  # the failing driver's stop ran to its end
    assert ended(Path(h.run_dir)) == "the run is stopped"


@pytest.mark.parametrize("status", [Status.DONE, Status.STOPPED])
def test_a_done_or_stopped_run_ends_the_app(tmp_path: Path, status: Status) -> None:
    h = _handle(tmp_path)
    h.finish(status)
    assert ended(Path(h.run_dir)) == f"the run is {status.value}"


def test_an_unreadable_handle_is_no_end_but_a_removed_run_dir_is(tmp_path: Path) -> None:
    h = _handle(tmp_path)
    h.path.write_text("{not json")
    assert ended(Path(h.run_dir)) is None
    h.path.unlink()
    assert ended(Path(h.run_dir)) is None
    shutil.rmtree(h.run_dir)
    assert ended(Path(h.run_dir)) == "its run dir is gone"


READY_THEN_CRASH = """
import sys
from pathlib import Path
marker = Path(sys.argv[1])
if marker.exists():
    sys.exit(9)  # started with its crashed attempt's marker: could be taken for ready
marker.write_text("1.0")  # restored and ready ...
sys.exit(int(sys.argv[2]))  # ... then crashes (3) or finishes (0)
"""


def test_a_task_attempt_never_inherits_a_crashed_attempts_ready_marker(tmp_path: Path) -> None:
    from skewlab.live.driver.spark_launcher import EngineDir
    from skewlab.live.mains.workers_app import run_instance

    d = EngineDir.of_run(tmp_path)
    marker = RunDir.of(tmp_path).worker_ready(0)
    log = tmp_path / "worker-0.log"

    def request(code: int) -> Any:
        cmd = [sys.executable, "-c", READY_THEN_CRASH, str(marker), str(code)]
        return d.write_request("worker-0", cmd, log, [marker])

    marker.write_text("0.5")  # left by an attempt that died with its task (no clean-up)
    with pytest.raises(RuntimeError, match="worker-0 exited with 3"):
        run_instance(str(d.path), request(3))  # started clean (else 9), crashed once ready
    assert not marker.exists()  # removed at once: the retry may take a while to start
    run_instance(str(d.path), request(0))
    assert marker.exists()


def test_a_workers_request_names_its_ready_marker_and_a_consumers_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skewlab.live.driver.handle import ProcRecord
    from skewlab.live.driver.spark_launcher import EngineDir, SparkLauncher

    app = ProcRecord("workers-app", os.getpid(), 0.0, ["app"], "app.log")
    monkeypatch.setattr(SparkLauncher, "app", lambda self: app)  # no Spark start here
    launcher = SparkLauncher(tmp_path)
    launcher.start("worker-3", ["true"], tmp_path / "worker-3.log")
    launcher.start("consumer-3", ["true"], tmp_path / "consumer-3.log")
    consumer, worker = EngineDir.of_run(tmp_path).requests()  # by file name
    assert worker.fresh == [str(RunDir.of(tmp_path).worker_ready(3))] and consumer.fresh == []


class Ticks:
    """A clock that moves ``step`` seconds at each reading (one per look)."""

    def __init__(self, step: float = 1.0) -> None:
        self.t, self.step = 100.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def _watch(tmp_path: Path, seen: dict[str, Any], clock: Any = None) -> Any:
    from skewlab.live.mains.workers_app import HangWatch

    files = RunDir.create(tmp_path, "key-hang")
    return HangWatch(
        "worker-0", files, 0, lambda: seen.get("at"), 8.0, clock=clock or Ticks(), every_s=0.005
    )


def test_a_tasks_hang_watch_judges_by_the_supervisors_rule_on_its_own_clock(
    tmp_path: Path,
) -> None:
    """Looks until the command ends; hung once ready with no progress for stall_s while
    records wait (the count starts at the first look that sees it ready and stuck)."""
    seen: dict[str, Any] = {"at": (10, 90)}
    w = _watch(tmp_path, seen)
    looks = iter(range(50))
    assert w.run(lambda _: next(looks) >= 20) is None  # never ready: 20 looks, no judgment
    w.files.worker_ready(0).touch()
    assert w.run(lambda _: False) == (8.0, 80)  # 8 looks of 1 s after its first ready look

    def advancing(_: float) -> bool:  # 1 record per look, always far behind: never hung
        committed, end = seen["at"]
        seen["at"] = (committed + 1, end + 5)
        return committed > 300

    assert w.run(advancing) is None
    seen["at"] = (400, 400)  # caught up: nothing waits, never hung
    looks = iter(range(50))
    assert w.run(lambda _: next(looks) >= 40) is None
    seen["at"] = None  # an unknown progress starts nothing either
    looks = iter(range(50))
    assert w.run(lambda _: next(looks) >= 40) is None


HANGS = """
import sys, time
from pathlib import Path
Path(sys.argv[1]).write_text("1.0")  # ready ...
time.sleep(600)  # ... then no progress at all, as a SIGSTOPped worker
"""


def test_a_hung_worker_is_killed_its_hang_recorded_and_its_attempt_failed(
    tmp_path: Path,
) -> None:
    from skewlab.live.driver.spark_launcher import EngineDir
    from skewlab.live.driver.supervise import hangs
    from skewlab.live.mains.workers_app import run_instance

    seen: dict[str, Any] = {"at": (10, 90)}
    watch = _watch(tmp_path, seen)
    d = EngineDir.of_run(watch.files.path)
    marker = watch.files.worker_ready(0)
    log = watch.files.path / "worker-0.log"
    req = d.write_request("worker-0", [sys.executable, "-c", HANGS, str(marker)], log, [marker])
    with pytest.raises(RuntimeError, match="worker-0 hung 8 s with 80 records waiting"):
        run_instance(str(d.path), req, lambda r: watch)
    # the same line the driver's supervisor writes (the summary lists it), killed by SIGKILL,
    # and the ready marker gone: Spark's retry is the restart, on its own marker
    assert hangs(watch.files) == ["worker-0 hung 8 s with 80 records waiting: killed and restarted"]
    (start, end) = d.read_attempts(req.id)
    assert end == {**{k: start[k] for k in ("attempt", "task", "pid", "create_time")}, "rc": -9}
    assert not psutil.pid_exists(start["pid"]) or psutil.Process(start["pid"]).status() == "zombie"
    assert not marker.exists()


def test_a_watched_worker_that_finishes_is_not_judged(tmp_path: Path) -> None:
    from skewlab.live.driver.spark_launcher import EngineDir
    from skewlab.live.driver.supervise import hangs
    from skewlab.live.mains.workers_app import run_instance

    watch = _watch(tmp_path, {"at": (10, 90)}, clock=lambda: 100.0)  # stuck, but time stands
    d = EngineDir.of_run(watch.files.path)
    marker = watch.files.worker_ready(0)
    cmd = [sys.executable, "-c", READY_THEN_CRASH, str(marker), "0"]
    req = d.write_request("worker-0", cmd, watch.files.path / "worker-0.log", [marker])
    run_instance(str(d.path), req, lambda r: watch)
    assert [a["rc"] for a in d.read_attempts(req.id) if "rc" in a] == [0]
    assert hangs(watch.files) == []


def test_a_workers_request_asks_its_task_to_watch_it_with_the_runs_stall_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from skewlab.live.driver.handle import ProcRecord
    from skewlab.live.driver.spark_launcher import SparkLauncher, SparkProc
    from skewlab.live.driver.supervise import STALL_S

    h = _handle(tmp_path)
    run_dir = Path(h.run_dir)
    app = ProcRecord("workers-app", os.getpid(), 0.0, ["app"], "app.log")
    monkeypatch.setattr(SparkLauncher, "app", lambda self: app)  # no Spark start here
    launcher = SparkLauncher(run_dir)
    worker, _ = launcher.start("worker-3", ["true"], run_dir / "worker-3.log")
    h.settings["stall_s"] = 8.0
    h.save()
    again, _ = launcher.start("worker-3", ["true"], run_dir / "worker-3.log")
    consumer, _ = launcher.start("consumer-3", ["true"], run_dir / "consumer-3.log")
    watches = [json.loads(Path(str(p.rec.request)).read_text())["watch"]  # type: ignore[attr-defined]
               for p in (worker, again, consumer)]  # fmt: skip
    assert watches == [
        {"run_dir": str(run_dir), "worker": 3, "stall_s": STALL_S},
        {"run_dir": str(run_dir), "worker": 3, "stall_s": 8.0},
        None,
    ]
    assert [isinstance(p, SparkProc) and p.watches_hangs for p in (worker, again, consumer)] == [
        True,
        True,
        False,
    ]


def test_a_watch_reads_its_workers_newest_committed_offset_from_new_files_only(
    tmp_path: Path,
) -> None:
    """The hang watch's committed offset: the newest ``routed_offset`` of its own worker
    (not another worker's, not another run's), 0 before any commit, kept when a look
    finds no new file; each look reads only the files written since the last."""
    from skewlab.io.delta.store import DeltaStore
    from skewlab.live.mains.workers_app import CommittedOffset

    store = DeltaStore(str(tmp_path / "delta"))

    def commit(run: str, worker: int, offset: int) -> None:
        row = {"worker": worker, "routed_offset": offset, "watermarks": "{}"}
        store.append(
            "worker_progress", [row], app_id=f"work-{worker}:{run}", version=offset, run_id=run
        )

    look = CommittedOffset(DeltaStore(str(tmp_path / "delta")), "r1", 1)
    assert look() == 0  # no table yet
    commit("r1", 1, 100)
    commit("r1", 0, 900)
    commit("r2", 1, 5_000)
    assert look() == 100
    read = len(look.seen)
    assert look() == 100 and len(look.seen) == read  # nothing new: nothing read again
    commit("r1", 1, 250)
    commit("r1", 0, 1_000)
    assert look() == 250
    assert len(look.seen) == read + 2


@pytest.mark.parametrize(("stall_s", "every_s"), [(15.0, 3.0), (8.0, 1.6), (2.0, 1.0), (0.5, 1.0)])
def test_a_watch_looks_five_times_per_stall_time_but_not_more_than_once_a_second(
    stall_s: float, every_s: float
) -> None:
    """Each look costs ~40 ms of CPU: the default 15 s hang time is judged every 3 s, not
    every second, and a short one no more often than once a second."""
    from skewlab.live.mains.workers_app import watch_every_s

    assert watch_every_s(stall_s) == pytest.approx(every_s)
