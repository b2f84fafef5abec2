"""The worker tier as Spark tasks (``$SKEWLAB_WORKER_ENGINE=spark``), real Spark and broker.

* a KEY run ends EXACT and each worker ran as a task of the warm workers app beside the
  session's route host, which stays up (or, with none, of the app ``skewlab-workers <run
  id>``): its event log names the app, one job per worker in the run's job group, each task
  ended Success;
* a worker SIGKILLed mid-run is restarted by Spark's task retry (attempt 1 of the same
  job, a failed attempt 0 in the event log), not by the driver's supervisor (no restart
  counted in the handle), and the run ends EXACT;
* without a broker: retry, cancel (no retry after ``kill``) and the app's death taking its
  workers with it (nothing tagged with their logs is left).
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.integration.fixtures.engine import event_log, job_groups, tasks_by_group
from tests.integration.fixtures.live import LIVE_DEFAULTS, RunRefs, wait_for

from skewlab.live.driver.handle import RunHandle, Status
from skewlab.live.driver.spark_launcher import ENGINE_ENV, EngineDir, SparkProc

pytestmark = pytest.mark.integration


def _request_of(h: RunHandle, name: str) -> str:
    req = h.procs[name].request
    assert req is not None, f"{name} did not run as a Spark task"
    return Path(req).stem


# First in the module: it uses no broker, and the session broker stops after its last user,
# so placed last it would outlive the broker that run_live's teardown deletes topics on.
def test_the_app_retries_cancels_and_leaves_no_process_when_killed(tmp_path: Path) -> None:
    """Without a broker: a stand-in worker (a sleeping Python) SIGKILLed is retried as
    attempt 1 of its job; ``kill`` cancels the job with no retry (end code -9); a second
    instance dies with the app when the app's group is killed (``skewlab stop``'s way)."""
    import psutil

    from skewlab.live.driver.launch import PROC_ENV, Detached, LocalLauncher
    from skewlab.live.driver.spark_launcher import SparkLauncher

    RunHandle("r", str(tmp_path), str(tmp_path), "delta", {}).save()  # the app serves it
    launcher = SparkLauncher(tmp_path, LocalLauncher(detached=True))
    sleep = [sys.executable, "-c", "import time; time.sleep(600)"]
    p, _ = launcher.start("worker-0", sleep, tmp_path / "worker-0.log")
    assert isinstance(p, SparkProc)
    first = p.pid  # waits for the first attempt (the app's Spark start)
    os.kill(first, signal.SIGKILL)
    wait_for("attempt 1 of worker 0", lambda: len(p.attempts()) == 2)
    assert p.poll() is None and p.pid != first
    p.kill()
    assert p.wait(timeout=120) == -signal.SIGKILL
    assert len(p.attempts()) == 2  # cancelled: no attempt 2

    q, _ = launcher.start("worker-1", sleep, tmp_path / "worker-1.log")
    tagged = str(tmp_path / "worker-1.log")
    pid = q.pid
    Detached(launcher.app()).kill()

    def gone() -> bool:
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(PROC_ENV) == tagged:
                    return False
            except psutil.Error:
                continue
        return True

    wait_for(f"worker 1 (pid {pid}) to die with the app", gone, timeout_s=60)
    assert q.poll() == -signal.SIGKILL


def test_a_key_run_ends_exact_with_its_workers_as_spark_tasks(
    run_live: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "spark")
    run = run_live("key")
    s = run.summary
    assert s is not None and s.exact, s.exactness
    h = RunHandle.load(run.run_dir)
    assert h.status == Status.DONE.value and not h.restarts
    log = event_log(run.run_dir)
    (app,) = [e for e in log if e["Event"] == "SparkListenerApplicationStart"]
    d = EngineDir(run.run_dir / "spark-workers")
    warm = d.warm_app()
    if warm is None:  # an app of its own (no warm route host beside which one runs)
        assert app["App Name"] == f"skewlab-workers {run.run_id}"
    else:  # the warm app: still up for the next run, this run's jobs in a group of its own
        rec = warm.app_record()
        assert app["App Name"] == "skewlab-workers (warm)" and rec is not None and warm.alive()
        assert {r.pid for n, r in h.procs.items() if n.startswith("worker-")} == {rec.pid}
        groups = job_groups(log)
    tasks = tasks_by_group(log)
    for i in range(LIVE_DEFAULTS["workers"]):
        rid = _request_of(h, f"worker-{i}")
        if warm is not None:
            assert groups[rid] == (run.run_id, f"skewlab-workers {run.run_id}: worker-{i}")
        assert tasks[rid] == [(0, "Success")]
        assert [a["rc"] for a in d.read_attempts(rid) if "rc" in a] == [0]
        assert d.read_rc(rid) == 0
        assert f"worker-{i}: Spark task" in run.log(f"worker-{i}.log")


def test_a_killed_worker_is_restarted_by_spark_task_retry_and_the_run_stays_exact(
    run_live: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENGINE_ENV, "spark")
    n = LIVE_DEFAULTS["events"]
    killed: list[int] = []

    def kill_worker_1(sent: int, procs: Any, refs: RunRefs) -> None:
        if killed or sent < 0.4 * n:
            return
        p = procs.workers[1]
        assert isinstance(p, SparkProc)
        pid = p.pid
        os.kill(pid, signal.SIGKILL)  # not restarted here: Spark must retry the task
        killed.append(pid)
        wait_for("Spark to start attempt 1 of worker 1", lambda: len(p.attempts()) == 2)
        assert p.poll() is None  # the job runs on: no exit for the supervisor to see

    run = run_live("pkg", hook=kill_worker_1)
    assert killed
    s = run.summary
    assert s is not None and s.exact, s.exactness
    h = RunHandle.load(run.run_dir)
    assert "worker-1" not in h.restarts  # the supervisor restarted nothing of worker 1
    assert h.status == Status.DONE.value
    rid = _request_of(h, "worker-1")
    attempts = EngineDir(run.run_dir / "spark-workers").read_attempts(rid)
    ends = [(a["attempt"], a["pid"], a["rc"]) for a in attempts if "rc" in a]
    assert ends[0] == (0, killed[0], -signal.SIGKILL) and ends[1][0::2] == (1, 0)
    assert run.log("worker-1.log").count("worker 1 resumes at routed offset") == 2
    tasks = tasks_by_group(event_log(run.run_dir))
    assert [a for a, _ in tasks[rid]] == [0, 1]
    assert tasks[rid][0][1] != "Success" and tasks[rid][1][1] == "Success"
