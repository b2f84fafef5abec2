"""Tracker against a real MLflow store (SQLite + local artifacts in a temp dir)."""

from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

import pytest

from skewlab.errors import ConfigError
from skewlab.io.tracking import Tracker, TrackingSettings

pytestmark = pytest.mark.integration


def _experiment() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


def test_settings_default_under_data_dir(tmp_path: Path) -> None:
    s = TrackingSettings.for_data_dir(tmp_path)
    assert s.tracking_uri == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert s.artifact_location == str(tmp_path.resolve() / "mlartifacts")
    assert s.sqlite_path == tmp_path.resolve() / "mlflow.db"
    with pytest.raises(ConfigError, match="scheme"):
        TrackingSettings(tracking_uri="ftp://x", data_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="sqlite:///"):
        TrackingSettings(tracking_uri="sqlite://rel.db", data_dir=str(tmp_path))


def test_run_created_with_params_and_tags(tracking: Tracker) -> None:
    exp = _experiment()
    run_id = tracking.start_run(
        exp, "dkg-w8", params={"grouping": "dynamic-key", "workers": 8}, tags={"skew": "zipf"}
    )
    summary = tracking.get_run_summary(run_id)
    assert summary.run_name == "dkg-w8"
    assert summary.status == "RUNNING"
    assert summary.params == {"grouping": "dynamic-key", "workers": "8"}
    assert summary.tags == {"skew": "zipf"}
    assert summary.parent_run_id is None
    assert tracking.experiment_id(exp) == summary.experiment_id  # get, not create again
    exp_obj = tracking.client.get_experiment(summary.experiment_id)
    assert exp_obj.artifact_location.startswith(tracking.settings.artifact_location)
    tracking.set_tags(run_id, {"phase": "done"})
    tracking.end_run(run_id, "FINISHED")
    after = tracking.get_run_summary(run_id)
    assert after.status == "FINISHED"
    assert after.tags["phase"] == "done"
    assert after.end_time_ms is not None


def test_many_params_are_batched(tracking: Tracker) -> None:
    params = {f"p{i:03d}": i for i in range(250)}  # > 100 per log_batch request
    run_id = tracking.start_run(_experiment(), "wide", params=params)
    assert len(tracking.get_run_summary(run_id).params) == 250


def test_series_stored_with_steps(tracking: Tracker) -> None:
    run_id = tracking.start_run(_experiment(), "series")
    values = [i * 0.5 for i in range(2500)]  # > 1000 metrics per log_batch request
    steps = [10 * i for i in range(2500)]
    assert tracking.log_series(run_id, "imbalance", values, steps) == 2500
    history = tracking.client.get_metric_history(run_id, "imbalance")
    assert len(history) == 2500
    assert sorted((m.step, m.value) for m in history) == list(zip(steps, values))
    assert tracking.log_series(run_id, "gaps", [1.0, float("nan"), 3.0]) == 2
    assert tracking.metric_history(run_id, "gaps") == [(0, 1.0), (2, 3.0)]
    tracking.log_metrics(run_id, {"throughput": 1200.0, "std_dev": 3.5}, step=4)
    summary = tracking.get_run_summary(run_id)
    assert summary.metrics["throughput"] == 1200.0
    assert summary.metrics["imbalance"] == values[-1]
    with pytest.raises(ConfigError, match="3 values but 2 steps"):
        tracking.log_series(run_id, "bad", [1, 2, 3], [0, 1])


def test_artifacts_present_on_disk(tracking: Tracker, tmp_path: Path) -> None:
    run_id = tracking.start_run(_experiment(), "artifacts")
    plot = tmp_path / "loads.png"
    plot.write_bytes(b"\x89PNG fake bytes")
    tracking.log_artifact(run_id, plot, artifact_path="plots")
    tracking.log_dict(run_id, {"grouping": "key", "workers": [0, 1]}, "config.json")
    rows = [{"key": "a", "count": 3}, {"key": "b", "count": 1}]
    tracking.log_table(run_id, rows, "tables/loads.csv")
    tracking.log_table(run_id, rows, "loads.json")
    root = tracking.artifact_dir(run_id)
    assert root is not None and root.is_dir()
    assert (root / "plots" / "loads.png").read_bytes() == plot.read_bytes()
    assert json.loads((root / "config.json").read_text()) == {
        "grouping": "key",
        "workers": [0, 1],
    }
    with (root / "tables" / "loads.csv").open() as fh:
        assert list(csv.DictReader(fh)) == [
            {"key": "a", "count": "3"},
            {"key": "b", "count": "1"},
        ]
    table = json.loads((root / "loads.json").read_text())
    assert table["columns"] == ["key", "count"]
    assert table["data"] == [["a", 3], ["b", 1]]
    assert set(tracking.list_artifacts(run_id)) >= {"plots", "config.json", "tables", "loads.json"}
    with pytest.raises(ConfigError, match="does not exist"):
        tracking.log_artifact(run_id, tmp_path / "missing.txt")
    with pytest.raises(ConfigError, match=r"\.csv or \.json"):
        tracking.log_table(run_id, rows, "loads.xlsx")


def test_nested_runs_and_context_manager(tracking: Tracker) -> None:
    exp = _experiment()
    with tracking.run(exp, "sweep", params={"sweep": "workers"}) as parent:
        children = []
        for workers in (2, 4):
            with tracking.run(
                exp, f"w{workers}", params={"workers": workers}, parent_run_id=parent
            ) as child:
                tracking.log_metrics(child, {"imbalance": 10.0 / workers})
                children.append(child)
    assert tracking.child_runs(parent) == children
    for child in children:
        s = tracking.get_run_summary(child)
        assert s.parent_run_id == parent
        assert s.status == "FINISHED"
    assert tracking.get_run_summary(parent).status == "FINISHED"
    with pytest.raises(RuntimeError), tracking.run(exp, "crash") as failed:
        raise RuntimeError("boom")
    assert tracking.get_run_summary(failed).status == "FAILED"


def test_compare_rows_share_columns(tracking: Tracker) -> None:
    exp = _experiment()
    a = tracking.start_run(exp, "key", params={"grouping": "key", "workers": 4})
    b = tracking.start_run(exp, "pkg", params={"grouping": "partial-key", "choices": 2})
    tracking.log_metrics(a, {"imbalance": 42.0})
    tracking.log_metrics(b, {"imbalance": 3.0, "dist_cost": 1.5})
    rows = tracking.compare([a, b])
    assert [r["run_id"] for r in rows] == [a, b]
    assert rows[0].keys() == rows[1].keys()
    assert rows[0]["params.grouping"] == "key" and rows[0]["params.choices"] is None
    assert rows[1]["params.choices"] == "2" and rows[1]["metrics.dist_cost"] == 1.5
    assert rows[0]["metrics.imbalance"] == 42.0 and rows[0]["metrics.dist_cost"] is None
    assert rows[0]["run_name"] == "key" and rows[0]["status"] == "RUNNING"


def test_end_run_rejects_unknown_status(tracking: Tracker) -> None:
    run_id = tracking.start_run(_experiment(), "s")
    with pytest.raises(ConfigError, match="FINISHED, FAILED or KILLED"):
        tracking.end_run(run_id, "DONE")
