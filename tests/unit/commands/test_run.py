"""``skewlab run``'s exit status and the end-of-run notes, with the live run replaced by
summaries (the live stack is exercised by the integration tests)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from skewlab import cli
from skewlab.commands import services as services_cmd
from skewlab.live.driver.experiment import ExperimentError
from skewlab.live.report.summary import RunSummary
from skewlab.services import ServiceState, ServiceStatus, resolve_home

pytestmark = pytest.mark.unit


def _summary(strategy: str, *, exact: bool = True, quality: str = "passed") -> RunSummary:
    nan = float("nan")
    return RunSummary(
        run_id=f"run-{strategy}",
        strategy=strategy,
        workers=2,
        events=10,
        quarantined=0,
        produce_rate=1.0,
        throughput=1.0,
        std_dev=0.0,
        dist_cost=1.0,
        imb_score=0.0,
        p50_ms=nan,
        p90_ms=nan,
        p99_ms=nan,
        max_ms=nan,
        exact=exact,
        exactness="EXACT" if exact else "NOT EXACT",
        wall_s=1.0,
        window_s=1.0,
        quality=quality,
        quality_failures=[] if quality != "failed" else ["events: 1 row with a null key"],
    )


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.setenv("SKEWLAB_ROUTE_HOST", "off")  # no Spark here
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return home


def _fake_runs(monkeypatch: pytest.MonkeyPatch, results: dict[str, RunSummary]) -> None:
    import skewlab.live.driver.run as live_run

    def fake(s: Any, progress: Any = None, say: Any = None) -> RunSummary:
        return results[s.strategy]

    monkeypatch.setattr(live_run, "run_experiment", fake)


@pytest.mark.parametrize(
    ("key", "dkg", "code"),
    [
        ({}, {}, 0),
        ({}, {"quality": "skipped"}, 0),
        ({}, {"quality": "failed"}, 1),
        ({"exact": False}, {}, 1),
        ({"exact": False}, {"quality": "failed"}, 1),
    ],
)
def test_exit_status_counts_exactness_and_data_quality(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: dict[str, Any],
    dkg: dict[str, Any],
    code: int,
) -> None:
    _fake_runs(monkeypatch, {"key": _summary("key", **key), "dkg": _summary("dkg", **dkg)})
    assert cli.main(["run", "--no-progress", "--compare", "key,dkg"]) == code
    out = capsys.readouterr().out
    if dkg.get("quality") == "failed":
        assert "events: 1 row with a null key" in out  # the failure is shown with the code


# --- what the run leaves running (the broker's status faked at get_service) --------------


def _status(running: bool, pid: int = 4242) -> ServiceStatus:
    state = ServiceState("broker", pid, "127.0.0.1", 40123, "127.0.0.1:40123", "broker.log")
    return ServiceStatus("broker", running, running, state if running else None)


class _FakeBroker:
    """A broker service whose successive status() answers are ``answers``."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.asked = 0

    def status(self) -> ServiceStatus:
        running = self.answers[min(self.asked, len(self.answers) - 1)]
        self.asked += 1
        return _status(running)


def _run_with_broker(
    monkeypatch: pytest.MonkeyPatch, answers: list[bool], *flags: str
) -> tuple[int, _FakeBroker, list[Any]]:
    import skewlab.commands.run as run_command

    broker = _FakeBroker(answers)
    homes: list[Any] = []

    def get_service(name: str, home: Any = None) -> _FakeBroker:
        assert name == "broker"
        homes.append(home)
        return broker

    monkeypatch.setattr(run_command, "get_service", get_service)
    _fake_runs(monkeypatch, {"key": _summary("key")})
    code = cli.main(["run", "--no-progress", "--strategy", "key", *flags])
    return code, broker, homes


def _down_home(line: str) -> Path:
    """The data dir ``skewlab down`` would stop, parsed from the note's command."""
    command = line.split("stop it with: ", 1)[1]
    argv = shlex.split(command)
    assert argv[0] == "skewlab"
    args = cli.build_parser().parse_args(argv[1:])
    assert args._run is services_cmd.down
    return resolve_home(args.home)


