"""QualityReport: verdict, one-line failures, every expectation named, dict / text, the error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skewlab.errors import SkewlabError
from skewlab.quality.report import Checked, Failure, QualityError, QualityReport, SuiteResult

pytestmark = pytest.mark.unit

NEGATIVE = Failure(
    suite="key_loads",
    frame="key_loads",
    expectation="expect_column_values_to_be_between",
    check="count >= 0",
    unexpected=2,
    total=10,
    rows=({"window_start": np.int64(1000), "key": "b", "count": np.int64(-2)},),
)
MISSING = Failure(
    suite="events",
    frame="events",
    expectation="expect_table_columns_to_match_set",
    check="has columns ts",
    detail="missing columns ['ts']",
)


COUNT = Checked("key_loads", "expect_column_values_to_be_between", "count", "count >= 0", True)
REASON = Checked(
    "quarantine", "expect_column_values_to_be_in_set", "reason", "reason is known", True, "0 of 0"
)


def _report(*failures: Failure) -> QualityReport:
    count = Checked(
        COUNT.frame, COUNT.expectation, COUNT.column, COUNT.check, not failures, "2 of 10 rows"
    )
    return QualityReport(
        run_id="dkg-1",
        suites=(
            SuiteResult("quarantine", rows=0, evaluated=5, checked=(REASON,)),
            SuiteResult("key_loads", rows=10, evaluated=7, failures=failures, checked=(count,)),
        ),
        skipped={"events": "no events frame given"},
        data_docs=Path("/data/gx/uncommitted/data_docs/skewlab/index.html"),
    )


def test_passing_report() -> None:
    report = _report()
    assert report.ok and report.failures == []
    assert report.summary() == (
        "data quality of dkg-1: PASSED 12 expectations (quarantine, key_loads)"
    )
    report.raise_for_failures()  # no error
    lines = report.text().splitlines()
    assert lines[0] == "# Data quality of `dkg-1`: PASSED"
    assert "Data Docs: file:///data/gx/uncommitted/data_docs/skewlab/index.html" in lines
    # A passing report names every expectation it checked: type, column, result.
    reason = "  - passed quarantine: reason is known [expect_column_values_to_be_in_set(reason)]"
    assert f"{reason}: 0 of 0" in lines
    assert (
        "  - passed key_loads: count >= 0 [expect_column_values_to_be_between(count)]: 2 of 10 rows"
        in lines
    )
    assert "- events: skipped: no events frame given" in lines


def test_failures_are_one_line_each_and_json_safe() -> None:
    report = _report(NEGATIVE, MISSING)
    assert not report.ok
    assert report.failures == [
        "key_loads: count >= 0 [expect_column_values_to_be_between] failed on 2 of 10 rows: "
        "{window_start=1000, key='b', count=-2}; ...",
        "events: has columns ts [expect_table_columns_to_match_set] failed: missing columns ['ts']",
    ]
    doc = json.loads(json.dumps(report.to_dict()))
    assert doc["ok"] is False
    assert doc["suites"][1]["failures"][0]["rows"] == [
        {"window_start": 1000, "key": "b", "count": -2}
    ]
    assert doc["failures"] == report.failures
    assert doc["skipped"] == {"events": "no events frame given"}


def test_raise_for_failures_names_every_failure_in_one_line() -> None:
    with pytest.raises(QualityError) as info:
        _report(NEGATIVE, MISSING).raise_for_failures()
    message = str(info.value)
    assert isinstance(info.value, SkewlabError)
    assert "\n" not in message
    assert message.startswith("data quality of dkg-1: FAILED 2 of 12 expectations: key_loads:")
    assert "count >= 0" in message and "missing columns ['ts']" in message


def test_text_marks_the_failed_expectation_and_quotes_its_rows() -> None:
    text = _report(NEGATIVE).text()
    assert text.startswith("# Data quality of `dkg-1`: FAILED\n")
    assert "FAILED key_loads: count >= 0 [expect_column_values_to_be_between(count)]" in text
    assert "{window_start=1000, key='b', count=-2}" in text


def test_report_round_trips_through_json() -> None:
    report = _report(NEGATIVE, MISSING)
    back = QualityReport.from_dict(json.loads(json.dumps(report.to_dict())))
    assert back == report
    assert back.checked == [REASON, report.suites[1].checked[0]]
    assert back.data_docs == report.data_docs


def test_rows_are_capped_and_cells_cleaned() -> None:
    rows = tuple({"i": i, "x": float("nan"), "raw": b"\x00" * 40} for i in range(9))
    f = Failure("s", "s", "expect_x", "x ok", unexpected=9, total=9, rows=rows)
    assert len(f.rows) == 5
    assert f.rows[0]["x"] is None
    assert f.rows[0]["raw"] == "00" * 32 + "..."
