"""``skewlab_control``: its shape and schedule (DagBag, no DB) and ``dag.test()`` runs.

The ``dag.test()`` tests prepare a real Delta root in a tmp dir (``key_loads`` and
``partition_loads`` rows of two one-minute data intervals, written with
:class:`DeltaStore`), run the DAG for a logical date, and read the tables the
steps wrote: one decision per loop and interval, nothing doubled when the same
interval runs again, a new decision for the next interval, and bad params
failing ``plan`` before anything is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from skewlab.rebalance.base import hash_worker

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
DAG_FILE = DAGS_DIR / "skewlab_control.py"
TASKS = ["plan", "rebalance", "autoscale", "scale-out"]
RUN = "key-20260301T120000-dagtst"
W = 4
LOGICAL = datetime(2026, 3, 1, 12, 5, tzinfo=UTC)
"""Data interval [12:04, 12:05) under the every-minute cron schedule."""
LOGICAL_NEXT = datetime(2026, 3, 1, 12, 6, tzinfo=UTC)
T0 = 1_772_366_640_000  # 2026-03-01T12:04:00Z


@pytest.mark.unit
def test_control_dag_shape(dagbag: Any) -> None:
    from airflow.sdk import CronDataIntervalTimetable

    dag = dagbag.dags["skewlab_control"]
    assert isinstance(dag.timetable, CronDataIntervalTimetable)
    assert dag.timetable.expression == "* * * * *"
    assert dag.catchup is False and dag.max_active_runs == 1
    assert [t.task_id for t in dag.tasks] == TASKS
    assert dag.get_task("plan").downstream_task_ids == {"rebalance", "autoscale", "scale-out"}
    assert all(dag.get_task(t).retries == 2 for t in TASKS)  # idempotent: retries are safe
    assert {"skewlab", "control"} <= set(dag.tags)
    assert "skewlab_control" in dag.doc_md


@pytest.mark.unit
def test_control_dag_params_form(dagbag: Any) -> None:
    from airflow.sdk.exceptions import ParamValidationError

    params = dagbag.dags["skewlab_control"].params
    assert set(params.keys()) == {
        "run_id", "delta_root", "rebalance", "workers", "rebalance_lead", "rebalance_params",
        "autoscale", "autoscale_capacity", "autoscale_params", "scale_out", "scale_out_params",
    }  # fmt: skip
    params.validate()  # the defaults pass the form
    bad = {
        "rebalance": "best-fit",
        "autoscale": "kafka:3",
        "workers": 0,
        "rebalance_lead": -1,
        "rebalance_params": {"alpha": 1},
        "autoscale_capacity": 0,
        "run_id": "two words",
        "scale_out": "checkpointing",
        "scale_out_params": {"service_us": 0},
    }
    for name, value in bad.items():
        with pytest.raises(ParamValidationError):
            params.get_param(name).resolve(value)


@pytest.mark.unit
@pytest.mark.parametrize(
    ("value", "expected"), [("*/5 * * * *", "*/5 * * * *"), ("off", None), ("", "* * * * *")]
)
def test_schedule_comes_from_the_environment(
    airflow_env: Path, value: str, expected: str | None
) -> None:
    code = f"import runpy, sys\ng = runpy.run_path({str(DAG_FILE)!r})\nprint(repr(g['SCHEDULE']))\n"
    env = {**os.environ, "SKEWLAB_CONTROL_SCHEDULE": value}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == repr(expected)


@pytest.mark.unit
def test_a_bad_schedule_is_an_import_error_naming_the_variable(airflow_env: Path) -> None:
    env = {**os.environ, "SKEWLAB_CONTROL_SCHEDULE": "every minute"}
    code = f"import runpy\nrunpy.run_path({str(DAG_FILE)!r})\n"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "SKEWLAB_CONTROL_SCHEDULE must be a cron expression" in done.stderr


# ---------------------------------------------------------------- dag.test()


def _keys_on(worker: int, n: int, prefix: str) -> list[str]:
    out, i = [], 0
    while len(out) < n:
        if hash_worker(f"{prefix}{i}", W) == worker:
            out.append(f"{prefix}{i}")
        i += 1
    return out


def _prepare(delta_root: Path) -> None:
    """Two intervals of skewed key loads (3 hot keys on worker 0) and partition speeds."""
    from skewlab.io.delta import DeltaStore

    store = DeltaStore(delta_root)
    hot, cold = _keys_on(0, 3, "hot"), [_keys_on(w, 1, "cold")[0] for w in range(1, W)]
    for batch, start in enumerate((T0, T0 + 60_000)):
        keys = [{"window_start": start + dt, "key": k, "worker": hash_worker(k, W),
                 "count": 500 if k in hot else 100, "bytes": 100 * (500 if k in hot else 100)}
                for dt in (0, 30_000) for k in hot + cold]  # fmt: skip
        speeds = [600.0, 300.0, 300.0, 200.0] if batch == 0 else [900.0, 600.0, 300.0, 200.0]
        parts = [{"window_start": start + dt, "topic": "routed-x", "partition": p,
                  "bytes": int(s * 30), "records": 1, "bytes_per_s": s}
                 for dt in (0, 30_000) for p, s in enumerate(speeds)]  # fmt: skip
        store.append("key_loads", keys, app_id=f"route:{RUN}", version=batch, run_id=RUN)
        store.append("partition_loads", parts, app_id=f"route:{RUN}", version=batch, run_id=RUN)


def _conf(delta_root: Path, **change: Any) -> dict[str, Any]:
    return {
        "run_id": RUN,
        "delta_root": str(delta_root),
        "rebalance": "dlb-h",
        "workers": W,
        "rebalance_params": {"theta": 10},
        "autoscale": "mwf",
        "autoscale_capacity": 1200.0,
        **change,
    }


def _control_dag() -> Any:
    """A freshly parsed DAG (``dag.test(run_conf=...)`` mutates the DAG's Param objects)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAG_FILE))
    assert bag.import_errors == {}
    return bag.dags["skewlab_control"]


def _states(dag_run: Any) -> dict[str, str]:
    return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}


