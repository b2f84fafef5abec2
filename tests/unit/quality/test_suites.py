"""The GE suites on crafted frames: good data passes, each kind of bad data fails by name.

Real Great Expectations (an ephemeral context, pandas batches); no Delta, no MLflow.
"""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest

from skewlab.errors import ConfigError
from skewlab.pipeline.events import REASONS
from skewlab.quality import (
    counts_frame,
    events_frame,
    validate_events,
    validate_key_loads,
    validate_partition_loads,
    validate_quarantine,
    validate_results,
    window_grid,
)
from skewlab.quality.report import SuiteResult
from skewlab.quality.suites import events_checks, run_suite

pytestmark = pytest.mark.unit


def _event(key: str, ts: float, seq: int) -> bytes:
    return json.dumps({"key": key, "ts": ts, "seq": seq}).encode()


def good_events() -> pd.DataFrame:
    recs = [
        (p, o, _event(f"k{o % 3}", 100.0 + o + p / 10, 2 * o + p)) for p in (0, 1) for o in range(6)
    ]
    return events_frame(recs)


def good_key_loads() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "window_start": [0, 0, 1000, 2000, 2000, 3000],
            "key": ["a", "b", "a", "a", "c", "b"],
            "worker": [0, 1, 0, 0, 1, 1],
            "count": [3, 1, 2, 5, 0, 4],
            "bytes": [300, 100, 200, 500, 0, 400],
        }
    )


def good_partition_loads() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "window_start": [0, 0, 1000, 2000, 3000],
            "topic": ["routed"] * 5,
            "partition": [0, 1, 0, 1, 0],
            "bytes": [300, 100, 200, 0, 50],
            "records": [3, 1, 2, 0, 1],
            "bytes_per_s": [300.0, 100.0, 200.0, 0.0, 50.0],
        }
    )


def good_results() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "window_start": [0, 0, 1000],
            "key": ["a", "b", "a"],
            "count": [3, 1, 2],
            "sum": [300.0, 100.0, 200.0],
        }
    )


def good_quarantine() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "raw": [b"{", None],
            "topic": ["events", "events"],
            "partition": [0, 1],
            "offset": [7, 9],
            "reason": ["not-json", "empty"],
            "ts": [1, 2],
            "raw_bytes": [1, 0],
            "raw_sha256": [hashlib.sha256(b"{").hexdigest(), hashlib.sha256(b"").hexdigest()],
        }
    )


def _only_failure(result: SuiteResult) -> str:
    assert len(result.failures) == 1, [f.line() for f in result.failures]
    return result.failures[0].line()


# ------------------------------------------------------------------------------ good data


def test_good_data_passes_every_suite() -> None:
    expected = pd.DataFrame({"key": ["a", "b"], "count": [5, 1]})
    results = [
        validate_events(good_events()),
        validate_key_loads(good_key_loads(), window_ms=1000),
        validate_partition_loads(good_partition_loads()),
        validate_results(good_results(), expected),
        validate_quarantine(good_quarantine()),
    ]
    for r in results:
        assert r.ok, [f.line() for f in r.failures]
        assert r.evaluated >= 4
    assert [r.rows for r in results] == [12, 6, 5, 3, 2]


def test_every_expectation_is_named_with_its_column_and_result() -> None:
    bad = good_key_loads()
    bad.loc[3, "count"] = -5
    result = validate_key_loads(bad, window_ms=1000)
    assert len(result.checked) == result.evaluated
    by_check = {c.check: c for c in result.checked}
    count = by_check["count >= 0"]
    assert (count.frame, count.expectation, count.column) == (
        "key_loads",
        "expect_column_values_to_be_between",
        "count",
    )
    assert not count.success and count.observed == "1 of 6 rows unexpected"
    bytes_ = by_check["bytes >= 0"]
    assert bytes_.success and bytes_.column == "bytes"
    assert by_check["has columns window_start, key, worker, count, bytes"].column == ""
    assert [c.check for c in result.checked if not c.success] == ["count >= 0"]
    assert {c.frame for c in result.checked} == {"key_loads", "key_loads.windows"}


def test_events_row_count_must_match_the_produced_count() -> None:
    frame = good_events()
    assert validate_events(frame, expected_rows=len(frame)).ok
    line = _only_failure(validate_events(frame, expected_rows=len(frame) + 1))
    assert line.startswith(f"events: holds every produced event ({len(frame) + 1})")
    assert f"observed {len(frame)}" in line


