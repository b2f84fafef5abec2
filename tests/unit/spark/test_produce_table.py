"""``produce_table``: every row once, in order, with its key, partition and headers.

Through a plain client's ``produce`` and through a librdkafka-style producer called
directly (a full local queue is polled and retried, never dropped; delivery reports
are served; a produce error surfaces as ``KafkaError``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import KafkaException

from skewlab.io.kafka.base import KafkaError
from skewlab.spark import kafka_sink
from skewlab.spark.kafka_sink import HEADER_PREFIX, produce_table

pytestmark = pytest.mark.unit


class PlainClient:
    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def produce(self, topic, value, key=None, partition=None, headers=None) -> None:
        self.sent.append((topic, value, key, partition, headers))


class FakeProducer:
    """Refuses every ``full_every``-th call once with BufferError (a full queue)."""

    def __init__(self, full_every: int = 0, fail_at: int = -1) -> None:
        self.sent: list[tuple[Any, ...]] = []
        self.polls = 0
        self.calls = 0
        self.full_every = full_every
        self.fail_at = fail_at

    def produce(self, topic, value, key=None, partition=-1, headers=None) -> None:
        self.calls += 1
        if self.full_every and self.calls % self.full_every == 0:
            raise BufferError("queue full")
        if len(self.sent) == self.fail_at:
            raise KafkaException("unknown partition")
        self.sent.append((topic, value, key, partition, headers))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


class DirectClient:
    def __init__(self, producer: FakeProducer) -> None:
        self.producer = producer


def table(n: int, set_header: bool) -> pa.Table:
    cols: dict[str, Any] = {
        "partition": pa.array([i % 3 for i in range(n)], pa.int64()),
        "value": pa.array([f"v{i}".encode() for i in range(n)], pa.binary()),
        "key": pa.array([f"k{i % 7}".encode() for i in range(n)], pa.binary()),
        HEADER_PREFIX + "skewlab.src": pa.array([f"0:{i}".encode() for i in range(n)]),
    }
    if set_header:
        cols[HEADER_PREFIX + "skewlab.set"] = pa.array(
            [f"{i}:1".encode() if i % 2 else None for i in range(n)], pa.binary()
        )
    return pa.table(cols)


def expected(n: int, set_header: bool) -> list[tuple[Any, ...]]:
    out = []
    for i in range(n):
        hdrs = [("skewlab.src", f"0:{i}".encode())]
        if set_header and i % 2:
            hdrs.append(("skewlab.set", f"{i}:1".encode()))
        out.append(("routed", f"v{i}".encode(), f"k{i % 7}".encode(), i % 3, hdrs))
    return out


@pytest.mark.parametrize("set_header", [False, True])
def test_plain_and_direct_producers_send_every_row_once_in_order(set_header):
    n = 2_500
    plain = PlainClient()
    assert produce_table(plain, "routed", table(n, set_header)) == n
    assert plain.sent == expected(n, set_header)
    producer = FakeProducer(full_every=400)
    assert produce_table(DirectClient(producer), "routed", table(n, set_header)) == n
    assert producer.sent == expected(n, set_header)
    # every refused call was followed by a poll, and delivery reports were served
    refused = producer.calls - n
    assert refused > 0
    assert producer.polls >= refused + n // 1000


def test_direct_produce_error_is_a_kafka_error():
    producer = FakeProducer(fail_at=10)
    with pytest.raises(KafkaError, match="routed"):
        produce_table(DirectClient(producer), "routed", table(50, False))
    assert len(producer.sent) == 10


@pytest.mark.parametrize(
    "values, typ",
    [
        ([b"a", None, b"", b"xyz"], pa.binary()),
        (["k", None, "\u00e9"], pa.string()),
        ([1, 2, 3], pa.int32()),
        ([1, None, 3], pa.int64()),
        ([0.5, None], pa.float64()),
        ([], pa.binary()),
    ],
)
def test_pylist_gives_the_values_and_types_of_to_pylist(values: list, typ: pa.DataType) -> None:
    col = pa.chunked_array([pa.array(values, typ)], typ)
    got = kafka_sink.pylist(col)
    assert got == col.to_pylist()
    assert [type(v) for v in got] == [type(v) for v in col.to_pylist()]
