"""stop / gc on real processes: a run's children found from its handle, killed as groups;
a live driver asked first; recycled pids left alone; the handle says stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from skewlab.live.driver.handle import ProcRecord, RunHandle, Status
from skewlab.live.driver.launch import spawn
from skewlab.live.driver.lifecycle import driver_alive, failure_reason, gc, stop_run
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit

SLEEP = [sys.executable, "-c", "import time; time.sleep(120)"]
# a child that starts a grandchild in its group (like the route job and its JVM)
TREE = [sys.executable, "-c",
        "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        "'import time; time.sleep(120)']); time.sleep(120)"]  # fmt: skip


def _record(name: str, p: subprocess.Popen[bytes], log: Path) -> ProcRecord:
    return ProcRecord(name, p.pid, psutil.Process(p.pid).create_time(), [], str(log))


def _run_with_children(home: Path, run_id: str, driver: subprocess.Popen[bytes]) -> tuple[
    RunDir, list[subprocess.Popen[bytes]]
]:  # fmt: skip
    files = RunDir.create(home, run_id)
    kids = [spawn(TREE, files.log("route")), spawn(SLEEP, files.log("worker-0"))]
    h = RunHandle(run_id, str(home), str(files), str(home / "delta"), {})
    h.driver = [float(driver.pid), psutil.Process(driver.pid).create_time()]
    h.procs = {"route": _record("route", kids[0], files.log("route")),
               "worker-0": _record("worker-0", kids[1], files.log("worker-0"))}  # fmt: skip
    h.save()
    deadline = time.monotonic() + 30
    while not psutil.Process(kids[0].pid).children():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return files, kids


def _group_alive(pgid: int) -> bool:
    import os

    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.info["pid"]) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


def test_gc_stops_the_children_of_a_run_whose_driver_was_killed(tmp_path: Path) -> None:
    driver = subprocess.Popen(SLEEP)
    files, kids = _run_with_children(tmp_path, "key-orphan", driver)
    live_driver = subprocess.Popen(SLEEP)  # a second run whose driver runs: left alone
    files2, kids2 = _run_with_children(tmp_path, "key-alive", live_driver)
    try:
        driver.kill()
        driver.wait()
        assert not driver_alive(RunHandle.load(files.path))
        assert driver_alive(RunHandle.load(files2.path))
        done = gc(tmp_path)
        assert [d.run_id for d in done] == ["key-orphan"]
        assert sorted(done[0].killed) == ["route", "worker-0"]
        for k in kids:
            assert k.wait(timeout=30) == -signal.SIGKILL
        deadline = time.monotonic() + 30
        while _group_alive(kids[0].pid):  # the grandchild (the "JVM") too
            assert time.monotonic() < deadline, "a member of the route job's group survived"
            time.sleep(0.1)
        h = RunHandle.load(files.path)
        assert h.status == Status.STOPPED.value and "gc" in (h.error or "")
        assert all(k.poll() is None for k in kids2)
        assert gc(tmp_path) == []  # nothing left to do
    finally:
        for p in [live_driver, *kids2, *kids]:
            p.kill()
            p.wait()


def test_stop_asks_a_live_driver_first_then_kills_what_is_left(tmp_path: Path) -> None:
    # The driver records its end on SIGTERM, as skewlab run does, and exits.
    files = RunDir.create(tmp_path, "key-live")
    script = (
        "import signal, sys, time\n"
        "from skewlab.live.driver.handle import RunHandle, Status\n"
        "def on_term(n, f):\n"
        f"    h = RunHandle.load({str(files.path)!r}); h.finish(Status.FAILED, 'interrupted by SIGTERM')\n"  # noqa: E501
        "    sys.exit(143)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert driver.stdout is not None and driver.stdout.readline().strip() == b"ready"
    files, kids = _run_with_children(tmp_path, "key-live", driver)
    try:
        done = stop_run(files.path, grace_s=20)
        assert driver.wait(timeout=30) == 143
        assert done.killed[0] == "driver" and set(done.killed[1:]) == {"route", "worker-0"}
        assert all(k.wait(timeout=30) == -signal.SIGKILL for k in kids)
        h = RunHandle.load(files.path)
        assert h.status == Status.STOPPED.value
        assert stop_run(files.path).killed == []  # again: nothing runs, still stopped
    finally:
        for p in [driver, *kids]:
            p.kill()
            p.wait()


def test_failure_reasons_are_one_line() -> None:
    from skewlab.errors import SkewlabError
    from skewlab.live.driver.lifecycle import Interrupted

    assert failure_reason(Interrupted(signal.SIGTERM)) == "interrupted by SIGTERM"
    assert failure_reason(KeyboardInterrupt()) == "interrupted by SIGINT"
    assert failure_reason(SkewlabError("worker 1\nfailed")) == "worker 1 failed"
    assert failure_reason(ValueError("x")) == "ValueError: x"
