"""The run handle between phases, and the background processes it finds again.

Round trips of :class:`~skewlab.live.driver.handle.RunHandle` (and of the quality
report the summarize phase reads back), the phase guards, and
:class:`~skewlab.live.driver.launch.Detached`: a process started detached in one
"task" is polled, its exit code read and its whole process group killed from
another, by pid alone.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from pathlib import Path

import pytest

from skewlab.live.driver.handle import HandleError, Phase, ProcRecord, RunHandle
from skewlab.live.driver.launch import Detached, route_command, spawn_detached
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit


def _handle(run_dir: Path) -> RunHandle:
    s = ExperimentSettings(strategy="key", workers=2, partitions=2, home=str(run_dir.parent))
    return RunHandle(
        run_id="key-1",
        home=str(run_dir.parent),
        run_dir=str(run_dir),
        delta_root=str(run_dir.parent / "delta"),
        settings=dataclasses.asdict(s),
        bootstrap="127.0.0.1:9092",
        events_topic="events-key-1",
        routed_topic="routed-key-1",
        n_routed=2,
        route_cmd=["python", "-m", "skewlab.live.mains.route_job", "route.json"],
        procs={"route": ProcRecord("route", 123, 1.5, ["python"], "route.log", "route.rc")},
        running=[0, 1],
        t_start=10.0,
        produced={"events": 100, "seconds": 2.0},
        scale={"timeline": [[0.0, 2, 2]], "events": []},
    )


def test_handle_round_trips_through_its_file(tmp_path: Path) -> None:
    h = _handle(tmp_path / "run")
    (tmp_path / "run").mkdir()
    h.mark(Phase.SERVICES)
    h.mark(Phase.SERVICES)  # idempotent

    back = RunHandle.load(tmp_path / "run")

    assert back == h
    assert back.phases == ["services"]
    assert isinstance(back.procs["route"], ProcRecord)
    assert ExperimentSettings(**back.settings) == ExperimentSettings(**h.settings)
    assert json.loads(RunDir.of(tmp_path / "run").handle.read_text())["run_id"] == "key-1"
    assert not list((tmp_path / "run").glob("*.tmp*")), "the save is a rename"


def test_missing_or_bad_handle_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(HandleError, match=r"^no run handle at .*handle\.json$"):
        RunHandle.load(tmp_path)
    RunDir.of(tmp_path).handle.write_text('{"run_id": "x", "bogus": 1}')
    with pytest.raises(HandleError, match="unknown handle field"):
        RunHandle.load(tmp_path)


def test_a_phase_out_of_order_says_which_is_missing(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    h = _handle(tmp_path / "run")
    h.mark(Phase.SERVICES)
    with pytest.raises(HandleError) as info:
        h.require(Phase.DRAINED, "aggregate")
    assert str(info.value) == (
        "cannot aggregate run key-1: phase 'drained' not done (done: services)"
    )


def test_quality_report_round_trips() -> None:
    from skewlab.quality import QualityReport
    from skewlab.quality.report import Failure, SuiteResult

    bad = Failure("tables", "key_loads", "expect_x", "count >= 0", 2, 5, ({"key": "a"},), "d")
    report = QualityReport("r", (SuiteResult("tables", 5, 3, (bad,)),), {"events": "no frame"})

    back = QualityReport.from_dict(json.loads(json.dumps(report.to_dict())))

    assert back == report and back.summary() == report.summary()


def test_route_command_uses_spark_submit_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SKEWLAB_SPARK_SUBMIT", raising=False)
    monkeypatch.delenv("SKEWLAB_SPARK_MASTER", raising=False)
    path = tmp_path / "run-1" / "route.json"
    assert route_command(path, "local[2]")[1:] == ["-m", "skewlab.live.mains.route_job", str(path)]

    monkeypatch.setenv("SKEWLAB_SPARK_MASTER", "spark://head:7077")
    cmd = route_command(path, "spark://head:7077")
    assert Path(cmd[0]).name == "spark-submit" and Path(cmd[0]).is_file()
    assert cmd[1:5] == ["--master", "spark://head:7077", "--name", "skewlab-route-run-1"]
    assert cmd[-2:] == [str(Path(__file__).resolve().parents[4] / "jobs" / "route.py"), str(path)]

    monkeypatch.setenv("SKEWLAB_SPARK_MASTER", "local[2]")
    monkeypatch.setenv("SKEWLAB_SPARK_SUBMIT", "1")
    assert Path(route_command(path, "local[2]")[0]).name == "spark-submit"


def _wait(cond: object, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_detached_exit_code_is_read_from_another_handle(tmp_path: Path) -> None:
    cmd = [sys.executable, "-c", "import sys; print('bye'); sys.exit(3)"]
    proc, rec = spawn_detached("job", cmd, tmp_path / "job.log")

    assert proc.wait(timeout=30) == 3
    other = Detached(rec)  # as a later task sees it: no Popen, the pid and the rc file
    assert other.poll() == 3 and other.returncode == 3
    assert (tmp_path / "job.log").read_text().strip() == "bye"


def test_detached_kill_takes_the_process_group(tmp_path: Path) -> None:
    import psutil

    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('up', flush=True)\n"
        "time.sleep(600)\n"
    )
    _, rec = spawn_detached("job", [sys.executable, "-c", code], tmp_path / "job.log")
    _wait(lambda: "up" in (tmp_path / "job.log").read_text())
    members = psutil.Process(rec.pid).children(recursive=True)
    assert len(members) == 2  # the job and the process it started

    later = Detached(RunHandle.from_json(json.dumps({"procs": {}, **_min(rec)})).procs["job"])
    assert later.poll() is None
    later.kill()

    assert later.wait(timeout=30) == -9
    _, alive = psutil.wait_procs(members, timeout=10)
    assert alive == []


def _min(rec: ProcRecord) -> dict[str, object]:
    """A handle dict holding just ``rec`` (what a later task loads)."""
    return {
        "run_id": "r",
        "home": "h",
        "run_dir": "d",
        "delta_root": "x",
        "settings": {},
        "procs": {"job": dataclasses.asdict(rec)},
    }
