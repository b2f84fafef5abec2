"""The DAG's validate task refuses a run too large for the data dir's disk (issue 37 point 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.errors import ConfigError
from skewlab.live.driver.preflight import bytes_per_event
from skewlab.orchestration.params import check_size, settings_from_params
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events

pytestmark = pytest.mark.unit

GB = 10**9


def test_an_oversized_dag_run_is_refused_naming_the_params_to_lower(tmp_path: Path) -> None:
    s = settings_from_params({"rate": 1e9, "duration": 20}, home=str(tmp_path / "home"))
    assert isinstance(s, ExperimentSettings)
    with pytest.raises(ConfigError) as info:
        check_size(s, free_bytes=lambda p: 50 * GB)
    msg, events = str(info.value), n_events(s.spec.workload)
    assert f"{events:,} events" in msg and "50.0 GB free" in msg and "\n" not in msg
    assert "the params rate, duration or events" in msg
    assert "pass --allow-large" not in msg  # a DAG run has no such flag


def test_a_dag_run_that_fits_passes_with_the_workers_warning(tmp_path: Path) -> None:
    s = settings_from_params({"rate": 1000.0, "duration": 10, "workers": 16}, home=str(tmp_path))
    assert isinstance(s, ExperimentSettings)
    need = n_events(s.spec.workload) * bytes_per_event(s.payload_bytes)
    (warning,) = check_size(s, free_bytes=lambda p: int(need / 0.8) + 1, cores=2)
    assert "16 workers on 2 cores" in warning
    with pytest.raises(ConfigError):
        check_size(s, free_bytes=lambda p: int(need / 0.8) - 1, cores=2)


def test_the_real_disk_is_read_when_no_reader_is_given(tmp_path: Path) -> None:
    s = settings_from_params({"rate": 1e12, "duration": 1000}, home=str(tmp_path))
    with pytest.raises(ConfigError, match="free under"):
        check_size(s)  # 1e15 events: more than any disk
    assert check_size(settings_from_params({"rate": 10.0, "duration": 1}, home=str(tmp_path))) == []
