"""A live run's MLflow run, against real MLflow (a SQLite store in the test's tmp dir).

The runs are fed made-up summaries (the live stack itself is exercised by
tests/integration/live/test_tracking.py); what is checked is where each
thing lands in MLflow and what the compare view gets to line up.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab.io.tracking import TrackingError, TrackingSettings
from skewlab.live.report.plots import draw
from skewlab.live.report.summary import RunSummary
from skewlab.live.report.tracking import LOADS_TABLE, LiveRun, fail_run, log_run, open_live_run
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0
"""First produced event (a multiple of 5 s and 15 s: windows start exactly there)."""
RATE = np.array([40, 10, 70, 20, 30, 60, 50, 80, 90, 10, 20, 30, 40, 50, 60] * 2)
"""Events per second of event time over 30 s, split over 3 workers below."""
SHARE = np.array([0.5, 0.3, 0.2])


def _settings(home: Path, window_s: float, strategy: str = "dkg") -> ExperimentSettings:
    return ExperimentSettings(
        strategy=strategy, workers=3, window_s=window_s, home=str(home), experiment="mlflow-test"
    )


def _summary(
    run_id: str, window_s: float, *, exact: bool = True, t_first: float = T0
) -> RunSummary:
    """A summary of 30 s at :data:`RATE` in windows of ``window_s`` from ``t_first``."""
    per_s = int(window_s)
    starts = [round((t_first + i) * 1000) for i in range(0, len(RATE), per_s)]
    per_window = RATE.reshape(-1, per_s).sum(axis=1)
    loads = np.rint(np.outer(per_window, SHARE)).astype(int)
    n = int(loads.sum())
    lat = np.sort(np.random.default_rng(1).gamma(2.0, 40.0, 500))
    return RunSummary(
        run_id=run_id,
        strategy="dkg",
        workers=3,
        events=n,
        quarantined=0,
        produce_rate=n / 30,
        throughput=n / 30,
        std_dev=12.0,
        dist_cost=1.5,
        imb_score=20.0,
        p50_ms=float(np.median(lat)),
        p90_ms=float(np.percentile(lat, 90)),
        p99_ms=float(np.percentile(lat, 99)),
        max_ms=float(lat.max()),
        exact=exact,
        exactness="EXACT" if exact else "NOT EXACT: 3 windows differ",
        wall_s=40.0,
        window_s=window_s,
        t_first_s=t_first,
        backlog_max=1234.0,
        backlog_at_s=3.5,
        window_starts_ms=starts,
        window_loads=loads.tolist(),
        window_latency_ms=[(50.0 + i, 90.0 + i) for i in range(len(starts))],
        latency_values_ms=lat.tolist(),
        latency_frac=(np.arange(1, lat.size + 1) / lat.size).tolist(),
    )


def _finished(
    tmp_path: Path,
    name: str,
    window_s: float,
    first_after_s: float = 0.0,
    startup_s: dict[str, float] | None = None,
    **kw: Any,
) -> tuple[LiveRun, RunSummary]:
    """A finished run; its first event ``first_after_s`` after its first window's start."""
    home = tmp_path / "home"
    s = _settings(home, window_s)
    rd = RunDir.create(home, name)
    run = open_live_run(s, rd, TrackingSettings.for_data_dir(home))
    summary = _summary(name, window_s, **kw)
    summary.t_first_s += first_after_s
    summary.startup_s = startup_s or {}
    summary.plots = draw(summary, rd.path)
    run.finish(summary)
    return run, summary


def _history(run: LiveRun, metric: str) -> list[tuple[int, float]]:
    return run.tracker.metric_history(run.mlflow_run_id, metric)


def _table(run: LiveRun, name: str) -> list[dict[str, Any]]:
    folder = run.tracker.artifact_dir(run.mlflow_run_id)
    assert folder is not None
    table = json.loads((folder / name).read_text())
    return [dict(zip(table["columns"], row)) for row in table["data"]]


