"""``skewlab_sweep``: its shape (DagBag, no DB) and a small simulated sweep with ``dag.test()``.

The sweep test runs the real simulator and a real MLflow store on SQLite under
a tmp ``$SKEWLAB_HOME``: 2 strategies x 1 workload x 1 W x 2 seeds = 4 mapped
cells of 20,000 events (seconds), then the comparison on the parent run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
SWEEP_TASKS = ["plan", "cells_of", "start_parent", "run_cell", "compare"]
SMALL = {
    "strategies": ["key", "dkg"],
    "workloads": ["country:R80"],
    "workers": [4],
    "seeds": [0, 1],
    "events": 20_000,
    "window": 1.0,
}


@pytest.mark.unit
class _ListHandler(logging.Handler):
    """Keeps the records a logger emits (Airflow's own task-log capture varies by test order)."""

    def __init__(self, records: list[logging.LogRecord]) -> None:
        super().__init__(logging.INFO)
        self.records = records

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_sweep_dag_shape(dagbag: Any) -> None:
    dag = dagbag.dags["skewlab_sweep"]
    assert dag.schedule is None and dag.max_active_runs == 1
    assert sorted(t.task_id for t in dag.tasks) == sorted(SWEEP_TASKS)
    assert {"skewlab", "sweep"} <= set(dag.tags)
    run_cell = dag.get_task("run_cell")
    assert run_cell.max_active_tis_per_dagrun == 1
    assert dag.get_task("compare").trigger_rule == "all_done"
    assert "compare" in run_cell.downstream_task_ids
    assert dag.get_task("start_parent").downstream_task_ids == {"run_cell", "compare"}


@pytest.mark.unit
def test_sweep_form_defaults_are_submittable_and_plan_a_grid(dagbag: Any, tmp_path: Path) -> None:
    from skewlab.orchestration.sweep_form import settings_from_params
    from skewlab.orchestration.sweep_grid import PRESETS

    params = dagbag.dags["skewlab_sweep"].params
    assert {"preset", "mode", "strategies", "workloads", "workers", "seeds"} <= set(params.keys())
    defaults = params.validate()  # what the form submits untouched
    for name in params:
        schema = params.get_param(name).schema
        assert schema.get("type"), name  # typed: the form picks a field and marks it required
        constraints = {"enum", "items", "pattern"} | {k for k in schema if "imum" in k}
        assert constraints & set(schema), f"{name} has no bounds, enum, items or pattern"
        if "null" not in schema["type"]:  # a required field's default is never empty
            assert defaults[name] not in (None, "", []), name
    preset = params.get_param("preset").schema
    assert defaults["preset"] == "custom" and preset["enum"] == ["custom", *PRESETS]
    strategies = params.get_param("strategies").schema  # a multi-select of valid names
    assert strategies["examples"] == strategies["items"]["enum"]
    settings = settings_from_params(defaults, home=str(tmp_path))
    assert settings.preset == "" and settings.n_cells == len(defaults["strategies"])
    for name in PRESETS:  # each preset choice is submittable with the other defaults
        settings_from_params({**defaults, "preset": name}, home=str(tmp_path))


BAD = {
    "mode": "fast",
    "preset": "",
    "strategies": ["key", "nope"],
    "workloads": ["nosuch:s=1"],
    "workers": [0],
    "seeds": [],
    "events": 0,
    "partitions": 65,
    "rate": -5,
    "window": 0,
}


@pytest.mark.unit
@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_refused_by_the_form_and_again_by_plan(
    dagbag: Any, tmp_path: Path, name: str
) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    from skewlab.errors import ConfigError
    from skewlab.orchestration.sweep_form import settings_from_params

    params = dagbag.dags["skewlab_sweep"].params
    bad = BAD[name]
    with pytest.raises(ParamValidationError):
        params.get_param(name).resolve(bad)
    if name == "preset":  # "" is the old spelling of custom: refused by the form only
        assert settings_from_params({name: bad}, home=str(tmp_path)).preset == ""
        return
    with pytest.raises(ConfigError) as info:
        settings_from_params({name: bad}, home=str(tmp_path))
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"param {name}: ")
    shown = bad[-1] if isinstance(bad, list) and bad else bad
    assert repr(shown) in message and "allowed: " in message


@pytest.mark.integration
def test_small_sim_sweep_end_to_end(
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from airflow.dag_processing.dagbag import DagBag

    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path / "skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    bag = DagBag(dag_folder=str(DAGS_DIR))
    records: list[logging.LogRecord] = []
    handler = _ListHandler(records)
    sweep_log = logging.getLogger("skewlab.dags.sweep")
    sweep_log.addHandler(handler)
    try:
        dag_run = bag.dags["skewlab_sweep"].test(run_conf=SMALL)
    finally:
        sweep_log.removeHandler(handler)
    out = capfd.readouterr()
    task_log = out.out + out.err  # Airflow's task logging writes the records here

    states = {(ti.task_id, ti.map_index): str(ti.state) for ti in dag_run.get_task_instances()}
    assert set(states.values()) == {"success"}, states
    assert sorted(i for t, i in states if t == "run_cell") == [0, 1, 2, 3]
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    exp = tracker.client.get_experiment_by_name("skewlab-sweep-custom")
    assert exp is not None
    parents = [
        r
        for r in tracker.client.search_runs([exp.experiment_id])
        if "mlflow.parentRunId" not in r.data.tags
    ]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED"
    parent = parents[0].info.run_id
    assert parents[0].data.tags["airflow.run_id"] == dag_run.run_id
    children = tracker.child_runs(parent)
    assert len(children) == 4
    # the task logs come from the project's logger and link every run the sweep wrote
    dag_lines = [r.getMessage() for r in records if r.name == "skewlab.dags.sweep"]
    assert "unusual_prefix" not in task_log
    for rid in [parent, *children]:
        page = f"/#/experiments/{exp.experiment_id}/runs/{rid}"
        assert any(page in line for line in dag_lines), rid
    rows = tracker.compare(children)
    assert {r["params.strategy"] for r in rows} == {"key", "dkg"}
    assert all(r["metrics.imb_score"] is not None for r in rows)
    arts = tracker.list_artifacts(parent, "comparison")
    assert {Path(a).name for a in arts} >= {
        "sweep.csv",
        "sweep.md",
        "imbalance.png",
        "p99_latency.png",
        "throughput.png",
        "moved_state.png",
    }
