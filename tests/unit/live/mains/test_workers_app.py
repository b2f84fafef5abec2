"""The workers app: when it stops serving (:func:`skewlab.live.mains.workers_app.ended`: once
the run is stopped or done, never while a failed run may still be resumed), and what a task
attempt leaves to the next (no ready marker: :func:`~skewlab.live.mains.workers_app.
run_instance`)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import Any

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