def test_params_are_the_settings_and_ids_are_tags(tmp_path: Path) -> None:
    run, summary = _finished(tmp_path, "run-20261124-a", 5.0, startup_s={"route": 14.2})
    mr = run.tracker.client.get_run(run.mlflow_run_id)
    assert mr.data.metrics["startup_route_s"] == 14.2  # start-up is its own figure
    assert mr.data.metrics["backlog_max"] == summary.backlog_max
    params, tags = mr.data.params, mr.data.tags
    assert params["strategy"] == "dkg" and float(params["window_s"]) == 5.0
    assert params["workers"] == "3"
    for name, value in params.items():
        assert "run-20261124-a" not in value, name
        assert str(tmp_path) not in value, name  # no paths (home, run dir) either
    assert "run_id" not in params
    assert tags["skewlab.run_id"] == "run-20261124-a"
    assert tags["skewlab.run_dir"] == str(RunDir.at(tmp_path / "home", "run-20261124-a").path)
    assert tags["strategy"] == "dkg" and tags["exact"] == "true"
    assert summary.mlflow_run_id == run.mlflow_run_id
    assert summary.mlflow_url is not None
    assert summary.mlflow_url.endswith(
        f"/#/experiments/{mr.info.experiment_id}/runs/{mr.info.run_id}?workflowType=machine_learning"
    )


def test_per_worker_loads_are_one_table_with_a_row_per_worker_and_window(tmp_path: Path) -> None:
    run, summary = _finished(tmp_path, "run-table", 5.0)
    metrics = run.tracker.client.get_run(run.mlflow_run_id).data.metrics
    assert not [m for m in metrics if m.startswith("load_w")]
    rows = _table(run, LOADS_TABLE)
    loads = np.asarray(summary.window_loads)
    assert len(rows) == loads.size == len(summary.window_starts_ms) * 3
    cells = {(r["window_start_ms"], r["worker"]): r["events"] for r in rows}
    assert len(cells) == len(rows)  # one row per (window, worker)
    for i, ws in enumerate(summary.window_starts_ms):
        for w in range(3):
            assert cells[(ws, w)] == loads[i, w]
    assert sum(r["events"] for r in rows) == summary.events


def test_series_are_stepped_in_seconds_and_windows_of_5_and_15_s_line_up(tmp_path: Path) -> None:
    fine, _ = _finished(tmp_path, "run-w5", 5.0)
    coarse, _ = _finished(tmp_path, "run-w15", 15.0)
    tp5 = dict(_history(fine, "window_throughput"))
    tp15 = dict(_history(coarse, "window_throughput"))
    # Steps are each window's end in seconds since the first event: 5, 10, ... and 15, 30.
    assert sorted(tp5) == [5, 10, 15, 20, 25, 30]
    assert sorted(tp15) == [15, 30]
    # The same stream: a 15 s window's rate is the mean of the three 5 s windows ending
    # at or before its step and after the one before (both read off one step axis).
    for end in (15, 30):
        parts = [tp5[s] for s in tp5 if end - 15 < s <= end]
        assert tp15[end] == pytest.approx(np.mean(parts), rel=0.02)
    table = _table(coarse, LOADS_TABLE)
    assert {r["step"] for r in table} == {15, 30}


def test_steps_start_at_the_first_event_when_a_window_began_before_it(tmp_path: Path) -> None:
    run, _ = _finished(tmp_path, "run-late", 5.0, first_after_s=3.0)
    steps = [s for s, _ in _history(run, "window_std_dev")]
    # The first window began 3 s before the first event: it ends 2 s after it.
    assert steps == [2, 7, 12, 17, 22, 27]
    rows = _table(run, LOADS_TABLE)
    assert min(r["t_s"] for r in rows) == pytest.approx(-3.0)


