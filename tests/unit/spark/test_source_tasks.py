"""The source's ``maxTasks`` (ranges dealt to fewer tasks) and ``decode`` (the route
job's decode in the reading task) options, on an in-memory client."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from skewlab.errors import ConfigError
from skewlab.io.kafka.base import FetchedRange, Record
from skewlab.pipeline import events
from skewlab.spark import kafka_source
from skewlab.spark.kafka_source import (
    KafkaRangePartition,
    KafkaRangesPartition,
    KafkaSourceOptions,
    plan_partitions,
    read_range,
)
from skewlab.spark.route import decode_fn

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("max_tasks", [1, 2, 3, 4, 9])
def test_every_range_lands_in_exactly_one_of_at_most_max_tasks(max_tasks: int) -> None:
    start = {"0": 5, "1": 0, "2": 7, "3": 0, "4": 2}
    end = {"0": 9, "1": 4, "2": 7, "3": 3, "4": 8}  # partition 2 has nothing to read
    one_each = plan_partitions("t", start, end)
    grouped = plan_partitions("t", start, end, max_tasks)
    assert all(isinstance(g, KafkaRangesPartition) for g in grouped)
    assert len(grouped) == min(max_tasks, len(one_each))
    flat = [r for g in grouped for r in g.ranges]  # type: ignore[union-attr]
    assert sorted(flat, key=lambda r: r.partition) == one_each
    assert plan_partitions("t", end, end, max_tasks) == []


def test_bad_options_are_refused() -> None:
    base = {"bootstrap": "h:1", "topic": "t"}
    with pytest.raises(ConfigError, match="maxTasks"):
        KafkaSourceOptions.from_options({**base, "maxTasks": "0"})
    with pytest.raises(ConfigError, match="decode"):
        KafkaSourceOptions.from_options({**base, "decode": "nope"})
    opts = KafkaSourceOptions.from_options({**base, "decode": "events", "fields": "key"})
    assert opts.fields == ("partition", "offset", "value")


class Client:
    def __init__(self, logs: dict[int, list[Record]]) -> None:
        self.logs = logs
        self.closed = 0

    def fetch(self, topic: str, p: int, start: int, end: int) -> Iterator[Record]:
        yield from self.logs[p][start:end]

    def close(self) -> None:
        self.closed += 1


def test_a_task_of_several_ranges_decodes_them_as_the_route_job_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logs: dict[int, list[Record]] = {}
    for p in range(3):
        logs[p] = [
            Record("t", p, o, None, events.encode(f"k{o % 4}", 10.0 + o, o, "x" * p))
            for o in range(6)
        ]
    logs[1][2] = Record("t", 1, 2, None, b'{"key": 3}')  # a reject keeps its bytes
    logs[2][4] = Record("t", 2, 4, None, b"x" * 300)  # too large for maxEventBytes
    client = Client(logs)
    monkeypatch.setattr(kafka_source, "connect", lambda s: client)
    opts = KafkaSourceOptions.from_options(
        {"bootstrap": "h:1", "topic": "t", "decode": "events", "maxEventBytes": "200"}
    )
    task = KafkaRangesPartition(
        (KafkaRangePartition("t", 0, 1, 6), KafkaRangePartition("t", 2, 0, 5))
    )
    got = pa.Table.from_batches(list(read_range(opts, task)))
    raw = [r for p, lo, hi in ((0, 1, 6), (2, 0, 5)) for r in logs[p][lo:hi]]
    plain = pa.record_batch(
        {
            "partition": pa.array([r.partition for r in raw], pa.int32()),
            "offset": pa.array([r.offset for r in raw], pa.int64()),
            "value": pa.array([r.value for r in raw], pa.binary()),
        }
    )
    want = pa.Table.from_batches(list(decode_fn(200)(iter([plain]))))
    assert got.to_pylist() == want.to_pylist()
    assert got.column("reason").to_pylist().count("too-large") == 1
    assert client.closed == 1

    bad = KafkaRangesPartition((KafkaRangePartition("t", 1, 0, 6),))
    rows = pa.Table.from_batches(list(read_range(opts, bad))).to_pylist()
    assert [r["reason"] for r in rows].count(None) == 5
    assert rows[2]["raw"] == b'{"key": 3}'


@pytest.mark.parametrize(
    "fields", [("partition", "offset", "value"), ("topic", "offset"), kafka_source.FIELDS]
)
def test_a_fetched_range_packs_as_its_records_do(fields: tuple[str, ...]) -> None:
    """From the range's columns (the route job's fields) or its records (any other)."""
    recs = [
        Record("t", 3, 10 + i, b"k", None if i == 4 else bytes([i]), (("h", b"v"),), 5 + i)
        for i in range(11)
    ]
    rng = FetchedRange.of_records("t", 3, recs)
    got = list(kafka_source.range_to_batches(rng, 4, fields))
    want = list(kafka_source.records_to_batches(iter(recs), 4, fields))
    assert [b.num_rows for b in got] == [4, 4, 3]
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(want))
