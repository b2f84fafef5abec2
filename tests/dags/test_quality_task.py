"""The ``check_quality`` task of ``skewlab_experiment`` on real Delta tables and MLflow.

The task's callable is run directly (as the worker would, minus the scheduler)
on a data dir laid out like a live run's: ``<home>/delta`` holds the run's
tables, ``<home>/mlflow.db`` its MLflow run. Good tables pass and log the
report; a damaged table fails the task with one line naming the expectation
and the offending row.
"""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration


def _write(home: Path, run_id: str, count: int) -> None:
    from skewlab.io.delta import DeltaStore

    store = DeltaStore(home / "delta")
    rows = {
        "key_loads": [
            {"window_start": w, "key": "a", "worker": 0, "count": count, "bytes": 10}
            for w in (0, 2000)
        ],
        "partition_loads": [
            {
                "window_start": w,
                "topic": "routed",
                "partition": 0,
                "bytes": 10,
                "records": 1,
                "bytes_per_s": 5.0,
            }
            for w in (0, 2000)
        ],
        "results": [{"window_start": w, "key": "a", "count": 1, "sum": 10.0} for w in (0, 2000)],
        "quarantine": [],
    }
    for table, data in rows.items():
        store.append(table, data, app_id=f"test:{run_id}", version=0, run_id=run_id)


@pytest.fixture
def check_quality(dagbag: Any) -> Any:
    """The undecorated function behind the ``check_quality`` task."""
    return dagbag.dags["skewlab_experiment"].get_task("check_quality").python_callable


def test_good_tables_pass_and_the_report_is_logged(check_quality: Any, tmp_path: Path) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings

    home = tmp_path / "home"
    _write(home, "good-run", count=1)
    tracker = Tracker(TrackingSettings.for_data_dir(home))
    rid = tracker.start_run(f"dag-{uuid.uuid4().hex[:8]}", "good-run")
    result = {"run_id": "good-run", "mlflow_run_id": rid, "exact": True}

    out = check_quality({"home": str(home), "window_s": 2.0}, result)

    assert out["quality_ok"] is True
    assert out["quality"].startswith("data quality of good-run: PASSED")
    assert {k: out[k] for k in result} == result
    run = tracker.get_run_summary(rid)
    assert run.tags["quality"] == "passed"
    assert "quality" in tracker.list_artifacts(rid)


def test_damaged_table_fails_the_task_with_one_line(check_quality: Any, tmp_path: Path) -> None:
    from airflow.sdk.exceptions import AirflowFailException

    home = tmp_path / "home"
    _write(home, "bad-run", count=-7)

    with pytest.raises(AirflowFailException) as info:
        check_quality({"home": str(home), "window_s": 2.0}, {"run_id": "bad-run"})

    message = str(info.value)
    assert "\n" not in message
    head, tail = message.split(" expectations: ", 1)
    assert re.fullmatch(r"data quality of bad-run: FAILED 1 of \d+", head)
    assert tail == (
        "key_loads: count >= 0 "
        "[expect_column_values_to_be_between] failed on 2 of 2 rows: "
        "{window_start=0, key='a', worker=0, count=-7}; "
        "{window_start=2000, key='a', worker=0, count=-7}"
    )
