"""The Spark workers engine's file protocol (:mod:`skewlab.live.driver.spark_launcher`),
with real files and real processes standing in for the app and a task attempt."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from skewlab.errors import ConfigError
from skewlab.live.driver.handle import ProcRecord, RunHandle
from skewlab.live.driver.launch import Detached, LocalLauncher
from skewlab.live.driver.spark_launcher import (
    ENGINE_ENV,
    EngineDir,
    SparkLauncher,
    SparkProc,
    await_app_exit,
    worker_engine,
)

pytestmark = pytest.mark.unit


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _proc(d: EngineDir, app: subprocess.Popen[bytes], name: str = "worker-0") -> SparkProc:
    req = d.write_request(name, ["true"], d.path / f"{name}.log")
    created = psutil.Process(app.pid).create_time()
    rec = ProcRecord(name, app.pid, created, ["true"], "log", request=str(d.request(req.id)))
    return SparkProc(rec)


def test_the_engine_defaults_to_spark_on_every_master_and_local_stays_selectable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ENGINE_ENV, raising=False)
    monkeypatch.delenv("SKEWLAB_SPARK_MASTER", raising=False)
    assert worker_engine() == "spark"
    monkeypatch.setenv("SKEWLAB_SPARK_MASTER", "local[2]")
    assert worker_engine() == "spark"
    monkeypatch.setenv("SKEWLAB_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert worker_engine() == "spark"  # on a cluster master the workers go to the cluster
    monkeypatch.setenv(ENGINE_ENV, "local")
    assert worker_engine() == "local"  # the setting still wins
    monkeypatch.setenv(ENGINE_ENV, "spark")
    assert worker_engine() == "spark"
    monkeypatch.setenv(ENGINE_ENV, "yarn")
    with pytest.raises(ConfigError, match="SKEWLAB_WORKER_ENGINE='yarn'"):
        worker_engine()


def test_requests_are_listed_in_order_and_the_app_record_is_not_one(tmp_path: Path) -> None:
    d = EngineDir.of_run(tmp_path)
    d.app.write_text("{}")
    a = d.write_request("worker-0", ["a"], tmp_path / "w0.log")
    b = d.write_request("worker-1", ["b"], tmp_path / "w1.log")
    assert [r.id for r in d.requests()] == [a.id, b.id]
    assert d.requests()[1].cmd == ["b"] and d.requests()[1].log == str(tmp_path / "w1.log")


def test_a_request_carries_the_run_settings_to_its_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKEWLAB_KAFKA_BOOTSTRAP", "127.0.0.1:19092")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:15000")
    monkeypatch.setenv("UNRELATED_VARIABLE", "x")
    d = EngineDir.of_run(tmp_path)
    d.write_request("worker-0", ["a"], tmp_path / "w0.log")
    (req,) = d.requests()
    assert req.env["SKEWLAB_KAFKA_BOOTSTRAP"] == "127.0.0.1:19092"
    assert req.env["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:15000"
    assert "UNRELATED_VARIABLE" not in req.env


def test_a_job_runs_through_retries_and_its_end_code_is_the_apps(tmp_path: Path) -> None:
    d = EngineDir.of_run(tmp_path)
    app = _sleeper()
    try:
        p = _proc(d, app)
        assert p.poll() is None and p.attempts() == []
        d.add_attempt(p.rid, {"attempt": 0, "pid": 11, "create_time": 0.0})
        d.add_attempt(p.rid, {"attempt": 0, "pid": 11, "create_time": 0.0, "rc": -9})
        d.add_attempt(p.rid, {"attempt": 1, "pid": 12, "create_time": 0.0})
        assert p.pid == 12 and [a["attempt"] for a in p.attempts()] == [0, 1]
        assert p.poll() is None  # a failed attempt is no exit while Spark retries
        d.add_attempt(p.rid, {"attempt": 1, "pid": 12, "create_time": 0.0, "rc": 3})
        assert d.job_rc(p.rid, failed=True) == 3
        d.add_attempt(p.rid, {"attempt": 2, "pid": 13, "create_time": 0.0, "rc": 0})
        d.cancel(p.rid).touch()  # killed after it ended: it still ended with 0
        assert d.job_rc(p.rid, failed=False) == 0
        d.finish(p.rid, 0)
        assert p.poll() == 0 and p.wait(timeout=1) == 0
        assert p.retried_by_engine  # ended by the app: Spark did what it would
    finally:
        app.kill()
        app.wait()


def test_a_job_whose_app_died_reads_as_killed(tmp_path: Path) -> None:
    d = EngineDir.of_run(tmp_path)
    app = _sleeper()
    p = _proc(d, app)
    app.kill()
    app.wait()
    assert p.poll() == -signal.SIGKILL
    assert not p.retried_by_engine  # Spark retries nothing more: the supervisor restarts it
    with pytest.raises(ChildProcessError, match="no task attempt started"):
        _ = p.pid


def test_a_job_a_driver_cancelled_is_restarted_by_the_supervisor_not_given_up(
    tmp_path: Path,
) -> None:
    """A failed driver's stop cancels every worker job; a resumed driver that adopts one
    must start it again (as the local engine restarts a killed process), while a job whose
    attempts Spark gave up on (no cancel) is the engine's restart done."""
    d = EngineDir.of_run(tmp_path)
    app = _sleeper()
    try:
        given_up, cancelled = _proc(d, app, "worker-0"), _proc(d, app, "worker-1")
        for p, rc in ((given_up, 1), (cancelled, -signal.SIGKILL)):
            d.add_attempt(p.rid, {"attempt": 0, "pid": 11, "create_time": 0.0, "rc": rc})
        d.cancel(cancelled.rid).touch()
        d.finish(given_up.rid, d.job_rc(given_up.rid, failed=True))
        d.finish(cancelled.rid, d.job_rc(cancelled.rid, failed=True))
        assert (given_up.poll(), cancelled.poll()) == (1, -signal.SIGKILL)
        assert given_up.retried_by_engine and not cancelled.retried_by_engine
    finally:
        app.kill()
        app.wait()