def test_plots_have_the_same_artifact_names_in_every_run(tmp_path: Path) -> None:
    a, _ = _finished(tmp_path, "run-pa", 5.0)
    b, _ = _finished(tmp_path, "run-pb", 15.0)
    # At the root of the artifacts: MLflow's compare view offers only the root's files.
    names_a = {n for n in a.tracker.list_artifacts(a.mlflow_run_id) if n.endswith(".png")}
    names_b = {n for n in b.tracker.list_artifacts(b.mlflow_run_id) if n.endswith(".png")}
    assert names_a == names_b == {"worker_loads.png", "latency_cdf.png"}
    folder = a.tracker.artifact_dir(a.mlflow_run_id)
    assert folder is not None
    for name in names_a:
        assert (folder / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_run_is_open_while_it_goes_and_keeps_its_progress(tmp_path: Path) -> None:
    home = tmp_path / "home"
    s = _settings(home, 5.0)
    rd = RunDir.create(home, "run-live")
    run = open_live_run(s, rd, TrackingSettings.for_data_dir(home))
    assert run.status == "RUNNING"
    assert run.progress(0.4, produced=500, routed=200, processed=0, lag=500)
    assert not run.progress(0.9, produced=900, routed=400, processed=100, lag=800)  # same second
    # Another process (the DAG's next task) attaches through the run dir and goes on.
    other = LiveRun.attach(rd.path)
    assert other.mlflow_run_id == run.mlflow_run_id and other.url == run.url
    assert other.progress(1.2, produced=1500, routed=1400, processed=1000, lag=None)
    assert other.progress(2.0, produced=2500, routed=2500, processed=2400, lag=100)
    assert LiveRun.attach(rd).status == "RUNNING"
    summary = _summary("run-live", 5.0)
    run.finish(summary)
    info = run.tracker.client.get_run(run.mlflow_run_id).info
    assert info.status == "FINISHED"
    assert _history(run, "backlog") == [(0, 500.0), (1, 500.0), (2, 100.0)]
    assert [s for s, _ in _history(run, "processed")] == [0, 1, 2]
    points = run.tracker.client.get_metric_history(run.mlflow_run_id, "produced")
    assert all(p.timestamp <= info.end_time for p in points)
    assert info.start_time <= min(p.timestamp for p in points)


def test_fail_ends_the_run_failed_with_its_reason(tmp_path: Path) -> None:
    home = tmp_path / "home"
    rd = RunDir.create(home, "run-fail")
    run = open_live_run(_settings(home, 5.0), rd, TrackingSettings.for_data_dir(home))
    assert fail_run(rd.path, "route job exited 1 (log: route.log)")
    mr = run.tracker.client.get_run(run.mlflow_run_id)
    assert mr.info.status == "FAILED"
    assert mr.data.tags["skewlab.failure"] == "route job exited 1 (log: route.log)"
    assert not run.fail("second call")  # already ended: nothing changes
    assert run.tracker.client.get_run(run.mlflow_run_id).data.tags["skewlab.failure"] == (
        "route job exited 1 (log: route.log)"
    )


def test_a_run_that_is_not_exact_ends_failed(tmp_path: Path) -> None:
    run, _ = _finished(tmp_path, "run-inexact", 5.0, exact=False)
    mr = run.tracker.client.get_run(run.mlflow_run_id)
    assert mr.info.status == "FAILED"
    assert mr.data.tags["exact"] == "false"
    assert "3 windows differ" in mr.data.tags["skewlab.failure"]


def test_attach_without_an_open_run_says_so(tmp_path: Path) -> None:
    rd = RunDir.create(tmp_path, "run-none")
    assert LiveRun.find(rd) is None
    assert not fail_run(rd, "nothing to fail")
    with pytest.raises(TrackingError, match="no open MLflow run"):
        LiveRun.attach(rd)
    rd.mlflow_run.write_text("{not json")
    with pytest.raises(TrackingError, match="unreadable"):
        LiveRun.attach(rd)
    assert not fail_run(rd, "a clean-up path never raises")


def test_log_run_logs_into_the_open_run_or_opens_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    home = tmp_path / "home"
    s = _settings(home, 5.0)
    rd = RunDir.create(home, "run-open")
    opened = open_live_run(s, rd)
    done = log_run(_summary("run-open", 5.0), s, home)
    assert done.mlflow_run_id == opened.mlflow_run_id
    assert opened.status == "FINISHED"
    RunDir.create(home, "run-late-open")
    late = log_run(_summary("run-late-open", 5.0), s, home)
    assert late.mlflow_run_id not in (None, opened.mlflow_run_id)
    assert LiveRun.attach(RunDir.at(home, "run-late-open")).status == "FINISHED"