def test_empty_quarantine_passes_but_empty_loads_do_not() -> None:
    assert validate_quarantine(good_quarantine().iloc[0:0]).ok
    line = _only_failure(validate_key_loads(good_key_loads().iloc[0:0]))
    assert line.startswith("key_loads: the run has key_loads rows [expect_table_row_count")
    assert "observed 0" in line
    assert validate_key_loads(good_key_loads().iloc[0:0], require_rows=False).ok


# ------------------------------------------------------------------------------ bad data


def test_negative_count_is_named_with_its_row() -> None:
    bad = good_key_loads()
    bad.loc[3, "count"] = -5
    line = _only_failure(validate_key_loads(bad, window_ms=1000))
    assert line == (
        "key_loads: count >= 0 [expect_column_values_to_be_between] failed on 1 of 6 rows: "
        "{window_start=2000, key='a', worker=0, count=-5}"
    )


def test_negative_partition_bytes_fail() -> None:
    bad = good_partition_loads()
    bad.loc[1, "bytes_per_s"] = -1.0
    line = _only_failure(validate_partition_loads(bad))
    assert line.startswith("partition_loads: bytes_per_s >= 0 [expect_column_values_to_be_between]")
    assert "{window_start=0, topic='routed', partition=1, bytes_per_s=-1.0}" in line


def test_missing_window_is_named() -> None:
    bad = good_key_loads()
    bad = bad[bad["window_start"] != 1000]
    line = _only_failure(validate_key_loads(bad, window_ms=1000))
    assert line == (
        "key_loads.windows: every window between the first and the last has rows "
        "[expect_column_values_to_be_between] failed on 1 of 4 rows: {window_start=1000, rows=0}"
    )
    assert validate_key_loads(bad, windows=[0, 2000, 3000]).ok  # the input had no window 1000
    line = _only_failure(validate_key_loads(bad, windows=[0, 1000]))
    assert line.startswith("key_loads.windows: every window of the reference has rows")


def test_missing_window_found_without_the_window_size() -> None:
    bad = good_partition_loads()
    bad = bad[bad["window_start"] != 2000]  # gaps 1000, 2000: the step is inferred as 1000
    line = _only_failure(validate_partition_loads(bad))
    assert line.startswith("partition_loads.windows: every window between")
    assert line.endswith("failed on 1 of 4 rows: {window_start=2000, rows=0}")


def test_result_total_off_by_one_fails_exactness() -> None:
    expected = pd.DataFrame({"key": ["a", "b"], "count": [5, 2]})
    line = _only_failure(validate_results(good_results(), expected))
    assert line == (
        "results.totals: per-key totals equal the input count "
        "[expect_column_pair_values_to_be_equal] failed on 1 of 2 rows: "
        "{key='b', count=1, expected=2}"
    )


def test_exactness_per_window_with_plain_count_mapping() -> None:
    counts = {(0.0, "a"): (3, 300), (0.0, "b"): (1, 100), (1000.0, "a"): (2, 200)}
    assert validate_results(good_results(), counts_frame(counts)).ok
    counts[(1000.0, "z")] = (1, 10)  # an input key the results lost
    line = _only_failure(validate_results(good_results(), counts_frame(counts)))
    assert line.startswith("results.totals: per-(window, key) totals equal the input count")
    assert "{window_start=1000, key='z', count=0, expected=1}" in line


def test_duplicate_result_row_fails() -> None:
    bad = pd.concat([good_results(), good_results().iloc[[2]]], ignore_index=True)
    line = _only_failure(validate_results(bad))
    assert line.startswith("results: one row per (window_start, key) [expect_compound_columns")
    assert "failed on 2 of 4 rows" in line


def test_quarantine_row_without_reason_fails() -> None:
    bad = good_quarantine()
    bad.loc[1, "reason"] = None
    line = _only_failure(validate_quarantine(bad))
    assert line == (
        "quarantine: reason is present [expect_column_values_to_not_be_null] failed on 1 of 2 "
        "rows: {topic='events', partition=1, offset=9, reason=None}"
    )


def test_quarantine_reason_outside_the_known_ones_fails() -> None:
    bad = good_quarantine()
    bad.loc[0, "reason"] = "cosmic-ray"
    line = _only_failure(validate_quarantine(bad))
    assert line.startswith("quarantine: reason is one of " + ", ".join(REASONS))
    assert "{topic='events', partition=0, offset=7, reason='cosmic-ray'}" in line