def test_kill_cancels_the_job_and_kills_the_current_attempts_process(tmp_path: Path) -> None:
    d = EngineDir.of_run(tmp_path)
    app, attempt = _sleeper(), _sleeper()
    try:
        p = _proc(d, app)
        created = psutil.Process(attempt.pid).create_time()
        d.add_attempt(p.rid, {"attempt": 0, "pid": attempt.pid, "create_time": created})
        p.kill()
        assert attempt.wait(timeout=10) == -signal.SIGKILL
        assert d.cancel(p.rid).exists()
        assert d.job_rc(p.rid, failed=True) == -signal.SIGKILL  # cancelled: not a failure
    finally:
        for q in (app, attempt):
            q.kill()
            q.wait()


def test_a_start_cancels_the_unrecorded_job_a_dead_driver_left_of_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A request written, its driver killed before the handle named it: the next start of
    that name cancels the job (no retry) and kills its running attempt; an ended job, a job
    being cancelled and another name's are left alone."""
    d = EngineDir.of_run(tmp_path)
    app, attempt, other = _sleeper(), _sleeper(), _sleeper()
    rec = ProcRecord("workers-app", app.pid, psutil.Process(app.pid).create_time(), ["a"], "l")
    monkeypatch.setattr(SparkLauncher, "app", lambda self: rec)  # no Spark start here
    try:
        stray, ended, cancelling = (_proc(d, app) for _ in range(3))
        for proc, pid in ((stray, attempt.pid), (cancelling, other.pid)):
            created = psutil.Process(pid).create_time()
            d.add_attempt(proc.rid, {"attempt": 0, "pid": pid, "create_time": created})
        d.finish(ended.rid, 0)
        d.cancel(cancelling.rid).touch()  # its canceller (a supervisor's kill) ends it
        consumer = _proc(d, app, "consumer-0")
        new, _ = SparkLauncher(tmp_path).start("worker-0", ["true"], tmp_path / "w.log")
        assert attempt.wait(timeout=10) == -signal.SIGKILL and d.cancel(stray.rid).exists()
        assert other.poll() is None and not d.cancel(consumer.rid).exists()
        assert not d.cancel(ended.rid).exists() and not d.cancel(new.rid).exists()  # type: ignore[attr-defined]
    finally:
        for q in (app, attempt, other):
            q.kill()
            q.wait()


