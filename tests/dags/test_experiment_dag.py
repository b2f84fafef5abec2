"""``skewlab_experiment`` run end to end with ``dag.test()`` against the real stack.

Three real runs: KEY grouping, KEY + SMALOPS rebalancing, and the autoscale
experiment selected by the ``autoscale`` param (each small: about a minute);
and one that fails in ``produce`` after the route job started, to show that
``stop_jobs`` (trigger rule ``all_done``) leaves no process of the run behind.

``dag.test()`` (Airflow 3) creates a DAG run in the migrated SQLite DB of the
``airflow_db`` fixture and runs each task in this process; the experiment task
starts the embedded broker under a tmp ``$SKEWLAB_HOME`` (stopped at the end),
the route query (on the session's warm route host) and the workers as
subprocesses, writes Delta and MLflow there. Bad params are refused twice: by
the form's JSON schema before a run exists, and by ``validate_params`` (a
workload spec JSON schema cannot check) with one line, before anything starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.dags.test_dag_integrity import EXPERIMENT_TASKS

pytestmark = pytest.mark.integration

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
TASKS = EXPERIMENT_TASKS

SMALL = {
    "strategy": "key",
    "workers": 2,
    "partitions": 2,
    "workload": "zipf",
    "zipf_s": 1.1,
    "rate": 2000,
    "duration": 5,
    "window": 2.0,
    "seed": 7,
}
"""~10,000 events in 5 s: the whole run takes about a minute on 2 cores."""

REBALANCE = {
    **SMALL,
    "workload": "zipf",
    "keys": 50,
    "rebalance": "smalops",
    "rebalance_interval": 2.0,
    "rebalance_params": {"threshold": 0.05, "gate": False},
}
"""SMALL with SMALOPS moving hot keys (of 50) every 2 s: message sets, hand-offs, key state."""

AUTOSCALE = {
    "autoscale": "mwf",
    "partitions": 4,
    "duration": 8.0,
    "autoscale_iteration": 2.0,
    "autoscale_capacity": 6000.0,
    "autoscale_workload": "step:lo=0.1,hi=0.45,up=1,down=3",
}
"""Four 2 s iterations of a load step on 4 partitions (C_bar = 6 kB/s): ~500 records."""


@pytest.fixture
def skewlab_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, route_host: Path
) -> Iterator[Path]:
    """A fresh data dir as ``$SKEWLAB_HOME``; its embedded broker is stopped afterwards.
    The run's route query goes to the session's warm route host (``$SKEWLAB_ROUTE_HOST``,
    as for a deployed Airflow started beside one), not to a Spark application of its own:
    13-15 s of start-up a run on 2 cores."""
    from skewlab.services import get_service

    home = tmp_path / "skewlab"
    monkeypatch.setenv("SKEWLAB_HOME", str(home))
    try:
        yield home
    finally:
        get_service("broker", home).stop()


def _states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def _xcom(dag_run: Any, task_id: str, key: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key
        )
        row = session.scalars(query).first()
        assert row is not None, f"no XCom {task_id}.{key}"
        return XComModel.deserialize_value(row)


@pytest.fixture
def experiment_dag(airflow_db: Path) -> Any:
    """A freshly parsed DAG per test.

    In-process, ``dag.test(run_conf=...)`` writes the conf into the DAG's own
    ``Param`` objects (``process_params`` copies the objects, then sets their
    values), so a DAG object reused across tests would carry one run's conf into
    the next. A deployed task parses the DAG file anew, so only tests see this.
    """
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS_DIR))
    assert bag.import_errors == {}
    return bag.dags["skewlab_experiment"]


def test_small_experiment_runs_end_to_end(experiment_dag: Any, skewlab_home: Path) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings

    dag_run = experiment_dag.test(run_conf=SMALL)

    assert _states(dag_run) == dict.fromkeys(TASKS, "success")
    assert str(dag_run.state) == "success"
    summary = _xcom(dag_run, "record_result", "summary")
    rid = _xcom(dag_run, "record_result", "mlflow_run_id")
    assert _xcom(dag_run, "record_result", "exact") is True
    assert summary["exact"] is True and summary["mlflow_run_id"] == rid
    assert summary["strategy"] == "key" and summary["workers"] == 2
    assert summary["events"] == 10_000 and summary["quarantined"] == 0
    assert "EXACT" in summary["exactness"]
    assert summary["quality_ok"] is True and "PASSED" in summary["quality"]
    assert (skewlab_home / "runs" / summary["run_id"]).is_dir()

    tracker = Tracker(TrackingSettings.for_data_dir(skewlab_home))
    run = tracker.get_run_summary(rid)
    assert run.status == "FINISHED"
    assert run.params["strategy"] == "key" and run.params["workers"] == "2"
    # each task logs progress in its own process: the series never drops back (a later
    # task counts what an earlier one produced) and ends at every event
    produced = [v for _, v in tracker.metric_history(rid, "produced")]
    assert produced and produced[-1] == summary["events"], produced
    assert produced == sorted(produced), produced
    assert run.metrics["exact"] == 1.0
    assert run.tags["airflow.dag_id"] == "skewlab_experiment"
    assert run.tags["airflow.run_id"] == dag_run.run_id
    assert run.tags["quality"] == "passed" and run.metrics["quality_ok"] == 1.0
    url = _xcom(dag_run, "record_result", "mlflow_run_url")
    assert str(url).startswith("http") and str(url).split("?")[0].endswith(f"/runs/{rid}")
    assert _xcom(dag_run, "record_result", "_link_MlflowRunLink") == url  # the task's button


def test_bad_workload_fails_validate_with_one_line(
    experiment_dag: Any, skewlab_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run = experiment_dag.test(run_conf={**SMALL, "workload": "zipf", "skew": 50})

    assert _states(dag_run) == {
        **dict.fromkeys(TASKS, "upstream_failed"),
        "validate_params": "failed",
        "stop_jobs": "success",  # all_done: it runs, finds no run and stops nothing
    }
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if "AirflowFailException:" in ln]
    assert lines, "the validate task's failure was not logged"
    assert lines[-1].split("AirflowFailException: ", 1)[1] == (
        "bad params: param skew is read by workload country, country-half only, not zipf; "
        "leave it at its default (skew=80) or pick one of those workloads"
    )
    assert not (skewlab_home / "runs").exists(), "nothing may start with bad params"


def test_out_of_range_param_is_refused_by_the_form(experiment_dag: Any, skewlab_home: Path) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="workers"):
        experiment_dag.test(run_conf={**SMALL, "workers": 0})
    assert not (skewlab_home / "runs").exists()


def test_rebalance_policy_runs_end_to_end(experiment_dag: Any, skewlab_home: Path) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings

    dag_run = experiment_dag.test(run_conf=REBALANCE)

    assert set(_states(dag_run).values()) == {"success"}, _states(dag_run)
    summary = _xcom(dag_run, "record_result", "summary")
    assert summary["exact"] is True and summary["state_exact"] is True
    assert summary["rebalance"] == "smalops" and summary["order_violations"] == 0
    assert summary["events"] == 10_000 and summary["quality_ok"] is True
    run = Tracker(TrackingSettings.for_data_dir(skewlab_home)).get_run_summary(
        summary["mlflow_run_id"]
    )
    assert {k: run.tags[k] for k in ("strategy", "rebalance", "scale_out", "autoscale")} == {
        "strategy": "key",
        "rebalance": "smalops",
        "scale_out": "none",
        "autoscale": "none",
    }
    assert run.params["rebalance"] == "smalops" and run.params["rebalance_interval_s"] == "2.0"
    assert run.params["rebalance_params.threshold"] == "0.05"
    assert run.metrics["state_exact"] == 1.0


def test_autoscale_param_runs_the_autoscale_experiment(
    experiment_dag: Any, skewlab_home: Path
) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings
    from skewlab.live.driver.handle import Phase, RunHandle

    dag_run = experiment_dag.test(run_conf=AUTOSCALE)

    assert set(_states(dag_run).values()) == {"success"}, _states(dag_run)
    summary = _xcom(dag_run, "record_result", "summary")
    assert summary["mode"] == "autoscale" and summary["algorithm"] == "mwf"
    assert summary["exact"] is True and summary["overlaps"] == 0 and summary["records"] > 0
    assert summary["quality_ok"] is None and summary["quality"].startswith("skipped: ")
    assert (skewlab_home / "runs" / summary["run_id"] / "settings.json").is_file()
    handle = RunHandle.load(skewlab_home / "runs" / summary["run_id"])
    assert handle.phases == [p.value for p in Phase]  # one phase per task, as grouping runs
    assert set(handle.procs) == {"monitor", "controller"} and handle.status == "done"
    run = Tracker(TrackingSettings.for_data_dir(skewlab_home)).get_run_summary(
        summary["mlflow_run_id"]
    )
    assert run.status == "FINISHED"
    assert run.tags["autoscale"] == "mwf" and run.tags["airflow.run_id"] == dag_run.run_id
    assert run.params["algorithm"] == "mwf" and run.params["iteration_s"] == "2.0"


def test_conflicting_params_fail_validate_with_one_line(
    experiment_dag: Any, skewlab_home: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    dag_run = experiment_dag.test(run_conf={**SMALL, "autoscale": "mwf"})

    assert _states(dag_run)["validate_params"] == "failed"
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if "AirflowFailException:" in ln]
    assert (
        lines[-1]
        .split("AirflowFailException: ", 1)[1]
        .startswith(
            "bad params: params strategy, workers, workload, rate, window, seed apply to the "
            "grouping experiment only, not to autoscale=mwf"
        )
    )
    assert not (skewlab_home / "runs").exists()


def test_a_failed_task_leaves_no_process_of_the_run(
    experiment_dag: Any,
    skewlab_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    import psutil

    from skewlab.io.kafka import KafkaSettings, connect
    from skewlab.live.driver.experiment import ExperimentError
    from skewlab.live.driver.handle import RunHandle
    from skewlab.live.driver.route_host import HostDir, attach_any
    from skewlab.live.driver.spark_launcher import EngineDir
    from skewlab.orchestration import live_tasks
    from skewlab.rundir import RunDir

    def broken_produce(ref: Any, progress: Any = None) -> Any:
        raise ExperimentError("injected: the producer\nbroke")

    monkeypatch.setattr(live_tasks, "produce", broken_produce)
    dag_run = experiment_dag.test(run_conf=SMALL)

    assert str(dag_run.state) == "failed"
    states = _states(dag_run)
    assert {k: states[k] for k in TASKS[:5]} == {
        **dict.fromkeys(TASKS[:4], "success"),
        "produce": "failed",
    }
    assert states["stop_jobs"] == "success" and states["record_result"] == "upstream_failed"
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if "AirflowFailException:" in ln]
    assert lines[-1].split("AirflowFailException: ", 1)[1] == "injected: the producer broke"

    (run_dir,) = (skewlab_home / "runs").iterdir()
    handle = RunHandle.load(run_dir)
    assert (run_dir / "route.ready").exists(), "the route job had started"
    assert set(handle.procs) == {"route", "worker-0", "worker-1"}
    assert handle.phases[-1] == "stopped"
    for rec in handle.procs.values():
        assert not attach_any(rec).alive(), f"{rec.name} still runs"
    leftovers = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline"])
        if any(handle.run_id in part for part in p.info["cmdline"] or [])
    ]
    assert leftovers == []
    warm = EngineDir(RunDir.of(run_dir).spark_workers).warm_app()
    shared = warm.app_record() if warm is not None else None
    groups = {  # each ran in its own session (a query on the shared route host or a job of
        # the shared warm workers app: in none; their own ends are checked above)
        rec.pid
        for rec in handle.procs.values()
        if HostDir.of_request(rec.request) is None and (shared is None or rec.pid != shared.pid)
    }
    assert _group_members(groups) == [], "the Spark JVM (or another child) outlived the run"
    client = connect(KafkaSettings(handle.bootstrap or ""))
    try:
        assert not {handle.events_topic, handle.routed_topic} & set(client.list_topics())
    finally:
        client.close()


def test_a_failed_quality_check_still_records_the_run_in_mlflow(
    experiment_dag: Any,
    skewlab_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from skewlab.io.delta import DeltaStore
    from skewlab.io.tracking import Tracker, TrackingSettings
    from skewlab.orchestration import live_tasks
    from skewlab.rundir import delta_root_of

    real_aggregate = live_tasks.aggregate

    def aggregate_then_damage(ref: Any) -> Any:
        out = real_aggregate(ref)  # the real run's results, then a quarantine row without
        DeltaStore(delta_root_of(skewlab_home)).append(  # a known reason: real bad data
            "quarantine",
            [{"raw": b"x", "topic": "events", "partition": 0, "offset": 3, "reason": "??",
              "ts": 0}],
            app_id=f"damage:{ref['run_id']}",
            version=0,
            run_id=ref["run_id"],
        )  # fmt: skip
        return out

    monkeypatch.setattr(live_tasks, "aggregate", aggregate_then_damage)
    dag_run = experiment_dag.test(run_conf=SMALL)

    states = _states(dag_run)
    assert str(dag_run.state) == "failed"
    assert states["aggregate"] == "success" and states["check_quality"] == "failed"
    assert states["summarize"] == "upstream_failed" and states["stop_jobs"] == "success"
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if "AirflowFailException:" in ln]
    message = lines[-1].split("AirflowFailException: ", 1)[1]
    assert "FAILED" in message and "quarantine: reason is one of" in message
    assert "reason='??'" in message
    rid = message.rsplit("(MLflow run ", 1)[1].rstrip(")")
    tracker = Tracker(TrackingSettings.for_data_dir(skewlab_home))
    run = tracker.get_run_summary(rid)
    assert run.tags["quality"] == "failed" and run.metrics["quality_ok"] == 0.0
    assert run.metrics["exact"] == 1.0  # the counts themselves were right
    assert "quality" in tracker.list_artifacts(rid)


def _pgid(pid: int) -> int | None:
    import os

    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def _group_members(groups: set[int], settle_s: float = 10.0) -> list[int]:
    """Running (not zombie) processes in ``groups``, after ``settle_s`` for the killed to die."""
    import time

    import psutil

    deadline = time.monotonic() + settle_s
    while True:
        members = []
        for p in psutil.process_iter(["status"]):
            if _pgid(p.pid) in groups and p.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(p.pid)
        if not members or time.monotonic() > deadline:
            return members
        time.sleep(0.2)
