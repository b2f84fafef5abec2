"""A live run whose MLflow server is gone: its calls give up within the bound, the run's
summary comes back as usual, and the run dir lists what was not logged.

No server: the run is opened in a SQLite store in the test's tmp dir (so it exists, with
its params), then reached through a tracking URI on a closed loopback port, as a run
whose server was stopped after it started.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

import pytest

from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.live.report.plots import draw
from skewlab.live.report.tracking import (
    CALL_BOUND_S,
    CALL_BOUNDS,
    LOADS_TABLE,
    LiveRun,
    NotLogged,
    bounded_calls,
    open_live_run,
)
from skewlab.rundir import RunDir
from tests.unit.live.report.test_live_tracking import _settings, _summary

pytestmark = pytest.mark.unit


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed: a connection is refused


def _gone(tmp_path: Path, name: str) -> tuple[LiveRun, LiveRun]:
    """The run as opened (SQLite) and the same run seen through a server that is gone."""
    home = tmp_path / "home"
    rd = RunDir.create(home, name)
    opened = open_live_run(_settings(home, 5.0), rd, TrackingSettings.for_data_dir(home))
    down = Tracker(
        TrackingSettings(
            tracking_uri=f"http://127.0.0.1:{_closed_port()}",
            artifact_location=str(tmp_path / "artifacts"),
        )
    )
    return opened, LiveRun(down, opened.mlflow_run_id, opened.experiment_id, rd)


def test_finish_gives_up_within_the_bound_and_lists_what_it_did_not_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    opened, run = _gone(tmp_path, "run-down")
    summary = _summary("run-down", 5.0)
    summary.plots = draw(summary, run.run_dir.path)
    assert summary.plots
    assert not run.progress(0.5, 10, 10, 5)  # fails: the next points are not tried
    assert not run.progress(1.5, 20, 20, 15)
    caplog.clear()
    t0 = time.monotonic()
    with caplog.at_level(logging.WARNING):
        out = run.finish(summary)
    took = time.monotonic() - t0

    missed = NotLogged.load(run.run_dir)
    assert missed is not None and out is summary
    assert summary.mlflow_run_id == opened.mlflow_run_id  # the run is named all the same
    tried = missed.failures
    assert [f["call"] for f in tried] == ["progress step 0", "get_run"]
    assert all(f["seconds"] <= CALL_BOUND_S for f in tried)
    assert took <= CALL_BOUND_S  # one call tried; the rest skipped untried
    assert missed.progress_steps == [0, 1]
    assert {"events", "throughput", "p99_ms", "exact"} <= set(missed.metrics)
    assert {"window_std_dev", "window_p99_ms"} <= set(missed.series)
    plots = [Path(p).name for p in summary.plots]
    assert missed.artifacts == [LOADS_TABLE, *plots, "summary.json"]
    assert missed.tags == ["exact"] and missed.status == "FINISHED"
    assert missed.params == []  # logged when the run opened, before the server went
    ours = [r for r in caplog.records if r.name == "skewlab.live.report.tracking"]
    assert [r.levelno for r in ours] == [logging.WARNING]  # one line, from finish
    assert opened.status == "RUNNING"  # nothing reached the store


def test_a_server_gone_mid_summary_lists_only_the_calls_after_it(tmp_path: Path) -> None:
    opened, run = _gone(tmp_path, "run-mid")
    summary = _summary("run-mid", 5.0)
    run.tracker.client.get_run = opened.tracker.client.get_run  # type: ignore[method-assign]
    run.finish(summary)  # get_run answers (the run is open), the first log call fails
    missed = NotLogged.load(run.run_dir)
    assert missed is not None
    assert [f["call"] for f in missed.failures] == ["metrics"]
    assert missed.status == "FINISHED" and "summary.json" in missed.artifacts


def test_fail_on_a_gone_server_records_the_status_and_never_raises(tmp_path: Path) -> None:
    _, run = _gone(tmp_path, "run-fail")
    assert not run.fail("route job exited 1")
    missed = NotLogged.load(run.run_dir)
    assert missed is not None and missed.status == "FAILED"
    assert len(missed.failures) == 1


def test_a_run_that_logged_everything_has_no_record(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rd = RunDir.create(home, "run-ok")
    run = open_live_run(_settings(home, 5.0), rd, TrackingSettings.for_data_dir(home))
    run.finish(_summary("run-ok", 5.0))
    assert run.status == "FINISHED" and NotLogged.load(rd) is None


def test_the_bounds_hold_only_inside_and_a_users_setting_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k in CALL_BOUNDS:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with bounded_calls(), bounded_calls():
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == str(
            CALL_BOUNDS["MLFLOW_HTTP_REQUEST_TIMEOUT"]
        )
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "0"


def test_a_server_down_at_the_start_fails_the_open_within_the_bound(tmp_path: Path) -> None:
    from mlflow.exceptions import MlflowException

    down = Tracker(
        TrackingSettings(
            tracking_uri=f"http://127.0.0.1:{_closed_port()}",
            artifact_location=str(tmp_path / "artifacts"),
        )
    )
    rd = RunDir.create(tmp_path / "home", "run-start")
    t0 = time.monotonic()
    with pytest.raises(MlflowException):
        LiveRun.open(down, "mlflow-test", rd, {"workers": 3}, {})
    assert time.monotonic() - t0 <= CALL_BOUND_S  # the first call fails, nothing else waits
    assert not rd.mlflow_run.exists()


def test_an_autoscale_summary_is_recorded_not_raised_when_the_server_is_gone(
    tmp_path: Path,
) -> None:
    from skewlab.live.autoscale.summary import AutoscaleSummary

    opened, run = _gone(tmp_path, "autoscale-down")
    decisions = [
        {"iteration": i, "consumers": c, "rscore": 0.5, "decide_ms": 1.0, "manage_s": 0.2,
         "moved": []}
        for i, c in enumerate((1, 2, 1))
    ]  # fmt: skip
    samples = [{"iteration": i, "lag": 10.0 * i, "consumers": 1.0} for i in range(3)]
    summary = AutoscaleSummary(
        run_id="autoscale-down", algorithm="bfd", workload="ramp", records=300, exact=True,
        exactness="EXACT", overlaps=0, latency={"p50": 1.0, "p99": 2.0}, decisions=decisions,
        samples=samples, downtime=[], iteration_s=1.0, wall_s=3.0,
        run_dir=str(run.run_dir.path),
    )  # fmt: skip
    out = run.finish(summary)  # before: the first refused call raised out of the run

    missed = NotLogged.load(run.run_dir)
    assert out is summary and summary.mlflow_run_id == opened.mlflow_run_id
    assert missed is not None and [f["call"] for f in missed.failures] == ["get_run"]
    assert {"records", "overlaps"} <= set(missed.metrics)
    assert missed.series == [
        "consumers",
        "rscore",
        "decide_ms",
        "manage_s",
        "lag",
        "live_consumers",
    ]
    assert missed.artifacts == ["summary.json"] and missed.tags == ["exact"]
    assert missed.status == "FINISHED"
