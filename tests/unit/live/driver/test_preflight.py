"""A run's size is checked before any service starts: disk for its events, cores for its workers."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab import cli
from skewlab.errors import ConfigError
from skewlab.live.driver.preflight import bytes_per_event, check_run_size
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events

pytestmark = pytest.mark.unit

GB = 10**9


def settings(tmp_path: Path, **kw: object) -> ExperimentSettings:
    return ExperimentSettings(home=str(tmp_path / "home"), **kw)  # type: ignore[arg-type]


def test_a_run_larger_than_the_free_disk_is_refused_with_its_numbers(tmp_path: Path) -> None:
    s = settings(tmp_path, rate=1e9, duration_s=20)
    with pytest.raises(ConfigError) as info:
        check_run_size(s, free_bytes=lambda p: 50 * GB)
    msg = str(info.value)
    assert f"{n_events(s.spec.workload):,} events" in msg and "50.0 GB free" in msg
    assert "--allow-large" in msg and "\n" not in msg
    need = n_events(s.spec.workload) * bytes_per_event(s.payload_bytes)
    assert need > 0.8 * 50 * GB
    assert check_run_size(s, allow_large=True, free_bytes=lambda p: 50 * GB) == []


def test_a_run_that_fits_passes_and_the_bound_is_the_disk_share(tmp_path: Path) -> None:
    s = settings(tmp_path, rate=1000.0, duration_s=10)
    need = n_events(s.spec.workload) * bytes_per_event(s.payload_bytes)
    assert check_run_size(s, free_bytes=lambda p: int(need / 0.8) + 1) == []
    with pytest.raises(ConfigError):
        check_run_size(s, free_bytes=lambda p: int(need / 0.8) - 1)


def test_free_space_is_read_where_the_data_dir_will_be(tmp_path: Path) -> None:
    seen: list[Path] = []
    check_run_size(settings(tmp_path), free_bytes=lambda p: seen.append(p) or 10**15)
    assert seen == [tmp_path]  # home does not exist yet: its nearest existing parent


def test_more_workers_than_the_cores_hold_is_a_warning(tmp_path: Path) -> None:
    s = settings(tmp_path, workers=64)
    (warning,) = check_run_size(s, free_bytes=lambda p: 10**15, cores=2)
    assert "64 workers on 2 cores" in warning
    assert check_run_size(settings(tmp_path, workers=8), free_bytes=lambda p: 10**15, cores=2) == []


def test_the_cli_refuses_before_any_service_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    code = cli.main(["run", "--rate", "1e9", "--duration", "20", "--home", str(home)])
    err = capsys.readouterr().err
    assert code == 2
    assert "--allow-large" in err and len(err.strip().splitlines()) == 1
    assert not (home / "broker").exists() and not (home / "runs").exists()
