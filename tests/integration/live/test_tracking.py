"""A live run with ``mlflow=True`` is one MLflow run: params, series, summary, plots.

Read back with ``MlflowClient`` from the SQLite store under the run's home.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from tests.integration.fixtures.live import LIVE_DEFAULTS

from skewlab.live.report.tracking import run_name
from skewlab.metrics import std_dev_pct

pytestmark = pytest.mark.integration

N = LIVE_DEFAULTS["events"]
W = LIVE_DEFAULTS["workers"]


def test_live_run_is_logged_to_mlflow(run_live, tmp_path):
    from mlflow import MlflowClient

    from skewlab.io.tracking import TrackingSettings

    experiment = f"live-test-{uuid.uuid4().hex[:8]}"
    run = run_live("pkg", mlflow=True, quality=True, experiment=experiment)
    s = run.summary
    assert s.exact, s.exactness
    assert s.mlflow_run_id

    ts = TrackingSettings.for_data_dir(Path(run.settings.home))
    assert ts.sqlite_path is not None and ts.sqlite_path.exists()
    client = MlflowClient(tracking_uri=ts.tracking_uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    runs = client.search_runs([exp.experiment_id])
    assert [r.info.run_id for r in runs] == [s.mlflow_run_id]
    mr = client.get_run(s.mlflow_run_id)
    assert mr.info.status == "FINISHED"
    assert mr.info.run_name == run_name(run.run_id)
    assert mr.data.tags["strategy"] == "pkg" and mr.data.tags["exact"] == "true"

    params = mr.data.params
    assert params["strategy"] == "pkg"
    assert params["workers"] == str(W)
    assert params["workload"] == LIVE_DEFAULTS["workload"]
    assert float(params["rate"]) == LIVE_DEFAULTS["rate"]
    assert "run_id" not in params and "home" not in params  # ids and paths are tags
    assert mr.data.tags["skewlab.run_id"] == run.run_id
    assert s.mlflow_url and s.mlflow_url.split("?")[0].endswith(f"/runs/{s.mlflow_run_id}")

    metrics = mr.data.metrics
    assert metrics["events"] == N
    assert metrics["exact"] == 1.0
    assert metrics["quarantined"] == 0
    assert metrics["dist_cost"] == pytest.approx(s.dist_cost)
    assert metrics["std_dev"] == pytest.approx(s.std_dev)
    assert metrics["throughput"] > 0

    # Per-worker loads: one table, a row per (window, worker); series stepped in seconds.
    loads = s.window_loads
    assert len(loads) >= 2
    table = json.loads(
        Path(
            client.download_artifacts(s.mlflow_run_id, "window_loads.json", str(tmp_path))
        ).read_text()
    )
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert len(rows) == len(loads) * len(loads[0])
    assert sum(r["events"] for r in rows) == N  # every event in exactly one (window, worker)
    assert not [m for m in mr.data.metrics if m.startswith("load_w")]
    sd = sorted(client.get_metric_history(s.mlflow_run_id, "window_std_dev"), key=lambda m: m.step)
    assert [m.value for m in sd] == pytest.approx([std_dev_pct(row) for row in loads])
    ends = [ws / 1e3 + s.window_s - s.t_first_s for ws in s.window_starts_ms]
    assert [m.step for m in sd] == [max(0, round(e)) for e in ends]

    # The two plots (at the root, where the compare view finds them) and the summary are
    # artifacts, and the plots are PNG files.
    root = {a.path for a in client.list_artifacts(s.mlflow_run_id)}
    names = {n for n in root if n.endswith(".png")}
    assert names == {"worker_loads.png", "latency_cdf.png"}
    assert "summary.json" in root
    for name in names:
        local = client.download_artifacts(s.mlflow_run_id, name, str(tmp_path))
        assert Path(local).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # The data-quality suites ran inside the experiment and their report is in the run.
    assert s.quality == "passed", s.quality_failures
    assert {"quality/report.json", "quality/report.md"} <= {
        a.path for a in client.list_artifacts(s.mlflow_run_id, "quality")
    }
    mr = client.get_run(s.mlflow_run_id)
    assert mr.data.metrics["quality_ok"] == 1.0 and mr.data.tags["quality"] == "passed"