@pytest.mark.parametrize("where", ["default", "other"])
def test_a_broker_the_run_started_is_reported_with_how_to_stop_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    _home: Path,
    where: str,
) -> None:
    home = _home if where == "default" else tmp_path / "elsewhere"
    code, broker, homes = _run_with_broker(monkeypatch, [False, True], "--home", str(home))
    assert code == 0 and broker.asked == 2
    assert all(resolve_home(h) == resolve_home(home) for h in homes)
    err = capsys.readouterr().err.strip().splitlines()
    notes = [ln for ln in err if "stop it with: " in ln]
    assert len(notes) == 1 and "pid 4242" in notes[0]
    assert _down_home(notes[0]) == resolve_home(home)
    assert ("--home" in notes[0]) == (where == "other")  # the default needs no flag


@pytest.mark.parametrize("answers", [[True, True], [False, False]])
def test_no_note_for_a_broker_the_user_started_or_one_that_stopped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], answers: list[bool]
) -> None:
    code, broker, _ = _run_with_broker(monkeypatch, answers)
    assert code == 0 and broker.asked == 2
    assert "stop it with" not in capsys.readouterr().err


def test_no_note_and_no_broker_lookup_with_another_kafka(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, broker, homes = _run_with_broker(monkeypatch, [False, True], "--bootstrap", "127.0.0.1:9")
    assert code == 0 and broker.asked == 0 and not homes
    assert "stop it with" not in capsys.readouterr().err


def test_the_note_is_printed_when_the_run_fails(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import skewlab.live.driver.run as live_run

    _, broker, _ = _run_with_broker(monkeypatch, [False, True])

    def failing(s: Any, progress: Any = None, say: Any = None) -> RunSummary:
        raise ExperimentError("route job exited with 1")

    monkeypatch.setattr(live_run, "run_experiment", failing)
    capsys.readouterr()
    broker.asked = 0
    assert cli.main(["run", "--no-progress", "--strategy", "key"]) == 1
    assert len([ln for ln in capsys.readouterr().err.splitlines() if "stop it with" in ln]) == 1


@pytest.mark.parametrize(
    ("env", "wanted"),
    [
        ({}, True),
        ({"SKEWLAB_SPARK_MASTER": "local[3]"}, True),
        ({"SKEWLAB_ROUTE_HOST": "off"}, False),
        ({"SKEWLAB_ROUTE_HOST": "/elsewhere"}, False),  # the user's host: used as it is
        ({"SKEWLAB_SPARK_MASTER": "spark://10.0.0.1:7077"}, False),
        ({"SKEWLAB_SPARK_SUBMIT": "1"}, False),
        ({"SKEWLAB_CRASH": "route.after_sink"}, False),
    ],
)
def test_run_starts_the_data_dirs_route_host_only_for_a_local_python_route_job(
    env: dict[str, str], wanted: bool
) -> None:
    from skewlab.envsettings import env_settings

    assert services_cmd.wants_route_host(env_settings(env)) is wanted


@pytest.mark.parametrize("started", [True, False])
def test_a_route_host_the_run_started_is_reported_with_how_to_stop_it(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    started: bool,
) -> None:
    """The host is this process (alive) standing in for one; only one this run started is named."""
    import os

    import psutil

    import skewlab.commands.run as run_command
    from skewlab.live.driver.handle import ProcRecord
    from skewlab.live.driver.launch import write_json
    from skewlab.live.driver.route_host import HostDir

    home = tmp_path / "elsewhere"
    d = HostDir(tmp_path / "host")
    d.path.mkdir()
    me = psutil.Process(os.getpid())
    write_json(d.record, ProcRecord("route-host", me.pid, me.create_time(), [], "").__dict__)
    asked: list[Any] = []

    def start(h: Any) -> tuple[HostDir, bool]:
        asked.append(h)
        return d, started

    monkeypatch.setattr(run_command, "start_route_host", start)
    code, _, _ = _run_with_broker(monkeypatch, [True, True], "--home", str(home))
    assert code == 0 and [resolve_home(h) for h in asked] == [resolve_home(home)]
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "route host" in ln]
    assert len(notes) == (1 if started else 0)
    if started:
        assert f"pid {me.pid}" in notes[0] and str(d.path) in notes[0]
        assert _down_home(notes[0]) == resolve_home(home)
