"""``skewlab airflow``: the printed standalone commands, and the environment ``--run`` gives
Airflow (its supervision is checked by hand)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from skewlab import cli
from skewlab.commands import airflow as airflow_cmd

pytestmark = pytest.mark.unit

REPO_DAGS = Path(__file__).resolve().parents[3] / "dags"


def test_registered() -> None:
    assert cli.COMMANDS["airflow"] == "skewlab.commands.airflow"


def test_plan_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKEWLAB_HOME", str(tmp_path))
    p = airflow_cmd.plan()
    assert airflow_cmd.DEFAULT_DAGS == REPO_DAGS
    assert p.env["AIRFLOW_HOME"] == str(tmp_path / "airflow")
    assert p.env["AIRFLOW__CORE__DAGS_FOLDER"] == str(REPO_DAGS)
    assert p.env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "False"
    assert p.env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("sqlite:////")
    assert p.env["SKEWLAB_HOME"] == str(tmp_path)
    assert p.url == "http://localhost:8080" == p.env["AIRFLOW__API__BASE_URL"]
    assert p.argv[1:] == ["standalone"] and Path(p.argv[0]).name == "airflow"
    env = p.child_env({"PATH": "/usr/bin", "X": "1"})
    assert env["PATH"] == f"{p.bin_dir}:/usr/bin" and env["X"] == "1"


def test_print_is_a_runnable_shell_script(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "data dir"
    assert cli.main(["airflow", "--home", str(home), "--port", "18080"]) == 0
    out = capsys.readouterr().out
    lines = [ln for ln in out.splitlines() if not ln.startswith("#")]
    assert lines[0].startswith("export PATH=") and lines[0].endswith(':"$PATH"')
    assert f"export AIRFLOW_HOME={shlex.quote(str(home / 'airflow'))}" in lines
    assert shlex.split(lines[-1])[1:] == ["standalone"]
    assert "http://localhost:18080" in out
    assert "user admin" in out and "simple_auth_manager_passwords.json.generated" in out


def test_login_reads_the_generated_password(tmp_path: Path) -> None:
    p = airflow_cmd.plan(str(tmp_path))
    p.airflow_home.mkdir(parents=True)
    p.password_file.write_text(json.dumps({"admin": "s3cret"}))
    assert p.login().startswith("user admin, password s3cret")


@pytest.mark.parametrize(
    ("argv", "word"),
    [(["--dags", "/no/such/dir"], "dags folder"), (["--port", "0"], "--port")],
)
def test_bad_options_one_line(
    argv: list[str], word: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["airflow", "--home", str(tmp_path), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert word in err and "\n" not in err


def test_the_password_is_said_once_airflow_wrote_it(tmp_path: Path) -> None:
    """Airflow writes the generated password on its first start and does not print it:
    ``--run`` waits for the file and prints the login line itself."""
    p = airflow_cmd.plan(str(tmp_path))
    p.prepare()
    assert p.password() is None
    now = [0.0]

    def sleep(s: float) -> None:  # Airflow writes the file 3 s after its start
        now[0] += s
        if now[0] >= 3.0:
            p.password_file.write_text(json.dumps({"admin": "s3cret"}))

    line = airflow_cmd.wait_for_password(p, timeout_s=60, clock=lambda: now[0], sleep=sleep)
    assert line is not None and "s3cret" in line
    assert 3.0 <= now[0] < 60


def test_no_password_line_when_airflow_stops_first(tmp_path: Path) -> None:
    p = airflow_cmd.plan(str(tmp_path))
    p.prepare()
    assert airflow_cmd.wait_for_password(p, alive=lambda: False) is None
    assert "--run prints it" in p.login()


def test_run_starts_the_data_dirs_route_host_in_the_environment_airflow_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow (the process ``--run`` supervises) inherits ``$SKEWLAB_ROUTE_HOST`` naming the
    host started for the data dir; the host itself is exercised by the integration tests."""
    import os

    from skewlab.commands.services import route_host_dir
    from skewlab.live.driver.route_host import ROUTE_HOST_ENV, HostDir

    home = tmp_path / "home"
    asked: list[Path] = []

    def start(h: Path) -> tuple[HostDir, bool]:
        asked.append(h)
        d = HostDir(route_host_dir(h))
        monkeypatch.setenv(ROUTE_HOST_ENV, str(d.path))  # as start_route_host does
        return d, True

    envs: list[dict[str, str]] = []

    def supervise(p: airflow_cmd.Plan) -> int:
        envs.append(p.child_env(os.environ))
        return 0

    monkeypatch.delenv(ROUTE_HOST_ENV, raising=False)
    monkeypatch.setattr(airflow_cmd, "start_route_host", start)
    monkeypatch.setattr(airflow_cmd, "_supervise", supervise)
    assert cli.main(["airflow", "--run", "--home", str(home), "--port", "18080"]) == 0
    assert asked == [home.resolve()]
    assert envs[0][ROUTE_HOST_ENV] == str(home.resolve() / "route-host")
