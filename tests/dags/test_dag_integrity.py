"""DAG integrity (STYLE.md rule 12): every file in ``dags/`` imports cleanly and follows the rules.

No database: a ``DagBag`` parse only. Checks per file: no import error, at least
one DAG; per DAG: tags, ``doc_md``, fixed ``start_date``, ``catchup=False``,
retries set; for ``skewlab_experiment``: its tasks, no retry of the experiment,
the trigger form's JSON-schema bounds; and that parsing the DAG files imports
none of the heavy libraries (they belong inside tasks).
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from skewlab.grouping import GROUPING_NAMES
from skewlab.rebalance import REBALANCER_NAMES

pytestmark = pytest.mark.unit

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
DAG_FILES = sorted(p.name for p in DAGS_DIR.glob("*.py"))
EXPERIMENT_TASKS = [
    "validate_params",
    "ensure_services",
    "create_topics",
    "start_route_job",
    "produce",
    "wait_for_completion",
    "aggregate",
    "check_quality",
    "summarize",
    "stop_jobs",
    "record_result",
]
"""In dependency order: each task is downstream of the one before it."""
NO_RETRY = [
    "ensure_services",
    "create_topics",
    "start_route_job",
    "produce",
    "wait_for_completion",
    "aggregate",
    "summarize",
]
"""Tasks that start, feed or record the run: a retry would do it twice."""
HEAVY_MODULES = ("pyspark", "mlflow", "deltalake", "confluent_kafka", "kafka", "matplotlib")


def _dags_of(dagbag: Any, file_name: str) -> list[Any]:
    return [d for d in dagbag.dags.values() if Path(d.fileloc).name == file_name]


def test_dags_folder_has_files() -> None:
    assert "skewlab_experiment.py" in DAG_FILES


def test_no_import_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}


@pytest.mark.parametrize("file_name", DAG_FILES)
def test_each_file_defines_a_dag(dagbag: Any, file_name: str) -> None:
    assert _dags_of(dagbag, file_name), f"{file_name} defines no DAG"


@pytest.mark.parametrize("file_name", DAG_FILES)
def test_each_dag_follows_the_rules(dagbag: Any, file_name: str) -> None:
    for dag in _dags_of(dagbag, file_name):
        assert dag.tags, f"{dag.dag_id}: no tags"
        assert dag.doc_md and dag.doc_md.strip(), f"{dag.dag_id}: no doc_md"
        assert dag.start_date is not None, f"{dag.dag_id}: no fixed start_date"
        assert dag.catchup is False, f"{dag.dag_id}: catchup must be False"
        for t in dag.tasks:
            assert t.retries is not None, f"{dag.dag_id}.{t.task_id}: retries not set"


def test_experiment_dag_shape(dagbag: Any) -> None:
    dag = dagbag.dags["skewlab_experiment"]
    assert dag.schedule is None
    assert dag.max_active_runs == 1
    assert {t.task_id for t in dag.tasks} == set(EXPERIMENT_TASKS)
    assert [t.task_id for t in dag.topological_sort()] == EXPERIMENT_TASKS
    for before, after in itertools.pairwise(EXPERIMENT_TASKS):
        assert after in dag.get_task(before).downstream_task_ids, f"{before} -> {after}"
    assert dag.get_task("record_result").downstream_task_ids == set()
    for task_id in NO_RETRY:
        assert dag.get_task(task_id).retries == 0, task_id
    assert dag.get_task("check_quality").retries == 1  # idempotent: a re-check is harmless
    assert {"skewlab", "experiment"} <= set(dag.tags)


def test_the_long_wait_frees_its_slot_and_the_result_links_mlflow(dagbag: Any) -> None:
    from airflow.sdk import BaseSensorOperator

    dag = dagbag.dags["skewlab_experiment"]
    wait = dag.get_task("wait_for_completion")
    assert isinstance(wait, BaseSensorOperator) and wait.mode == "reschedule"
    assert 0 < wait.poke_interval <= 30 and wait.timeout >= 600
    record = dag.get_task("record_result")
    links = {link.name: link.xcom_key for link in record.operator_extra_links}
    assert links == {"MLflow run": "_link_MlflowRunLink"}


def test_task_logs_are_named_after_the_project(dagbag: Any) -> None:
    """The DAG processor imports a DAG file as ``unusual_prefix_<hash>_<file>``: a DAG's
    logger must not take that name from ``__name__``."""
    for dag_id in ("skewlab_experiment", "skewlab_sweep"):
        module = sys.modules[_module_of(dagbag, dag_id)]
        assert module.log.name.startswith("skewlab.dags."), (dag_id, module.log.name)


def _module_of(dagbag: Any, dag_id: str) -> str:
    fileloc = dagbag.dags[dag_id].fileloc
    names = [n for n, m in sys.modules.items() if getattr(m, "__file__", None) == fileloc]
    assert names and all(n.startswith("unusual_prefix_") for n in names), names
    return names[0]


def test_stop_jobs_runs_whatever_failed_and_is_not_the_last_task(dagbag: Any) -> None:
    from airflow.sdk import TriggerRule

    dag = dagbag.dags["skewlab_experiment"]
    stop = dag.get_task("stop_jobs")
    assert stop.trigger_rule == TriggerRule.ALL_DONE
    assert stop.upstream_task_ids == {"summarize"}
    # the run's state follows its leaves: an always-succeeding leaf would hide failures
    assert [t.task_id for t in dag.leaves] == ["record_result"]


def test_experiment_dag_params_form(dagbag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    params = dagbag.dags["skewlab_experiment"].params
    assert list(params.keys()) == [
        "strategy",
        "strategy_params",
        "workers",
        "partitions",
        "workload",
        "skew",
        "zipf_s",
        "keys",
        "trace_file",
        "rate",
        "duration",
        "load_ramp_factor",
        "load_ramp_every",
        "service_us",
        "window",
        "seed",
        "rebalance",
        "rebalance_interval",
        "rebalance_params",
        "scale_out",
        "max_instances",
        "scale_out_interval",
        "scale_out_params",
        "autoscale",
        "autoscale_workload",
        "autoscale_capacity",
        "autoscale_iteration",
    ]
    assert params.get_param("strategy").schema["enum"] == list(GROUPING_NAMES)
    assert params.get_param("rebalance").schema["enum"] == list(REBALANCER_NAMES)
    assert params.get_param("scale_out").schema["enum"] == [
        "none",
        "checkpoint",
        "active-backup",
        "restart",
    ]
    params.validate()  # the defaults pass the form
    bad = {
        "strategy": "nope",
        "strategy_params": {"warmup": -1},
        "workers": 0,
        "partitions": 65,
        "workload": "",
        "skew": 101,
        "zipf_s": 0,
        "keys": 0,
        "trace_file": "",
        "rate": 0,
        "duration": -1,
        "load_ramp_factor": 0.5,
        "load_ramp_every": 0,
        "service_us": -0.5,
        "window": 0,
        "seed": -1,
        "rebalance": "kg",
        "rebalance_interval": 0,
        "rebalance_params": {"theta": -1},
        "scale_out": "checkpointing",
        "max_instances": 17,
        "scale_out_interval": 0,
        "scale_out_params": {"alarming": 120},
        "autoscale": "kafka:0",
        "autoscale_workload": "",
        "autoscale_capacity": 0,
        "autoscale_iteration": 0,
    }
    assert set(bad) == set(params.keys())
    for name, value in bad.items():
        with pytest.raises(ParamValidationError):
            params.get_param(name).resolve(value)
    with pytest.raises(ParamValidationError):
        params.get_param("scale_out_params").resolve({"bogus": 1})
    for spec in ("bogus", "cuntry", "country:R80"):  # a workload is one of the registry's
        with pytest.raises(ParamValidationError):
            params.get_param("workload").resolve(spec)
    good = {
        "workers": 64,
        "load_ramp_factor": 2.0,
        "rebalance": "smalops",
        "rebalance_params": {"threshold": 0.05, "gate": False},
        "scale_out_params": {"alarming": 40, "scale_out": 70, "scale_in": 20, "cooldown_s": 10},
        "max_instances": 16,
        "autoscale": "kafka-rr:8",
        "workload": "country-half",
        "skew": 60,
    }
    for name, value in good.items():
        assert params.get_param(name).resolve(value) == value
    assert params.get_param("trace_file").resolve(None) is None


def test_parsing_the_dags_imports_nothing_heavy(airflow_env: Path) -> None:
    code = (
        "import json, runpy, sys, pathlib\n"
        f"for f in sorted(pathlib.Path({str(DAGS_DIR)!r}).glob('*.py')):\n"
        "    runpy.run_path(str(f))\n"
        f"print(json.dumps([m for m in {HEAVY_MODULES!r} if m in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
