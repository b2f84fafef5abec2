"""``skewlab_advise``: its shape and form (DagBag, no DB), one small advice with ``dag.test()``
into a real MLflow store under a tmp ``$SKEWLAB_HOME``, and one with ``verify`` on (two small
live runs: embedded broker, Spark route job, workers, Delta; 15 min at load 20-37 on 2 cores)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"


@pytest.mark.unit
def test_advise_dag_shape(dagbag: Any) -> None:
    dag = dagbag.dags["skewlab_advise"]
    assert dag.schedule is None
    assert {t.task_id for t in dag.tasks} == {"plan", "advise"}
    assert dag.get_task("plan").downstream_task_ids == {"advise"}
    assert {"skewlab", "advise"} <= set(dag.tags)


@pytest.mark.unit
def test_advise_form_refuses_values_outside_the_flags_bounds(dagbag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from skewlab.advise import TRACE_FORMATS

    params = dagbag.dags["skewlab_advise"].params
    params.validate()
    assert params.get_param("format").schema["enum"] == list(TRACE_FORMATS)
    assert params.get_param("verify").resolve(True) is True
    for name, bad in {"workers": 0, "service_us": 0, "rate": -1, "records": 0, "slack": -0.5,
                      "format": "xml", "verify": "yes", "verify_events": 0}.items():  # fmt: skip
        with pytest.raises(ParamValidationError):
            params.get_param(name).resolve(bad)


@pytest.mark.unit
def test_the_form_and_the_command_take_the_same_settings() -> None:
    from skewlab.commands.advise import PARAMS, AdviseSettings
    from skewlab.errors import ConfigError

    with pytest.raises(ConfigError):  # no input at all
        AdviseSettings.from_params({k: v["default"] for k, v in PARAMS.items()})
    with pytest.raises(ConfigError):
        AdviseSettings.from_params({"workers": 4, "topic": "t"})  # no bootstrap
    with pytest.raises(ConfigError):
        AdviseSettings.from_params({"workers": 4, "verify_rate": 500})  # not a form field


@pytest.mark.unit
def test_the_forms_verify_switch(tmp_path: Path) -> None:
    from skewlab.commands.advise import DEFAULT_VERIFY_EVENTS, PARAMS, AdviseSettings
    from skewlab.errors import ConfigError

    trace = tmp_path / "t.csv"
    trace.write_text("key\nk\n")
    form = {k: v["default"] for k, v in PARAMS.items()} | {"trace": str(trace)}
    off = AdviseSettings.from_params(form)
    assert (off.verify, off.verify_events) == (False, DEFAULT_VERIFY_EVENTS)
    on = AdviseSettings.from_params(form | {"verify": True, "verify_events": 3000})
    assert (on.verify, on.verify_events) == (True, 3000)
    assert AdviseSettings.from_params({"workers": 2, "trace": str(trace)}).verify is False
    bads = [
        ({"verify": "yes"}, "verify must be true or false, got 'yes'"),
        ({"verify": 1}, "verify must be true or false, got 1"),
        ({"verify_events": 0}, "verify_events must be an integer >= 1, got 0"),
        ({"verify_events": True}, "verify_events must be an integer >= 1"),
    ]
    for bad, said in bads:
        with pytest.raises(ConfigError) as err:
            AdviseSettings.from_params(form | bad)
        assert said in str(err.value) and "\n" not in str(err.value)


@pytest.mark.integration
def test_small_advice_end_to_end(
    airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path / "skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    trace = tmp_path / "t.csv"
    trace.write_text(
        "key\n" + "".join(f"{'hot' if i % 2 else f'k{i % 97}'}\n" for i in range(3000))
    )
    bag = DagBag(dag_folder=str(DAGS_DIR))
    conf = {"trace": str(trace), "workers": 4}
    dag_run = bag.dags["skewlab_advise"].test(run_conf=conf)

    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states == {"plan": "success", "advise": "success"}, states
    (advice,) = list((home / "runs").glob("advise-*/advice.json"))
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    exp = tracker.client.get_experiment_by_name("skewlab-advise")
    assert exp is not None
    (run,) = tracker.client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["airflow.run_id"] == dag_run.run_id
    assert run.data.tags["recommended"] in advice.read_text()


@pytest.mark.integration
def test_verify_from_the_form_runs_both_strategies_live_and_records_the_comparison(
    airflow_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route_host: Path
) -> None:
    # verify on: the DAG's advise task runs the recommendation and KEY grouping live on the
    # trace (embedded broker, Spark route job, workers, Delta under a tmp $SKEWLAB_HOME),
    # returns the simulator-vs-live records and logs them to the advice's MLflow run
    from airflow.dag_processing.dagbag import DagBag
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    from skewlab.io.tracking import Tracker, TrackingSettings
    from skewlab.services import get_service

    home = tmp_path / "skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("SKEWLAB_KAFKA_BOOTSTRAP", raising=False)
    trace = tmp_path / "t.csv"  # a hot key with 70 % of the events: KEY overloads a worker
    trace.write_text("key\n" + "".join(f"{'hot' if i % 10 < 7 else f'k{i % 89}'}\n"
                                       for i in range(3000)))  # fmt: skip
    bag = DagBag(dag_folder=str(DAGS_DIR))
    conf = {"trace": str(trace), "workers": 2, "verify": True, "verify_events": 3000}
    try:
        dag_run = bag.dags["skewlab_advise"].test(run_conf=conf)
    finally:
        get_service("broker", home).stop()

    states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    assert states == {"plan": "success", "advise": "success"}, states
    with create_session() as session:
        query = XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id,
                                   task_ids="advise", key="return_value")  # fmt: skip
        row = session.scalars(query).first()
        assert row is not None
        out = XComModel.deserialize_value(row)
    recommended = out["recommended"]
    assert recommended != "key"
    by = {(r["strategy"], r["metric"]): r for r in out["verify"]}
    assert {s for s, _ in by} == {"key", recommended}
    assert {m for _, m in by} == {"imbalance", "dist_cost", "p99_ms", "keys_moved_min"}
    # both live runs consumed the trace's 3,000 events exactly once
    runs = {r["run_id"] for r in out["verify"]}
    assert len(runs) == 2
    for run_id in runs:
        handle = json.loads((home / "runs" / run_id / "handle.json").read_text())
        assert handle["exactness"]["expected_events"] == 3000
        assert handle["exactness"]["lost"] == handle["exactness"]["doubled"] == 0
    # the live figures are the runs': KEY puts the hot key on one worker, the
    # recommendation splits it, as the simulator says
    assert by[("key", "dist_cost")]["live"] == by[("key", "dist_cost")]["sim"] == 1.0
    assert by[(recommended, "dist_cost")]["live"] > 1.0
    assert by[(recommended, "imbalance")]["live"] < by[("key", "imbalance")]["live"]
    for s in ("key", recommended):
        assert by[(s, "p99_ms")]["sim"] >= by[(s, "p99_ms")]["sim_uncalibrated"]
    # the advice's MLflow run holds the table and one error metric per strategy and metric
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    exp = tracker.client.get_experiment_by_name("skewlab-advise")
    assert exp is not None
    (run,) = tracker.client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.info.run_id == out["mlflow_run_id"]
    assert "verify.csv" in {a.path for a in tracker.client.list_artifacts(run.info.run_id)}
    errs = {k for k in run.data.metrics if k.startswith("verify_") and k.endswith("_err")}
    assert "verify_key_dist_cost_err" in errs and len(errs) >= 6
