"""QualityReport: verdict, one-line failures, dict / Markdown rendering, the raised error."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skewlab.errors import SkewlabError
from skewlab.quality.report import Failure, QualityError, QualityReport, SuiteResult

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


def _report(*failures: Failure) -> QualityReport:
    return QualityReport(
        run_id="dkg-1",
        suites=(
            SuiteResult("quarantine", rows=0, evaluated=5),
            SuiteResult("key_loads", rows=10, evaluated=7, failures=failures),
        ),
        skipped={"events": "no events frame given"},
    )


def test_passing_report() -> None:
    report = _report()
    assert report.ok and report.failures == []
    assert report.summary() == (
        "data quality of dkg-1: PASSED 12 expectations (quarantine, key_loads)"
    )
    report.raise_for_failures()  # no error
    md = report.to_markdown()
    assert md.startswith("# Data quality of `dkg-1`: PASSED\n")
    assert "| key_loads | 10 | 7 | 0 |" in md
    assert "| events | - | skipped: no events frame given | - |" in md


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


def test_markdown_lists_failures_with_rows() -> None:
    md = _report(NEGATIVE).to_markdown()
    assert "# Data quality of `dkg-1`: FAILED" in md
    assert "- **key_loads**: count >= 0 (`expect_column_values_to_be_between`)" in md
    assert "  - offending rows: 2 of 10" in md
    assert "  - `{window_start=1000, key='b', count=-2}`" in md


def test_rows_are_capped_and_cells_cleaned() -> None:
    rows = tuple({"i": i, "x": float("nan"), "raw": b"\x00" * 40} for i in range(9))
    f = Failure("s", "s", "expect_x", "x ok", unexpected=9, total=9, rows=rows)
    assert len(f.rows) == 5
    assert f.rows[0]["x"] is None
    assert f.rows[0]["raw"] == "00" * 32 + "..."