def _result(dag_run: Any, task_id: str) -> dict[str, Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        query = XComModel.get_many(
            run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key="return_value"
        )
        row = session.scalars(query).first()
        assert row is not None, f"no result of {task_id}"
        value: dict[str, Any] = XComModel.deserialize_value(row)
        return value


def _tables(delta_root: Path) -> dict[str, list[dict[str, Any]]]:
    from skewlab.io.delta import DeltaStore

    store = DeltaStore(delta_root)
    return {
        t: store.read(t, run_id=RUN).to_pylist()
        for t in ("assignments", "consumer_assignments", "decisions")
    }


@pytest.mark.integration
def test_control_dag_decides_once_per_interval(airflow_db: Path, tmp_path: Path) -> None:
    root = tmp_path / "delta"
    _prepare(root)

    first = _control_dag().test(logical_date=LOGICAL, run_conf=_conf(root))
    assert _states(first) == {**dict.fromkeys(TASKS, "success"), "scale-out": "skipped"}
    reb, auto = _result(first, "rebalance"), _result(first, "autoscale")
    assert (reb["status"], reb["interval_start_ms"], reb["interval_end_ms"]) == (
        "decided", T0, T0 + 60_000,
    )  # fmt: skip
    assert reb["keys_moved"] >= 1 and reb["imbalance_after"] < reb["imbalance_before"]
    assert auto["status"] == "decided" and auto["iteration"] == 1 and auto["consumers"] == 2
    tables = _tables(root)
    assert {r["version"] for r in tables["assignments"]} == {1}
    assert sorted(r["partition"] for r in tables["consumer_assignments"]) == [0, 1, 2, 3]
    assert sorted(r["loop"] for r in tables["decisions"]) == ["autoscale", "rebalance"]
    detail = json.loads(next(r for r in tables["decisions"] if r["loop"] == "rebalance")["detail"])
    assert detail["interval_ms"] == [T0, T0 + 60_000]

    again = _control_dag().test(logical_date=LOGICAL, run_conf=_conf(root))
    assert _states(again) == {**dict.fromkeys(TASKS, "success"), "scale-out": "skipped"}
    assert _result(again, "rebalance")["status"] == "already-done"
    assert _result(again, "autoscale")["written"] == []
    assert {t: len(rows) for t, rows in _tables(root).items()} == {
        t: len(rows) for t, rows in tables.items()
    }

    nxt = _control_dag().test(logical_date=LOGICAL_NEXT, run_conf=_conf(root))
    assert _states(nxt) == {**dict.fromkeys(TASKS, "success"), "scale-out": "skipped"}
    assert _result(nxt, "rebalance")["status"] == "decided"
    auto2 = _result(nxt, "autoscale")
    assert (auto2["status"], auto2["iteration"], auto2["reason"]) == (
        "decided", 2, "over-capacity",
    )  # fmt: skip
    after = _tables(root)
    assert len(after["decisions"]) == 4
    assert sorted({r["iteration"] for r in after["consumer_assignments"]}) == [1, 2]


@pytest.mark.integration
def test_control_dag_skips_a_loop_set_to_none(airflow_db: Path, tmp_path: Path) -> None:
    root = tmp_path / "delta"
    _prepare(root)
    run = _control_dag().test(logical_date=LOGICAL, run_conf=_conf(root, rebalance="none"))
    assert _states(run) == {
        "plan": "success", "rebalance": "skipped", "autoscale": "success", "scale-out": "skipped",
    }  # fmt: skip
    tables = _tables(root)
    assert tables["assignments"] == [] and [r["loop"] for r in tables["decisions"]] == ["autoscale"]


@pytest.mark.integration
def test_control_dag_bad_params_fail_plan_and_write_nothing(
    airflow_db: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "delta"
    _prepare(root)
    conf = _conf(root, rebalance_params={"threshold": 0.1})  # a smalops key given to dlb-h
    run = _control_dag().test(logical_date=LOGICAL, run_conf=conf)
    assert _states(run) == {
        "plan": "failed",
        "rebalance": "upstream_failed",
        "autoscale": "upstream_failed",
        "scale-out": "upstream_failed",
    }
    out, err = capfd.readouterr()
    lines = [ln for ln in (out + err).splitlines() if "AirflowFailException:" in ln]
    assert lines, "the plan task's failure was not logged"
    assert lines[-1].split("AirflowFailException: ", 1)[1] == (
        "bad params: rebalance: rebalancer 'dlb-h' has no parameter threshold; "
        "valid: workers, theta, tuple_bytes"
    )
    assert all(rows == [] for rows in _tables(root).values())


def _prepare_flushes(delta_root: Path) -> None:
    """Worker 0 overloaded in [12:04, 12:05): 3x its capacity offered, a third processed.

    Each worker flushes once the way ``skewlab.live.worker.process`` does (``operator_state`` at
    its offset, ``worker_progress``, ``partials``, app id ``work-<j>:<run>``).
    """
    from skewlab.io.delta import DeltaStore

    store = DeltaStore(delta_root)
    offered = {0: 180_000, 1: 6_000, 2: 6_000, 3: 6_000}
    done = {**offered, 0: 60_000}
    keys = {j: _keys_on(j, 1, "k")[0] for j in range(W)}
    loads = [{"window_start": T0 + dt, "key": keys[j], "worker": j, "count": n // 2, "bytes": n}
             for dt in (0, 30_000) for j, n in offered.items()]  # fmt: skip
    store.append("key_loads", loads, app_id=f"route:{RUN}", version=0, run_id=RUN)
    for j, n in done.items():
        app = f"work-{j}:{RUN}"
        state = [
            {
                "checkpoint": n,
                "instance": j,
                "key": keys[j],
                "tau": n,
                "buffered": None,
                "value": json.dumps({"received": n, "completed": -1, "sets": []}).encode(),
            }
        ]
        store.append("operator_state", state, app_id=app, version=n, run_id=RUN)
        progress = [{"worker": j, "routed_offset": n, "watermarks": "{}"}]
        store.append("worker_progress", progress, app_id=app, version=n, run_id=RUN)
        partials = [{"window_start": T0, "key": keys[j], "worker": j, "count": n, "sum": 1.0}]
        store.append("partials", partials, app_id=app, version=n, run_id=RUN)


@pytest.mark.integration
def test_control_dag_scale_out_step(airflow_db: Path, tmp_path: Path) -> None:
    from skewlab.io.delta import DeltaStore
    from skewlab.io.state_store import CheckpointStore

    root = tmp_path / "delta"
    _prepare_flushes(root)
    conf = _conf(
        root, rebalance="none", autoscale="none", scale_out="checkpoint",
        scale_out_params={"service_us": 1000, "dwell": 1},
    )  # fmt: skip
    run = _control_dag().test(logical_date=LOGICAL, run_conf=conf)
    assert _states(run) == {
        "plan": "success", "rebalance": "skipped", "autoscale": "skipped", "scale-out": "success",
    }  # fmt: skip
    res = _result(run, "scale-out")
    assert (res["status"], res["interval_end_ms"], res["checkpoints"], res["scaling"]) == (
        "decided", T0 + 60_000, 1, 1,
    )  # fmt: skip
    assert res["reason"] == "g0: TakeCheckpoint, StartInstances, SplitState, Replay, FeedInput"
    decisions = _tables(root)["decisions"]
    assert {r["loop"] for r in decisions} == {"scale-out"} and len(decisions) == 5
    start = next(json.loads(r["detail"]) for r in decisions
                 if json.loads(r["detail"])["action"] == "StartInstances")  # fmt: skip
    assert (start["group"], start["instances"], start["carried_out"]) == (0, [1, 2], False)
    (part,) = CheckpointStore(DeltaStore(root), f"{RUN}#g0", "g0").read(0).values()
    assert part.tau == 60_000 and part.theta[_keys_on(0, 1, "k")[0]]["received"] == 60_000

    again = _control_dag().test(logical_date=LOGICAL, run_conf=conf)
    assert _result(again, "scale-out")["status"] == "already-done"
    assert len(_tables(root)["decisions"]) == 5
