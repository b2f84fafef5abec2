"""End to end through the Airflow REST API: trigger ``skewlab_experiment``, find its MLflow run.

A real ``airflow standalone`` (the ``airflow_server`` fixture, started as
``skewlab airflow --run`` starts it) runs the DAG with its scheduler and
LocalExecutor; the experiment task starts the embedded broker, the Spark route
job and the workers under the fixture's data dir. The test only speaks HTTP to
Airflow (``/auth/token``, ``/api/v2``) and reads MLflow's store in that data dir.
"""

from __future__ import annotations

import pytest

from tests.dags.test_dag_integrity import EXPERIMENT_TASKS
from tests.integration.fixtures.airflow import EXPERIMENT_DAG, AirflowApi

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SMALL = {
    "strategy": "key",
    "workers": 2,
    "partitions": 2,
    "workload": "zipf",
    "zipf_s": 1.1,
    "rate": 2000,
    "duration": 5,
    "window": 2.0,
    "seed": 11,
}
"""10,000 events: about a minute of task time on 2 cores (Spark's start dominates)."""


def test_rest_trigger_runs_the_experiment_into_mlflow(airflow_api: AirflowApi) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings

    airflow_api.unpause(EXPERIMENT_DAG)
    run_id = airflow_api.trigger(EXPERIMENT_DAG, SMALL)
    state = airflow_api.wait_run(EXPERIMENT_DAG, run_id)
    states = airflow_api.task_states(EXPERIMENT_DAG, run_id)
    assert state == "success", f"run {run_id}: {states}"
    assert states == dict.fromkeys(EXPERIMENT_TASKS, "success")
    conf = airflow_api.get(f"/dags/{EXPERIMENT_DAG}/dagRuns/{run_id}")["conf"]
    assert conf == SMALL

    rid = airflow_api.xcom(EXPERIMENT_DAG, run_id, "record_result", "mlflow_run_id")
    assert isinstance(rid, str) and rid
    assert airflow_api.xcom(EXPERIMENT_DAG, run_id, "record_result", "exact") is True

    tracker = Tracker(TrackingSettings.for_data_dir(airflow_api.server.home))
    run = tracker.get_run_summary(rid)
    assert run.status == "FINISHED"
    assert run.params["strategy"] == "key" and run.params["workers"] == "2"
    assert run.tags["airflow.dag_id"] == EXPERIMENT_DAG and run.tags["airflow.run_id"] == run_id
    assert run.metrics["exact"] == 1.0 and run.metrics["events"] == 10_000
    for name in ("throughput", "imb_score", "std_dev", "p99_ms"):
        assert name in run.metrics, f"metric {name} missing from MLflow run {rid}"
