"""``check_run`` on real Delta tables and ``log_quality`` into a real MLflow store.

Two runs share one store: a good one and one with every kind of damage (a
negative count, a missing window, a result off by one, a quarantine row with
an empty reason). Each is judged on its own rows only.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING

import pytest

from skewlab.pipeline.events import REASONS
from skewlab.quality import (
    REPORT_JSON,
    REPORT_MD,
    QualityError,
    check_run,
    events_frame,
    log_quality,
)

if TYPE_CHECKING:
    from skewlab.io.delta import DeltaStore
    from skewlab.io.tracking import Tracker

pytestmark = pytest.mark.integration

WINDOWS = (0, 1000, 2000)
KEYS = ("a", "b", "c")


def _counts() -> dict[tuple[float, str], tuple[int, int]]:
    """The input count of the crafted run: key i has i + 1 events in every window."""
    return {(float(w), k): (i + 1, 100 * (i + 1)) for w in WINDOWS for i, k in enumerate(KEYS)}


def _write_run(
    store: DeltaStore,
    run_id: str,
    *,
    negative: bool = False,
    drop_window: int | None = None,
    off_by_one: bool = False,
    reason: str = "not-json",
) -> None:
    counts = _counts()
    key_loads = [
        {"window_start": int(w), "key": k, "worker": i % 2, "count": c, "bytes": b}
        for i, ((w, k), (c, b)) in enumerate(sorted(counts.items()))
    ]
    if negative:
        key_loads[4]["count"] = -3
    per_window: dict[tuple[int, int], list[int]] = {}
    for r in key_loads:
        slot = per_window.setdefault((r["window_start"], r["worker"]), [0, 0])
        slot[0] += r["bytes"]
        slot[1] += r["count"]
    partition_loads = [
        {
            "window_start": w,
            "topic": "routed",
            "partition": p,
            "bytes": b,
            "records": n,
            "bytes_per_s": float(b),
        }
        for (w, p), (b, n) in sorted(per_window.items())
        if w != drop_window
    ]
    results = [
        {"window_start": int(w), "key": k, "count": c, "sum": float(b)}
        for (w, k), (c, b) in sorted(counts.items())
    ]
    if off_by_one:
        results[-1]["count"] += 1
    quarantine = [
        {"raw": b"{", "topic": "events", "partition": 0, "offset": 9, "reason": reason, "ts": 1}
    ]
    for table, rows in (
        ("key_loads", key_loads),
        ("partition_loads", partition_loads),
        ("results", results),
        ("quarantine", quarantine),
    ):
        store.append(table, rows, app_id=f"test:{run_id}", version=0, run_id=run_id)


def test_good_run_passes_and_its_report_lands_in_mlflow(
    delta_store: DeltaStore, tracking: Tracker
) -> None:
    _write_run(delta_store, "good")
    _write_run(delta_store, "bad", negative=True, off_by_one=True)  # must not leak into "good"

    report = check_run(delta_store, "good", events_counts=_counts(), window_s=1.0)

    assert report.ok, report.failures
    assert [s.suite for s in report.suites] == [
        "quarantine",
        "key_loads",
        "partition_loads",
        "results",
    ]
    assert [s.rows for s in report.suites] == [1, 9, 6, 9]
    assert report.skipped == {"events": "no events frame given"}
    report.raise_for_failures()

    rid = tracking.start_run(f"quality-{uuid.uuid4().hex[:8]}", "good")
    log_quality(tracking, rid, report)
    run = tracking.get_run_summary(rid)
    assert run.tags["quality"] == "passed"
    assert run.metrics["quality_ok"] == 1.0 and run.metrics["quality_failures"] == 0.0
    artifacts = tracking.artifact_dir(rid)
    assert artifacts is not None
    doc = json.loads((artifacts / REPORT_JSON).read_text())
    assert doc["ok"] is True and doc["run_id"] == "good"
    assert (artifacts / REPORT_MD).read_text().startswith("# Data quality of `good`: PASSED")


def test_damaged_run_fails_naming_each_expectation_and_row(
    delta_store: DeltaStore, tracking: Tracker
) -> None:
    _write_run(delta_store, "good")
    _write_run(delta_store, "bad", negative=True, drop_window=1000, off_by_one=True, reason="")

    report = check_run(delta_store, "bad", events_counts=_counts(), window_s=1.0)

    assert not report.ok
    assert report.failures == [
        f"quarantine: reason is one of {', '.join(REASONS)} [expect_column_values_to_be_in_set] "
        "failed on 1 of 1 rows: {topic='events', partition=0, offset=9, reason=''}",
        "key_loads: count >= 0 [expect_column_values_to_be_between] failed on 1 of 9 rows: "
        "{window_start=1000, key='b', worker=0, count=-3}",
        "partition_loads.windows: every window of the reference has rows "
        "[expect_column_values_to_be_between] failed on 1 of 3 rows: "
        "{window_start=1000, rows=0}",
        "results.totals: per-(window, key) totals equal the input count "
        "[expect_column_pair_values_to_be_equal] failed on 1 of 9 rows: "
        "{window_start=2000, key='c', count=4, expected=3}",
    ]
    with pytest.raises(QualityError, match=r"FAILED 4 of \d+ expectations: quarantine: reason"):
        report.raise_for_failures()

    rid = tracking.start_run(f"quality-{uuid.uuid4().hex[:8]}", "bad")
    log_quality(tracking, rid, report)
    run = tracking.get_run_summary(rid)
    assert run.tags["quality"] == "failed" and run.metrics["quality_failures"] == 4.0
    artifacts = tracking.artifact_dir(rid)
    assert artifacts is not None
    md = (artifacts / REPORT_MD).read_text()
    assert "`{window_start=2000, key='c', count=4, expected=3}`" in md


def test_events_frame_adds_the_events_suite_and_the_per_key_count(
    delta_store: DeltaStore,
) -> None:
    _write_run(delta_store, "ev")
    records = []
    offset = 0
    for w in WINDOWS:
        for i, k in enumerate(KEYS):
            for _ in range(i + 1):
                ts = w / 1000 + 0.001 * offset
                value = json.dumps({"key": k, "ts": ts, "seq": offset}).encode()
                records.append((0, offset, value))
                offset += 1
    events = events_frame(records)

    report = check_run(delta_store, "ev", events=events, window_s=1.0)
    assert report.ok, report.failures
    assert report.suites[0].suite == "events" and report.suites[0].rows == 18
    assert report.skipped == {}

    late = events_frame(
        [*records, (0, offset, json.dumps({"key": "a", "ts": 0.5, "seq": 99}).encode())]
    )
    report = check_run(delta_store, "ev", events=late, window_s=1.0)
    assert [f.split(" [", 1)[0] for f in report.failures] == [
        "events: ts never decreases within a partition (offset order)",
        "results.totals: per-key totals equal the input count",
    ]


def test_a_window_without_input_is_no_loss(delta_store: DeltaStore) -> None:
    """A producer stalled for longer than a window leaves a gap in every table: not an error."""
    _write_run(delta_store, "stall")
    gap = {k: v for k, v in _counts().items() if k[0] != 1000.0}
    rows = {"key_loads": [], "partition_loads": [], "results": []}
    for table in rows:
        full = delta_store.read(table, run_id="stall").to_pylist()
        rows[table] = [{**r, "run_id": "gap"} for r in full if r["window_start"] != 1000]
        delta_store.append(table, rows[table], app_id="test:gap", version=0, run_id="gap")

    report = check_run(delta_store, "gap", events_counts=gap, window_s=1.0)
    assert report.ok, report.failures
    report = check_run(delta_store, "gap", window_s=1.0)  # reference: the results' windows
    assert report.ok, report.failures
    assert report.skipped["results.totals"].startswith("no input counts")
