"""A worker's reads of its own partition (``skewlab.live.worker.fetch``), every client,
against the real broker: the records up to the end or the limit, whichever comes first,
and every new batch seen."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from skewlab.io.kafka import KafkaClient, KafkaSettings, connect
from skewlab.live.worker.fetch import end_offset, fetch_available

pytestmark = pytest.mark.integration

NewTopic = Callable[..., str]
FAR = 10**12


def _reported_end(bootstrap: str, topic: str, partition: int) -> int:
    raw = Consumer({"bootstrap.servers": bootstrap, "group.id": "worker-fetch-raw"})
    try:
        return int(raw.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        raw.close()


def _offsets(client: KafkaClient, topic: str, p: int, start: int, limit: int) -> list[int]:
    return list(fetch_available(client, topic, p, start, limit).offsets)


def test_reads_to_the_end_or_the_limit(client: KafkaClient, new_topic: NewTopic, broker):
    topic = new_topic(2)
    for i in range(5000):  # linger-batched
        client.produce(topic, b"x" * 100, key=str(i).encode(), partition=0)
    client.flush()
    assert _reported_end(broker.bootstrap, topic, 0) == 5000
    assert _offsets(client, topic, 0, 0, FAR) == list(range(5000))
    assert _offsets(client, topic, 0, 0, 1234) == list(range(1234))
    assert _offsets(client, topic, 0, 4000, FAR) == list(range(4000, 5000))
    assert _offsets(client, topic, 0, 4990, 4995) == list(range(4990, 4995))
    assert _offsets(client, topic, 0, 5000, FAR) == []
    assert _offsets(client, topic, 0, 7, 7) == []
    assert _offsets(client, topic, 1, 0, FAR) == []
    assert (end_offset(client, topic, 0), end_offset(client, topic, 1)) == (5000, 0)
    rng = fetch_available(client, topic, 0, 4999, FAR)
    assert rng[0].key == b"4999" and rng[0].value == b"x" * 100


def test_every_new_batch_is_read_from_where_the_last_read_ended(
    client: KafkaClient, new_topic: NewTopic
):
    """One batch at a time (flush after each), read after each from the previous end,
    twice: a client that keeps what it learnt between reads still sees every batch."""
    topic = new_topic(1)
    pos = 0
    assert _offsets(client, topic, 0, pos, FAR) == []
    for i in range(1, 13):
        n = 1 if i % 3 else 40
        for _ in range(n):
            client.produce(topic, b"r", partition=0)
        client.flush()
        assert _offsets(client, topic, 0, pos, FAR) == list(range(pos, pos + n))
        pos += n
        assert _offsets(client, topic, 0, pos, FAR) == []
        assert end_offset(client, topic, 0) == pos


def test_new_clients_first_reads_of_a_new_topic(client: KafkaClient, new_topic: NewTopic, broker):
    """A worker's client is new when the run starts and its first call is the end of its
    partition of a topic just made: new clients of every kind, one per partition, each
    find their partition's end and read it whole on their first calls."""
    kind = type(client)
    topic = new_topic(4)
    for p in range(4):
        for i in range(10 * (p + 1)):
            client.produce(topic, str(i).encode(), partition=p)
    client.flush()
    for _round in range(3):
        for p in range(4):
            fresh = connect(KafkaSettings(broker.bootstrap, client=client.settings.client))
            try:
                assert isinstance(fresh, kind)
                assert end_offset(fresh, topic, p) == 10 * (p + 1)
                assert _offsets(fresh, topic, p, 0, FAR) == list(range(10 * (p + 1)))
            finally:
                fresh.close()
