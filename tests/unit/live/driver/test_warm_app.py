"""The warm workers app seen from a run (:mod:`skewlab.live.driver.warm_app`): which runs use
it, that a run's stop waits for its jobs and never for (or kills) the shared app, that
``skewlab stop`` / ``gc`` see a job, not the app, and the registration a resumed run renews.
A sleeping detached process stands in for the app."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewlab.envsettings import env_settings
from skewlab.live.driver import warm_app
from skewlab.live.driver.launch import Detached, spawn_detached, write_json
from skewlab.live.driver.route_host import attach_any
from skewlab.live.driver.spark_launcher import EngineDir, SparkLauncher, SparkProc, await_app_exit

pytestmark = pytest.mark.unit


def test_a_warm_app_serves_runs_beside_a_route_host_on_a_local_master(tmp_path: Path) -> None:
    host = str(tmp_path / "host")
    assert warm_app.home(env_settings({})) is None  # no host: each run its own app
    assert warm_app.home(env_settings({"SKEWLAB_ROUTE_HOST": "off"})) is None
    d = warm_app.home(env_settings({"SKEWLAB_ROUTE_HOST": host}))
    assert d is not None and d.path == Path(host).resolve() / "workers-app"
    on = {"SKEWLAB_ROUTE_HOST": host, "SKEWLAB_SPARK_MASTER": "local[2]"}
    assert warm_app.home(env_settings(on)) == d
    cluster = {"SKEWLAB_ROUTE_HOST": host, "SKEWLAB_SPARK_MASTER": "spark://127.0.0.1:7077"}
    assert warm_app.home(env_settings(cluster)) is None  # `skewlab-workers <run id>` there


def _stand_in(d: warm_app.WarmDir) -> Detached:
    """A detached sleeper recorded as the warm app."""
    d.runs.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-c", "import time; time.sleep(600)"]
    app, rec = spawn_detached("workers-app", cmd, d.log)
    write_json(d.record, rec.__dict__)
    return app


@pytest.fixture
def warm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[warm_app.WarmDir]:
    monkeypatch.setenv("SKEWLAB_ROUTE_HOST", str(tmp_path / "host"))
    monkeypatch.delenv("SKEWLAB_SPARK_MASTER", raising=False)
    d = warm_app.home()
    assert d is not None
    app = _stand_in(d)
    yield d
    app.kill()


def test_a_new_run_shares_the_warm_app_and_its_stop_waits_for_its_jobs_only(
    tmp_path: Path, warm: warm_app.WarmDir
) -> None:
    run_dir = tmp_path / "runs" / "key-1"
    launcher = SparkLauncher(run_dir)
    rec = launcher.app(share=True)
    assert rec == warm.app_record()  # running: not started again
    assert warm.registered() == {run_dir.resolve(): warm.registration("key-1").stat().st_mtime}
    proc, prec = launcher.start("worker-0", ["true"], run_dir / "worker-0.log")
    assert isinstance(proc, SparkProc) and prec.pid == rec.pid
    seen = attach_any(prec)  # `skewlab stop` / `gc`: the job, never the shared app
    assert isinstance(seen, SparkProc) and seen.alive()
    assert Detached(rec).alive()  # the app is not the run's to stop
    EngineDir.of_run(run_dir).finish(proc.rid, -9)
    assert await_app_exit(run_dir, timeout_s=0.0) is False  # every job ended: nothing to do
    assert not attach_any(prec).alive() and Detached(rec).alive()


def test_a_run_stopped_with_a_job_still_running_kills_that_jobs_process(
    tmp_path: Path, warm: warm_app.WarmDir
) -> None:
    import subprocess

    run_dir = tmp_path / "runs" / "key-2"
    launcher = SparkLauncher(run_dir)
    launcher.app(share=True)
    proc, _ = launcher.start("worker-0", ["true"], run_dir / "worker-0.log")
    task = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    d = EngineDir.of_run(run_dir)
    d.add_attempt(proc.rid, {"attempt": 0, "pid": task.pid, "create_time": 0.0})
    assert await_app_exit(run_dir, timeout_s=0.2) is True
    assert task.wait(timeout=10) != 0 and d.cancel(proc.rid).exists()
    assert warm.alive()


def test_a_run_without_share_keeps_an_app_of_its_own(
    tmp_path: Path, warm: warm_app.WarmDir
) -> None:
    run_dir = tmp_path / "runs" / "scale-1"  # e.g. the autoscale run's consumers
    own = _stand_in(warm_app.WarmDir(run_dir / "own"))  # its running app, recorded ...
    write_json(EngineDir.of_run(run_dir).app, own.rec.__dict__)  # ... where the run's is
    try:
        assert SparkLauncher(run_dir).app() == own.rec
        assert EngineDir.of_run(run_dir).warm_app() is None and not warm.registered()
    finally:
        own.kill()


def test_forgetting_a_run_spares_a_registration_renewed_meanwhile(
    tmp_path: Path, warm: warm_app.WarmDir
) -> None:
    run_dir = tmp_path / "runs" / "key-3"
    warm_app.register(warm, run_dir)
    ((_, seen),) = warm.registered().items()
    later = seen + 5
    os.utime(warm.registration("key-3"), (later, later))  # a resumed run registered again
    warm_app.forget(warm, run_dir, seen)
    assert warm.registered() == {run_dir.resolve(): later}
    warm_app.forget(warm, run_dir, later)
    assert not warm.registered()


def test_stop_asks_then_kills(tmp_path: Path) -> None:
    d = warm_app.WarmDir(tmp_path / "workers-app")
    app = _stand_in(d)
    began = time.monotonic()
    warm_app.stop(d, grace_s=0.2)
    assert not app.alive() and d.stop_file.exists() and time.monotonic() - began < 30


def test_the_app_knows_when_its_route_host_is_gone(tmp_path: Path) -> None:
    d = warm_app.WarmDir(tmp_path / "host" / "workers-app")
    assert d.host_gone()  # none recorded
    host = _stand_in(warm_app.WarmDir(tmp_path / "elsewhere"))
    d.path.mkdir(parents=True)
    write_json(tmp_path / "host" / "host.json", host.rec.__dict__)
    assert not d.host_gone()
    host.kill()
    host.wait(timeout=10)
    assert d.host_gone()