def test_non_monotone_ts_names_partition_and_offset() -> None:
    recs = [
        (0, 0, _event("a", 10.0, 0)),
        (0, 1, _event("b", 12.0, 2)),
        (0, 2, _event("a", 11.5, 4)),  # back in time
        (1, 0, _event("c", 5.0, 1)),  # another partition may be earlier
    ]
    line = _only_failure(validate_events(events_frame(recs)))
    assert line == (
        "events: ts never decreases within a partition (offset order) "
        "[expect_column_pair_values_a_to_be_greater_than_b] failed on 1 of 4 rows: "
        "{partition=0, offset=2, ts=11.5, ts_prev=12.0}"
    )


def test_a_foreign_record_with_an_older_ts_is_not_a_break_in_the_producers_order() -> None:
    recs = [
        (0, 0, _event("a", 10.0, 0)),
        (0, 1, _event("b", 12.0, 2)),
        (0, 2, _event("a", 10.0, 0)),  # an outsider's copy of seq 0, written later
        (0, 3, _event("c", 12.5, 4)),  # the producer's next: compared with 12.0, not 10.0
        (0, 4, _event("d", 11.0, 6)),  # the producer going back in time: still caught
    ]
    frame = events_frame(recs)
    run = run_suite("events", events_checks(frame, foreign={(0, 2)}), None)
    assert _only_failure(run) == (
        "events: ts never decreases within a partition (offset order) "
        "[expect_column_pair_values_a_to_be_greater_than_b] failed on 1 of 5 rows: "
        "{partition=0, offset=4, ts=11.0, ts_prev=12.5}"
    )
    unmarked = run_suite("events", events_checks(frame), None)  # every row the producer's
    assert "failed on 2 of 5 rows" in _only_failure(unmarked)


def test_events_schema_and_missing_key() -> None:
    line = _only_failure(validate_events(good_events().drop(columns=["seq"])))
    assert line == (
        "events: has columns partition, offset, key, ts, seq [expect_table_columns_to_match_set] "
        "failed: missing columns ['seq']"
    )
    frame = good_events()
    frame.loc[4, "key"] = None
    line = _only_failure(validate_events(frame))
    assert line.startswith("events: key is present [expect_column_values_to_not_be_null]")


def test_at_most_five_rows_are_quoted() -> None:
    bad = good_key_loads()
    bad["bytes"] = -1
    failure = validate_key_loads(bad).failures[0]
    assert failure.unexpected == 6 and failure.total == 6
    assert len(failure.rows) == 5
    assert failure.line().endswith("; ...")


def test_events_frame_leaves_rejects_out() -> None:
    frame = events_frame([(0, 0, _event("a", 1.0, 0)), (0, 1, b"not json"), (1, 0, None)])
    assert list(frame.columns) == ["partition", "offset", "key", "ts", "seq"]
    assert frame.to_dict("records") == [
        {"partition": 0, "offset": 0, "key": "a", "ts": 1.0, "seq": 0}
    ]


def test_window_grid() -> None:
    grid = window_grid(pd.Series([0, 0, 3000, 6000, 9000]), window_ms=1500)
    assert grid["window_start"].tolist() == [0, 1500, 3000, 4500, 6000, 7500, 9000]
    assert grid["rows"].tolist() == [2, 0, 1, 0, 1, 0, 1]
    inferred = window_grid(pd.Series([0, 2000, 5000]))
    assert inferred["window_start"].tolist() == [0, 1000, 2000, 3000, 4000, 5000]
    assert window_grid(pd.Series([], dtype="int64")).empty
    reference = window_grid(pd.Series([0, 4000, 5000]), window_ms=1000, expected=[0, 5000, 6000])
    assert reference.to_dict("list") == {
        "window_start": [0, 4000, 5000, 6000],
        "rows": [1, 1, 1, 0],
    }
    with pytest.raises(ConfigError, match="window_ms must be an integer >= 1"):
        window_grid(pd.Series([0]), window_ms=0)
    with pytest.raises(ConfigError, match="exceeds"):
        window_grid(pd.Series([0, 10**12]), window_ms=1)


def test_input_counts_need_key_and_count() -> None:
    with pytest.raises(ConfigError, match=r"missing \['count'\]"):
        validate_results(good_results(), pd.DataFrame({"key": ["a"], "n": [1]}))
