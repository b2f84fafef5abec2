"""When a run's workers app stops serving (:func:`skewlab.live.mains.workers_app.ended`): once
the run is stopped or done, never while a failed run may still be resumed."""

from __future__ import annotations

import shutil
from pathlib import Path

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
