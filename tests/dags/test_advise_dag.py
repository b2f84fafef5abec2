"""``skewlab_advise``: its shape and form (DagBag, no DB) and one small advice with ``dag.test()``
into a real MLflow store under a tmp ``$SKEWLAB_HOME``."""

from __future__ import annotations

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
