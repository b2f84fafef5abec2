"""The ``skewlab-kafka`` source against a real broker and a real Spark session.

Each test produces records to explicit partitions of a fresh 4-partition topic (the
client's producer lingers, so tansu forms multi-record batches and its ListOffsets
quirk is exercised), streams them and checks the exact set of (partition, offset).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.integration.fixtures.spark import BatchCollector, produce_round_robin, stream_topic

from skewlab.spark.kafka_source import NAME, cap_offsets

pytestmark = pytest.mark.integration

PARTITIONS = 4


def stream(spark, broker, topic: str, **options: str):
    return stream_topic(spark, broker.bootstrap, topic, **options)


def run_available_now(df, checkpoint: Path, sink: BatchCollector) -> None:
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query = query.trigger(availableNow=True).start()
    query.awaitTermination(120)
    assert not query.isActive, "availableNow query did not finish"
    assert query.exception() is None


def run_until_caught_up(df, checkpoint: Path, sink: BatchCollector) -> None:
    query = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
    query = query.trigger(processingTime="0 seconds").start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None


def test_cap_offsets_is_proportional_and_exact() -> None:
    start = {"0": 0, "1": 10, "2": 5}
    end = {"0": 100, "1": 10, "2": 55}
    capped = cap_offsets(start, end, 31)
    assert sum(capped[p] - start[p] for p in start) == 31
    assert all(start[p] <= capped[p] <= end[p] for p in start)
    assert capped["1"] == 10
    assert cap_offsets(start, end, 1000) == end


def test_stream_reads_every_record_once(spark, broker, new_topic, kafka, tmp_path) -> None:
    topic = new_topic(partitions=PARTITIONS)
    sent = produce_round_robin(kafka, topic, 0, 2_000)
    ends = kafka.end_offsets(topic)
    sink = BatchCollector(("partition", "offset", "value", "key", "headers", "topic"))

    run_available_now(stream(spark, broker, topic), tmp_path / "ck", sink)

    assert len(sink.rows) == 2_000
    assert {(r[0], r[1]) for r in sink.rows} == {
        (p, o) for p, end in ends.items() for o in range(end)
    }
    assert {(r[0], bytes(r[2])) for r in sink.rows} == sent
    first = min(sink.rows, key=lambda r: (r[2] != b"v5", r[0]))
    assert bytes(first[3]) == b"k5"
    assert [(h["key"], bytes(h["value"])) for h in first[4]] == [("i", b"5")]
    assert first[5] == topic


def test_max_events_per_trigger_splits_batches(spark, broker, new_topic, kafka, tmp_path) -> None:
    topic = new_topic(partitions=PARTITIONS)
    produce_round_robin(kafka, topic, 0, 1_000)
    sink = BatchCollector()

    run_until_caught_up(
        stream(spark, broker, topic, maxEventsPerTrigger="300"), tmp_path / "ck", sink
    )

    sizes = [n for _, n in sink.batches if n]
    assert sizes == [300, 300, 300, 100]
    assert len({(r[0], r[1]) for r in sink.rows}) == len(sink.rows) == 1_000


def test_restart_reads_only_new_records(spark, broker, new_topic, kafka, tmp_path) -> None:
    topic = new_topic(partitions=PARTITIONS)
    first = produce_round_robin(kafka, topic, 0, 800)
    checkpoint = tmp_path / "ck"
    run1, run2 = BatchCollector(), BatchCollector()
    df = stream(spark, broker, topic, maxEventsPerTrigger="250")

    run_until_caught_up(df, checkpoint, run1)
    second = produce_round_robin(kafka, topic, 800, 600)
    run_until_caught_up(df, checkpoint, run2)

    assert {(r[0], bytes(r[3])) for r in run1.rows} == first
    assert {(r[0], bytes(r[3])) for r in run2.rows} == second
    assert len(run1.rows) == 800 and len(run2.rows) == 600
    assert max(n for _, n in run2.batches) <= 250


def test_starting_offsets_latest_and_json(spark, broker, new_topic, kafka, tmp_path) -> None:
    topic = new_topic(partitions=PARTITIONS)
    produce_round_robin(kafka, topic, 0, 400)
    start = {"0": 90, "1": 100, "2": 0, "3": 99}
    sink = BatchCollector()
    df = stream(spark, broker, topic, startingOffsets=json.dumps(start))
    run_available_now(df, tmp_path / "ck-json", sink)
    assert sorted((r[0], r[1]) for r in sink.rows) == sorted(
        (int(p), o) for p, s in start.items() for o in range(s, 100)
    )

    latest = BatchCollector()
    run_available_now(
        stream(spark, broker, topic, startingOffsets="latest"), tmp_path / "ck-l", latest
    )
    assert latest.rows == []


def test_batch_read_between_offsets(spark, broker, new_topic, kafka) -> None:
    topic = new_topic(partitions=PARTITIONS)
    produce_round_robin(kafka, topic, 0, 400)
    df = (
        spark.read.format(NAME)
        .option("bootstrap", broker.bootstrap)
        .option("topic", topic)
        .option("startingOffsets", json.dumps({"0": 10}))
        .option("endingOffsets", json.dumps({"0": 20, "1": 5, "2": 0, "3": 0}))
        .load()
    )
    rows = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert rows == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(5)]
    assert (
        spark.read.format(NAME)
        .option("bootstrap", broker.bootstrap)
        .option("topic", topic)
        .load()
        .count()
        == 400
    )
