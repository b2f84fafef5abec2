"""``skewlab_reproduce``: its shape and form (DagBag, no DB) and one tiny reproduction with
``dag.test()`` into a real MLflow store under a tmp ``$SKEWLAB_HOME``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from skewlab.experiments.reproduce import MLFLOW_EXPERIMENT, REPRODUCE_SCALES

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


@pytest.mark.unit
def test_reproduce_dag_shape(dagbag: Any) -> None:
    dag = dagbag.dags["skewlab_reproduce"]
    assert dag.schedule is None and dag.max_active_runs == 1
    assert {t.task_id for t in dag.tasks} == {"plan", "reproduce"}
    assert dag.get_task("plan").downstream_task_ids == {"reproduce"}
    assert {"skewlab", "reproduce"} <= set(dag.tags)


@pytest.mark.unit
def test_reproduce_dag_params_form(dagbag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    params = dagbag.dags["skewlab_reproduce"].params
    params.validate()
    assert params.get_param("experiments").resolve(["autoscale-latency"]) == ["autoscale-latency"]
    assert set(params.get_param("experiments").schema["items"]["enum"]) == set(REPRODUCE_SCALES)
    for name, bad in {"experiments": ["nope"], "scale": 0, "seed": "x"}.items():
        with pytest.raises(ParamValidationError):
            params.get_param(name).resolve(bad)
    with pytest.raises(ParamValidationError):
        params.get_param("scale").resolve(1.5)


@pytest.mark.integration
def test_tiny_reproduction_end_to_end(
    airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path / "skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    bag = DagBag(dag_folder=str(DAGS_DIR))
    conf = {"experiments": ["autoscale-latency"], "scale": 0.1, "seed": 2}
    dag_run = bag.dags["skewlab_reproduce"].test(run_conf=conf)

    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states == {"plan": "success", "reproduce": "success"}, states
    reports = list((home / "runs").glob("reproduce-*/reproduce.md"))
    assert len(reports) == 1
    table = [ln for ln in reports[0].read_text().splitlines() if ln.startswith("| autoscaling")]
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    exp = tracker.client.get_experiment_by_name(MLFLOW_EXPERIMENT)
    assert exp is not None
    parents = [
        r
        for r in tracker.client.search_runs([exp.experiment_id])
        if "mlflow.parentRunId" not in r.data.tags
    ]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    assert parents[0].data.tags["airflow.run_id"] == dag_run.run_id
    assert parents[0].data.metrics["claims"] == len(table)
    children = tracker.child_runs(parents[0].info.run_id)
    assert len(children) == 1
    child = tracker.client.get_run(children[0])
    assert child.data.params["seed"] == "2" and child.data.params["scale"] == "0.1"
    assert "claims.csv" in tracker.list_artifacts(children[0])
