"""The ``skewlab-kafka`` sink: explicit partitions, headers, at-least-once over a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.fixtures.spark import produce_round_robin, stream_topic

from skewlab.errors import ConfigError
from skewlab.io.kafka.base import KafkaClient
from skewlab.spark.kafka_source import NAME

PARTITIONS = 4

pytestmark = pytest.mark.integration


def read_all(client: KafkaClient, topic: str) -> list:
    ends = client.end_offsets(topic)
    return [r for p, end in sorted(ends.items()) for r in client.fetch(topic, p, 0, end)]


def route(df):
    """Route each event to partition (source partition + 1) % 4, tagging its origin."""
    return df.selectExpr(
        f"CAST((partition + 1) % {PARTITIONS} AS INT) AS partition",
        "key",
        "value",
        "array(named_struct('key', 'src', 'value', "
        "CAST(concat(partition, ':', offset) AS BINARY))) AS headers",
    )


def write_available_now(df, broker, topic: str, checkpoint: Path) -> None:
    query = (
        df.writeStream.format(NAME)
        .option("bootstrap", broker.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None


def test_stream_sink_round_trip_over_restart(spark, broker, new_topic, kafka, tmp_path) -> None:
    events, routed = new_topic(partitions=PARTITIONS), new_topic(partitions=PARTITIONS)
    produce_round_robin(kafka, events, 0, 600)
    checkpoint = tmp_path / "ck"
    df = route(stream_topic(spark, broker.bootstrap, events))

    write_available_now(df, broker, routed, checkpoint)
    assert len(read_all(kafka, routed)) == 600
    produce_round_robin(kafka, events, 600, 400)
    write_available_now(df, broker, routed, checkpoint)

    out = read_all(kafka, routed)
    origins = [dict(r.headers)["src"].decode() for r in out]
    expected = {f"{p}:{o}" for p, end in kafka.end_offsets(events).items() for o in range(end)}
    assert set(origins) == expected  # nothing lost (at-least-once) ...
    assert len(origins) == len(expected) == 1_000  # ... and a clean restart doubles nothing
    for r in out:
        src_partition = int(dict(r.headers)["src"].split(b":")[0])
        assert r.partition == (src_partition + 1) % PARTITIONS
        assert r.value == f"v{int(r.value[1:])}".encode()


def test_batch_sink_writes_explicit_partitions(spark, broker, new_topic, kafka) -> None:
    topic = new_topic(partitions=PARTITIONS)
    df = spark.createDataFrame(
        [(i % PARTITIONS, f"k{i}", f"v{i}".encode(), {"n": b"%d" % i}) for i in range(40)],
        "partition int, key string, value binary, headers map<string, binary>",
    )
    df.write.format(NAME).option("bootstrap", broker.bootstrap).option("topic", topic).mode(
        "append"
    ).save()

    out = read_all(kafka, topic)
    assert sorted((r.partition, r.value) for r in out) == sorted(
        (i % PARTITIONS, f"v{i}".encode()) for i in range(40)
    )
    assert all(dict(r.headers)["n"] == r.value[1:] and r.key == b"k" + r.value[1:] for r in out)


def test_sink_without_partition_column_is_refused(spark, broker, new_topic) -> None:
    df = spark.createDataFrame([(b"x",)], "value binary")
    with pytest.raises(Exception, match="partition") as info:
        df.write.format(NAME).option("bootstrap", broker.bootstrap).option(
            "topic", new_topic(partitions=1)
        ).mode("append").save()
    assert ConfigError.__name__ in str(info.value) or "partition" in str(info.value)
