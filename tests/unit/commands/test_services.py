"""``skewlab status`` / ``down``: a row per service; the data dir's Airflow found and stopped."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.commands.services import ROUTE_HOST, find_airflow, status_rows
from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import write_json
from skewlab.live.driver.route_host import HostDir
from skewlab.services import SERVICES, DataDir, ServiceState

pytestmark = pytest.mark.unit


def _status(capsys: pytest.CaptureFixture[str], home: Path) -> list[list[str]]:
    assert cli.main(["status", "--home", str(home)]) == 0
    lines = capsys.readouterr().out.splitlines()
    return [ln.split() for ln in lines[3:]]  # data dir line, header, rule


@pytest.fixture
def fake_airflow(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A process that looks like ``airflow standalone`` for data dir ``tmp_path/home``
    (its own process group, as ``skewlab airflow --run`` starts it)."""
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "home" / "airflow")}
    env["AIRFLOW__API__BASE_URL"] = "http://localhost:18080"
    code = "import time\nwhile True: time.sleep(0.1)"
    argv = [sys.executable, "-c", code, "airflow", "standalone"]
    proc = subprocess.Popen(argv, env=env, start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def _sleeper(*args: str) -> subprocess.Popen[bytes]:
    code = "import time\nwhile True: time.sleep(0.1)"
    return subprocess.Popen([sys.executable, "-c", code, *args], start_new_session=True)


def test_status_has_one_row_per_service_and_says_how_to_start_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", "--home", str(tmp_path / "home")]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"\bbroker\b", out)) == 1
    rows = [ln.split() for ln in out.splitlines()[3:]]
    names = [r[0] for r in rows]
    assert set(SERVICES) | {"airflow"} <= set(names)
    assert all(r[1] == "stopped" for r in rows)


def test_a_running_broker_is_one_row_with_its_pid_and_how_to_stop_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    fake = _sleeper("kafka.Kafka")  # what the broker's pid check looks for; no port answers
    try:
        DataDir(home).write_state(
            ServiceState("broker", fake.pid, "127.0.0.1", 9, "127.0.0.1:9", "log")
        )
        assert cli.main(["status", "--home", str(home)]) == 0
        out = capsys.readouterr().out
    finally:
        fake.kill()
        fake.wait(timeout=10)
    assert len(re.findall(r"\bbroker\b", out)) == 1
    broker = next(r for r in status_rows(str(home)) if r[0] == "broker")
    assert broker[0] == "broker" and broker[4].startswith("skewlab up")  # gone since
    (line,) = [ln for ln in out.splitlines() if re.search(r"\bbroker\b", ln)]
    assert str(fake.pid) in line.split() and "127.0.0.1:9" in line.split()
    assert "NOT healthy" in line  # no port answers the probe


def test_airflow_of_this_data_dir_is_listed_and_down_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_airflow: subprocess.Popen[bytes]
) -> None:
    home = tmp_path / "home"
    deadline = time.monotonic() + 10
    while not find_airflow(home / "airflow") and time.monotonic() < deadline:
        time.sleep(0.05)
    airflow = [r for r in status_rows(str(home)) if r[0] == "airflow"]
    assert len(airflow) == 1
    assert airflow[0][1:4] == ["running", "http://localhost:18080", str(fake_airflow.pid)]
    assert "skewlab down" in airflow[0][4]
    # another data dir does not see it
    other = [r for r in status_rows(str(tmp_path / "other")) if r[0] == "airflow"]
    assert other[0][1] == "stopped"

    assert cli.main(["down", "--home", str(home)]) == 0
    assert fake_airflow.wait(timeout=30) is not None
    assert find_airflow(home / "airflow") == []


def _resident_row_then_down(
    capsys: pytest.CaptureFixture[str], home: Path, row: str, d: Any, ready: dict[str, Any]
) -> None:
    """A stand-in for the resident process of ``d`` (it exits once ``d.stop_file`` appears,
    as the real one does): its ``status`` row is stopped, starting once recorded, running
    with its URL (the only value of ``ready`` that is one) once ready, and ``down`` stops it
    by its stop file."""
    import psutil

    assert [r[:4] for r in _status(capsys, home) if r[0] == row] == [[row, "stopped", "-", "-"]]
    code = f"import os, time\nwhile not os.path.exists({str(d.stop_file)!r}): time.sleep(0.05)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    try:
        rec = ProcRecord(row, proc.pid, psutil.Process(proc.pid).create_time(), [], "")
        write_json(d.record, rec.__dict__)
        assert next(r for r in _status(capsys, home) if r[0] == row)[1:4] == [
            "starting", "-", str(proc.pid)
        ]  # fmt: skip
        write_json(d.ready, ready)
        (url,) = [v for v in ready.values() if str(v).startswith("http")]
        shown = next(r for r in _status(capsys, home) if r[0] == row)
        assert shown[1:] == ["running", url, str(proc.pid), "skewlab", "down", "--home", str(home)]
        assert cli.main(["down", "--home", str(home)]) == 0
        assert f"{row}: stopped" in capsys.readouterr().out.splitlines()
        assert proc.wait(timeout=30) == 0  # it ended by its stop file, not a kill
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_route_host_is_a_row_starting_then_running_and_down_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    d = HostDir(home / ROUTE_HOST)
    d.requests.mkdir(parents=True)
    _resident_row_then_down(capsys, home, ROUTE_HOST, d, {"pid": 1, "spark_ui": "http://h:4321"})


def test_the_warm_workers_app_is_a_row_starting_then_running_and_down_stops_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The app beside the route host's folder; its host is gone (killed, say), so ``down``
    stops the app itself."""
    from skewlab.commands.services import WORKERS_APP
    from skewlab.live.driver.warm_app import beside

    home = tmp_path / "home"
    d = beside(home / ROUTE_HOST)
    d.runs.mkdir(parents=True)
    ready = {"app_id": "local-1", "ui": "http://127.0.0.1:4322", "master": "local[32,4]"}
    _resident_row_then_down(capsys, home, WORKERS_APP, d, ready)
