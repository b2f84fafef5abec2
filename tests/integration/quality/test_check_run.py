"""``check_run`` on real Delta tables, a real events topic, real GX Data Docs and MLflow.

Two runs share one store and one data dir: a good one and one with every kind
of damage (a negative count, a missing window, a result off by one, a
quarantine row with an empty reason). Each is judged on its own rows only.
The data dir is laid out as a live run leaves it: ``<home>/delta`` for the
tables, ``<home>/runs/<run_id>/handle.json`` naming the broker and the run's
events topic; GX keeps its project and Data Docs in ``<home>/gx``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.pipeline.events import REASONS, encode, producer_mark
from skewlab.quality import (
    DATA_DOCS,
    REPORT_JSON,
    REPORT_MD,
    QualityError,
    QualityReport,
    check_run,
    events_frame,
    log_quality,
)

if TYPE_CHECKING:
    from tests.integration.fixtures.broker import RunningBroker

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


def _produce_run_events(
    home: Path, run_id: str, broker: RunningBroker, topic: str, *, late: bool = False
) -> int:
    """The run's input (key i: i + 1 events per window) in ``topic``, and its handle.

    Events go round-robin to 2 partitions in time order; ``late`` appends one
    event whose ``ts`` goes back in time. Returns the number of events produced.
    """
    client = connect(KafkaSettings(broker.bootstrap))
    seq = 0
    mark = [producer_mark(topic)]  # sent as the run's own producer sends them
    try:
        for w in WINDOWS:
            for i, k in enumerate(KEYS):
                for _ in range(i + 1):
                    ts = w / 1000 + 0.01 * seq
                    client.produce(topic, encode(k, ts, seq), partition=seq % 2, headers=mark)
                    seq += 1
        if late:
            client.produce(topic, encode("a", 0.5, seq), partition=0, headers=mark)
            seq += 1
        client.flush()
    finally:
        client.close()
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = {
        "run_id": run_id,
        "bootstrap": broker.bootstrap,
        "events_topic": topic,
        "settings": {"client": "confluent"},
        "produced": {"events": seq, "seconds": 1.0},
    }
    (run_dir / "handle.json").write_text(json.dumps(handle))
    return seq


def _validation_json(home: Path, report: QualityReport, frame: str) -> dict[str, Any]:
    """The stored GX validation result of ``frame`` for the report's run (from Data Docs' store)."""
    found = list((home / "gx" / "uncommitted" / "validations").rglob(f"skewlab-{frame}.json"))
    mine = [p for p in found if report.run_id in p.parts]
    assert len(mine) == 1, found
    doc: dict[str, Any] = json.loads(mine[0].read_text())
    return doc


def _index_links(index: Path) -> set[str]:
    return set(re.findall(r'href="(validations/[^"]+\.html)"', index.read_text()))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_good_run_passes_lists_its_expectations_and_lands_in_data_docs_and_mlflow(
    home: Path, broker: RunningBroker, new_topic: Callable[..., str], tracking: Tracker
) -> None:
    store = DeltaStore(home / "delta")
    _write_run(store, "good")
    _write_run(store, "bad", negative=True, off_by_one=True)  # must not leak into "good"
    produced = _produce_run_events(home, "good", broker, new_topic(2, "events"))

    report = check_run(store, "good", events_counts=_counts(), window_s=1.0)

    assert report.ok, report.failures
    assert [s.suite for s in report.suites] == [
        "events",
        "quarantine",
        "key_loads",
        "partition_loads",
        "results",
    ]
    assert [s.rows for s in report.suites] == [produced, 1, 9, 6, 9]
    assert report.skipped == {}
    events = report.suites[0]
    assert events.note.startswith(f"full count: all {produced} records")
    assert "holds every produced event (18)" in {c.check for c in events.checked if c.success}
    report.raise_for_failures()
    # A passing report names every expectation: type, column and verdict of each.
    assert len(report.checked) == sum(s.evaluated for s in report.suites)
    assert all(c.success and c.expectation.startswith("expect_") for c in report.checked)
    assert ("key_loads", "count") in {(c.frame, c.column) for c in report.checked}

    # The data dir's GX site: its index links every validation page of the run.
    index = home / "gx" / "uncommitted" / "data_docs" / "skewlab" / "index.html"
    assert report.data_docs == index
    pages = {f: Path(p) for s in report.suites for f, p in s.pages.items()}
    assert set(pages) >= {"events", "key_loads", "key_loads.windows", "results.totals"}
    assert all(p.is_file() for p in pages.values())
    links = _index_links(index)
    site = index.parent
    assert {str(p.relative_to(site)) for p in pages.values()} <= links
    assert _validation_json(home, report, "events")["success"] is True

    rid = tracking.start_run(f"quality-{uuid.uuid4().hex[:8]}", "good")
    log_quality(tracking, rid, report)
    run = tracking.get_run_summary(rid)
    assert run.tags["quality"] == "passed"
    run_page = index.parent / "runs" / "good.html"  # the run's own page, beside the index
    assert run_page.is_file() and run.tags["quality_data_docs"] == run_page.as_uri()
    assert run.metrics["quality_ok"] == 1.0 and run.metrics["quality_failures"] == 0.0
    assert run.metrics["quality_expectations"] == len(report.checked)
    artifacts = tracking.artifact_dir(rid)
    assert artifacts is not None
    doc = json.loads((artifacts / REPORT_JSON).read_text())
    assert doc["ok"] is True and doc["run_id"] == "good"
    assert QualityReport.from_dict(doc) == report
    text = (artifacts / REPORT_MD).read_text()
    assert all(c.check in text for c in report.checked)
    logged = artifacts / DATA_DOCS
    assert (logged / "index.html").is_file()
    for page in pages.values():
        assert (logged / page.relative_to(site)).is_file()


def test_damaged_run_fails_naming_each_expectation_in_the_report_and_the_data_docs(
    home: Path, tracking: Tracker
) -> None:
    store = DeltaStore(home / "delta")
    _write_run(store, "good")
    _write_run(store, "bad", negative=True, drop_window=1000, off_by_one=True, reason="")

    report = check_run(store, "bad", events_counts=_counts(), window_s=1.0)

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
    failed = {(c.frame, c.check) for c in report.checked if not c.success}
    assert ("key_loads", "count >= 0") in failed and len(failed) == 4
    assert report.skipped["events"].startswith("run has no handle")
    with pytest.raises(QualityError, match=r"FAILED 4 of \d+ expectations: quarantine: reason"):
        report.raise_for_failures()

    # The failure is in GX's own stored validation (what the Data Docs page renders).
    doc = _validation_json(home, report, "key_loads")
    assert doc["success"] is False
    verdicts = {r["expectation_config"]["description"]: r["success"] for r in doc["results"]}
    assert verdicts["count >= 0"] is False and verdicts["bytes >= 0"] is True
    assert doc["results"][0]["expectation_config"]["type"].startswith("expect_")
    assert report.data_docs is not None
    assert str(Path(report.suites[1].pages["key_loads"]).relative_to(report.data_docs.parent)) in (
        _index_links(report.data_docs)
    )

    rid = tracking.start_run(f"quality-{uuid.uuid4().hex[:8]}", "bad")
    log_quality(tracking, rid, report)
    run = tracking.get_run_summary(rid)
    assert run.tags["quality"] == "failed" and run.metrics["quality_failures"] == 4.0
    artifacts = tracking.artifact_dir(rid)
    assert artifacts is not None
    text = (artifacts / REPORT_MD).read_text()
    assert "FAILED key_loads: count >= 0 [expect_column_values_to_be_between(count)]" in text
    assert "{window_start=2000, key='c', count=4, expected=3}" in text


def test_events_suite_samples_a_large_topic_and_skips_a_deleted_one(
    home: Path, broker: RunningBroker, new_topic: Callable[..., str]
) -> None:
    store = DeltaStore(home / "delta")
    _write_run(store, "late")
    topic = new_topic(2, "events")
    produced = _produce_run_events(home, "late", broker, topic, late=True)

    report = check_run(store, "late", window_s=1.0, events_limit=8)
    # A sample is no input count: exactness is skipped, not judged against 8 events.
    assert report.ok and report.skipped["results.totals"].startswith("no input counts")
    events = report.suites[0]
    assert events.suite == "events" and events.rows == 8
    assert events.note.startswith(f"sample: the first 8 of {produced} records")
    assert events.ok  # the late event is past the sample; no row count for a sample
    assert "holds every produced event" not in " ".join(c.check for c in events.checked)

    report = check_run(store, "late", events_counts=_counts(), window_s=1.0)
    assert report.suites[0].rows == produced
    assert [f.split(" [", 1)[0] for f in report.failures] == [
        "events: ts never decreases within a partition (offset order)"
    ]

    admin = connect(KafkaSettings(broker.bootstrap))
    admin.delete_topic(topic)
    admin.close()
    report = check_run(store, "late", events_counts=_counts(), window_s=1.0)
    assert report.ok and "events" not in [s.suite for s in report.suites]
    assert (
        report.skipped["events"] == f"events topic {topic} is gone (deleted when the run stopped)"
    )


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
    assert report.data_docs is None and set(report.skipped) == {"data_docs"}

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
