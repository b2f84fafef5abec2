"""``skewlab airflow``: what it generates keeps Airflow on loopback and its secrets private."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from skewlab import cli
from skewlab.commands import airflow as airflow_cmd

pytestmark = pytest.mark.unit


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def fake_airflow(tmp_path: Path) -> Path:
    """An ``airflow`` that prints its argv as JSON (stands in for the real one)."""
    fake = tmp_path / "real" / "airflow"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    fake.chmod(0o755)
    return fake


def test_generated_env_binds_loopback_and_puts_the_wrapper_first(tmp_path: Path) -> None:
    p = airflow_cmd.plan(str(tmp_path))
    assert p.env["AIRFLOW__API__HOST"] == "127.0.0.1"
    assert p.env["AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_SERVER_HOST"] == "127.0.0.1"
    env = p.child_env({"PATH": "/usr/bin"})
    assert env["PATH"].split(os.pathsep)[0] == str(p.wrapper_dir)
    assert Path(env[airflow_cmd.REAL_AIRFLOW_ENV]).name == "airflow"
    assert not p.airflow_home.exists()  # plan() writes nothing


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["scheduler"], ["scheduler", "--skip-serve-logs"]),
        (["triggerer"], ["triggerer", "--skip-serve-logs"]),
        (["api-server"], ["api-server"]),
        (["dag-processor"], ["dag-processor"]),
        (["db", "migrate"], ["db", "migrate"]),
    ],
)
def test_components_started_through_path_serve_no_logs(
    tmp_path: Path, argv: list[str], expected: list[str]
) -> None:
    real = fake_airflow(tmp_path)
    p = airflow_cmd.plan(str(tmp_path), airflow_bin=str(real))
    p.prepare()
    env = p.child_env({"PATH": os.environ.get("PATH", "")})
    # standalone runs ``airflow <component>`` found on PATH: the wrapper, then the real one
    out = subprocess.run(["airflow", *argv], env=env, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == expected


def test_serve_logs_setting_keeps_airflows_log_servers(tmp_path: Path) -> None:
    real = fake_airflow(tmp_path)
    p = airflow_cmd.plan(str(tmp_path), airflow_bin=str(real), serve_logs=True)
    p.prepare()
    assert p.bin_dir == str(real.parent) and not p.wrapper_dir.exists()
    env = p.child_env({"PATH": os.environ.get("PATH", "")})
    out = subprocess.run(["airflow", "scheduler"], env=env, capture_output=True, text=True)
    assert json.loads(out.stdout) == ["scheduler"]


def test_prepare_makes_the_home_and_the_password_file_private(tmp_path: Path) -> None:
    p = airflow_cmd.plan(str(tmp_path))
    p.prepare()
    assert mode(p.airflow_home) == 0o700
    assert mode(p.password_file) == 0o600 and p.password_file.read_text() == ""
    assert p.login().startswith("user admin, password generated on the first start")


def test_prepare_tightens_an_existing_world_readable_password_file_and_config(
    tmp_path: Path,
) -> None:
    p = airflow_cmd.plan(str(tmp_path))
    p.airflow_home.mkdir(parents=True)
    p.airflow_home.chmod(0o755)
    p.password_file.write_text(json.dumps({"admin": "s3cret"}))
    p.password_file.chmod(0o644)
    cfg = p.airflow_home / "airflow.cfg"
    cfg.write_text("[api_auth]\njwt_secret = x\n")
    cfg.chmod(0o644)
    p.prepare()
    assert (mode(p.airflow_home), mode(p.password_file), mode(cfg)) == (0o700, 0o600, 0o600)
    assert p.login().startswith("user admin, password s3cret")  # content kept


def test_printing_the_commands_prepares_the_home_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["airflow", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    home = tmp_path / "airflow"
    assert mode(home) == 0o700
    assert mode(home / airflow_cmd.PASSWORD_FILE) == 0o600
    assert f"export {airflow_cmd.REAL_AIRFLOW_ENV}=" in out


def test_the_real_scheduler_and_triggerer_accept_the_flag_the_wrapper_adds() -> None:
    airflow = Path(sys.executable).with_name("airflow")
    for component in airflow_cmd.NO_SERVE_LOGS:
        out = subprocess.run(
            [str(airflow), component, "--help"], capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0 and "--skip-serve-logs" in out.stdout


def test_the_real_airflow_reads_the_parse_timeouts(tmp_path: Path) -> None:
    """A DAG file that takes longer than Airflow's 30 s to import on a busy machine must
    not vanish: the real config, read with the plan's environment, has the longer limits."""
    p = airflow_cmd.plan(str(tmp_path))
    env = p.child_env(os.environ)
    airflow = Path(sys.executable).with_name("airflow")
    got = {}
    for section, key in (
        ("core", "dagbag_import_timeout"),
        ("dag_processor", "dag_file_processor_timeout"),
        ("dag_processor", "min_file_process_interval"),
    ):
        out = subprocess.run(
            [str(airflow), "config", "get-value", section, key],
            capture_output=True, text=True, timeout=180, env=env, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-500:]
        got[key] = float(out.stdout.strip().splitlines()[-1])
    assert got["dagbag_import_timeout"] >= 120 > 30
    assert got["dag_file_processor_timeout"] > got["dagbag_import_timeout"]
    assert got["min_file_process_interval"] >= 60