def test_only_workers_go_to_spark_and_records_round_trip_through_the_handle(
    tmp_path: Path,
) -> None:
    launcher = SparkLauncher(tmp_path, LocalLauncher())
    proc, rec = launcher.start("route", ["true"], tmp_path / "route.log")
    assert rec.request is None and proc.wait(timeout=10) == 0
    assert isinstance(launcher.attach(rec), Detached)
    d = EngineDir.of_run(tmp_path)
    req = d.write_request("worker-2", ["true"], tmp_path / "w.log")
    spark_rec = ProcRecord(
        "worker-2", os.getpid(), 0.0, ["true"], "w", None, str(d.request(req.id))
    )
    h = RunHandle("r", str(tmp_path), str(tmp_path), "delta", {}, procs={"worker-2": spark_rec})
    back = RunHandle.from_json(h.to_json()).procs["worker-2"]
    assert back == spark_rec
    assert isinstance(launcher.attach(back), SparkProc)


def test_the_workers_app_caps_itself_on_a_cluster_master_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from skewlab.live.mains.workers_app import cluster_conf, master

    monkeypatch.delenv("SKEWLAB_SPARK_DRIVER_HOST", raising=False)
    monkeypatch.delenv("SKEWLAB_SPARK_MASTER", raising=False)
    assert master() == "local[32,4]" and cluster_conf(master()) == {}
    monkeypatch.setenv("SKEWLAB_SPARK_MASTER", "spark://127.0.0.1:7077")
    assert master() == "spark://127.0.0.1:7077"
    conf = cluster_conf(master())
    assert conf["spark.cores.max"] == "16"  # its slots: one node holds them all
    assert conf["spark.executor.cores"] == "8"  # several executors per node allowed


def _app(run_dir: Path, seconds: float) -> Detached:
    """A detached stand-in for the workers app that leaves after ``seconds``."""
    from skewlab.live.driver.launch import spawn_detached, write_json

    cmd = [sys.executable, "-c", f"import time; time.sleep({seconds})"]
    app, rec = spawn_detached("workers-app", cmd, run_dir / "workers-app.log")
    write_json(EngineDir.of_run(run_dir).app, rec.__dict__)
    return app


def test_a_stopped_runs_app_that_leaves_by_itself_is_waited_for_not_killed(tmp_path: Path) -> None:
    app = _app(tmp_path, 1.0)
    assert app.alive()
    assert await_app_exit(tmp_path, timeout_s=60) is False
    assert not app.alive() and app.poll() == 0  # it left by itself


def test_a_stopped_runs_app_that_stays_is_killed_with_its_group(tmp_path: Path) -> None:
    app = _app(tmp_path, 600)
    assert await_app_exit(tmp_path, timeout_s=0.5) is True
    assert not app.alive()


def test_a_run_without_a_workers_app_has_nothing_to_wait_for(tmp_path: Path) -> None:
    assert await_app_exit(tmp_path, timeout_s=0.0) is False
    assert not (tmp_path / "spark-workers").exists()  # nothing created for a local run


def test_a_job_that_had_ended_when_a_resuming_driver_adopted_it_is_restarted(
    tmp_path: Path,
) -> None:
    """A broker loss ends the workers' jobs by themselves (Spark gave up on them, no
    cancel) before the failed driver stops; the driver that resumes the run adopts them
    ended and must start them again, while a job that ends after adoption is Spark's end."""
    d = EngineDir.of_run(tmp_path)
    app = _sleeper()
    try:
        before, after = _proc(d, app, "worker-0"), _proc(d, app, "worker-1")
        d.add_attempt(before.rid, {"attempt": 0, "pid": 11, "create_time": 0.0, "rc": 1})
        d.finish(before.rid, d.job_rc(before.rid, failed=True))
        before.adopt()
        after.adopt()  # still running when adopted
        d.add_attempt(after.rid, {"attempt": 0, "pid": 12, "create_time": 0.0, "rc": 1})
        d.finish(after.rid, d.job_rc(after.rid, failed=True))
        assert (before.poll(), after.poll()) == (1, 1)
        assert not before.retried_by_engine  # the failed attempt's end: restart it
        assert after.retried_by_engine  # ended under this driver: Spark's retries were used
    finally:
        app.kill()
        app.wait()
