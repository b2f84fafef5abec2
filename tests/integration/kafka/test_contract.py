"""One Kafka client contract, run over every implementation against the real broker
(Apache Kafka, started by the session fixture)."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition

from skewlab.errors import ConfigError
from skewlab.io.kafka import CLIENTS, KafkaClient, KafkaError, KafkaSettings, Record, connect

pytestmark = pytest.mark.integration

NewTopic = Callable[..., str]


def _fetch_all(
    client: KafkaClient, topic: str, partition: int, start: int, end: int
) -> list[Record]:
    return list(client.fetch(topic, partition, start, end, timeout_s=10))


def _reported_end(bootstrap: str, topic: str, partition: int) -> int:
    """What the broker's ListOffsets(latest) says, read with a bare librdkafka consumer."""
    raw = Consumer({"bootstrap.servers": bootstrap, "group.id": "contract-raw"})
    try:
        return int(raw.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
    finally:
        raw.close()


class TestKafkaClientContract:
    """Every implementation in ``CLIENTS`` must pass all of these against the real broker."""

    def test_connect_returns_a_kafka_client(self, client: KafkaClient) -> None:
        assert isinstance(client, KafkaClient)

    def test_topic_lifecycle(self, client: KafkaClient) -> None:
        name = f"life-{uuid.uuid4().hex}"
        client.create_topic(name, 3)
        try:
            assert name in client.list_topics()
            assert client.partitions(name) == 3
            client.create_topic(name, 3, exist_ok=True)
            with pytest.raises(KafkaError):
                client.create_topic(name, 3, exist_ok=False)
        finally:
            client.delete_topic(name)
        assert name not in client.list_topics()
        with pytest.raises(KafkaError):
            client.partitions(name)
        client.delete_topic(name, missing_ok=True)
        with pytest.raises(KafkaError):
            client.delete_topic(name, missing_ok=False)

    def test_a_deleted_topic_stays_deleted_while_a_client_that_used_it_is_open(
        self, client: KafkaClient, broker
    ) -> None:
        admin = connect(KafkaSettings(broker.bootstrap))
        try:
            name = f"gone-{uuid.uuid4().hex}"
            admin.create_topic(name, 3)
            client.produce(name, b"v", partition=1)
            client.flush()
            assert client.end_offsets(name) == {0: 0, 1: 1, 2: 0}
            admin.delete_topic(name)
            # Each asks the broker for the topic's metadata: none may create it again
            # (a fetch did, with kafka-python's consumer asking for auto-creation).
            with pytest.raises(KafkaError, match="stalled"):
                list(client.fetch(name, 1, 0, 1, timeout_s=2))
            with pytest.raises(KafkaError, match="does not exist"):
                client.end_offsets(name)
            assert name not in admin.list_topics()
        finally:
            admin.delete_topic(name, missing_ok=True)
            admin.close()

    def test_produce_to_explicit_partitions_with_keys_and_headers(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(3)
        sent: dict[int, list[tuple[bytes | None, bytes, tuple[tuple[str, bytes], ...]]]] = {
            0: [],
            1: [],
            2: [],
        }
        for i in range(30):
            p = (i * 7) % 3
            key = None if i % 5 == 0 else f"k{i}".encode()
            headers = (("seq", str(i).encode()), ("part", bytes([p])))
            client.produce(topic, f"v{i}".encode(), key=key, partition=p, headers=headers)
            sent[p].append((key, f"v{i}".encode(), headers))
        client.flush()

        ends = client.end_offsets(topic)
        assert ends == {p: len(rows) for p, rows in sent.items()}
        for p, rows in sent.items():
            got = _fetch_all(client, topic, p, 0, ends[p])
            assert [(r.key, r.value, r.headers) for r in got] == rows
            assert [r.offset for r in got] == list(range(len(rows)))
            assert {(r.topic, r.partition) for r in got} == {(topic, p)}
            assert all(r.timestamp_ms > 0 for r in got)

    def test_fetch_ranges_are_exact(self, client: KafkaClient, new_topic: NewTopic) -> None:
        topic = new_topic(2)
        for i in range(200):
            client.produce(topic, i.to_bytes(4, "big"), partition=1)
        client.flush()

        def values(start: int, end: int) -> list[int]:
            got = _fetch_all(client, topic, 1, start, end)
            assert [r.offset for r in got] == list(range(start, end))
            return [int.from_bytes(r.value or b"", "big") for r in got]

        assert values(0, 200) == list(range(200))
        assert values(73, 141) == list(range(73, 141))
        assert values(199, 200) == [199]
        assert values(120, 120) == []
        assert values(200, 200) == []
        assert _fetch_all(client, topic, 0, 0, 0) == []

    def test_fetch_range_gives_the_records_of_fetch_as_columns(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(2)
        for i in range(3000):
            hdrs = (("skewlab.src", f"1:{i}".encode()),) if i % 3 else ()
            client.produce(
                topic, i.to_bytes(4, "big"), key=str(i).encode(), partition=1, headers=hdrs
            )
        client.flush()
        for start, end in ((0, 3000), (73, 2141), (2999, 3000), (120, 120)):
            want = _fetch_all(client, topic, 1, start, end)
            got = client.fetch_range(topic, 1, start, end, timeout_s=10)
            assert got.offsets == [r.offset for r in want] == list(range(start, end))
            assert got.values == [r.value for r in want]
            assert [tuple(h or ()) for h in got.headers] == [r.headers for r in want]
            assert list(got) == want
        with pytest.raises(KafkaError, match="stalled"):
            client.fetch_range(topic, 1, 2990, 3005, timeout_s=0.5)
        with pytest.raises(ValueError):
            client.fetch_range(topic, 1, 5, 4)

    def test_fetch_past_the_end_raises_instead_of_returning_less(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(1)
        for i in range(5):
            client.produce(topic, bytes([i]), partition=0)
        client.flush()
        got: list[Record] = []
        with pytest.raises(KafkaError, match="stalled"):
            got.extend(client.fetch(topic, 0, 2, 8, timeout_s=0.5))
        assert [r.offset for r in got] == [2, 3, 4]

    def test_bad_fetch_range_is_a_config_error(self, client: KafkaClient) -> None:
        with pytest.raises(ValueError):
            client.fetch("any", 0, 5, 4)
        with pytest.raises(ValueError):
            client.fetch("any", 0, -1, 4)

    def test_end_offsets_are_last_offset_plus_one_of_batched_records(
        self, client: KafkaClient, new_topic: NewTopic, broker
    ) -> None:
        """Records produced in linger batches: each partition's end is its record count,
        the same as the broker's own ListOffsets, and the last batch is read to its end."""
        topic = new_topic(4)
        counts = {0: 5000, 1: 1, 2: 0, 3: 777}
        for p, n in counts.items():
            for i in range(n):
                client.produce(topic, b"x" * 100, key=str(i).encode(), partition=p)
        client.flush()

        assert client.begin_offsets(topic) == {p: 0 for p in counts}
        ends = client.end_offsets(topic)
        assert ends == counts
        assert {p: _reported_end(broker.bootstrap, topic, p) for p in counts} == counts
        tail = _fetch_all(client, topic, 0, 4900, ends[0])
        assert [r.offset for r in tail] == list(range(4900, counts[0]))
        assert client.end_offsets(topic) == counts

    def test_end_offsets_follow_new_records(self, client: KafkaClient, new_topic: NewTopic) -> None:
        topic = new_topic(1)
        assert client.end_offsets(topic) == {0: 0}
        for round_ in range(1, 4):
            for _ in range(250):
                client.produce(topic, b"r", partition=0)
            client.flush()
            assert client.end_offsets(topic) == {0: 250 * round_}

    def test_end_offsets_follow_every_batch_from_an_empty_partition(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        """One record batch at a time (flush after each), asked after each: a client that
        keeps what it learnt between look-ups must still see every new batch."""
        topic = new_topic(2)
        assert client.end_offsets(topic) == {0: 0, 1: 0}
        for i in range(1, 13):
            for _ in range(1 if i % 3 else 40):
                client.produce(topic, b"r", partition=0)
            client.flush()
            want = 1 + sum(1 if j % 3 else 40 for j in range(1, i + 1)) - 1
            assert client.end_offsets(topic) == {0: want, 1: 0}
            assert client.end_offsets(topic) == {0: want, 1: 0}

    def test_twenty_thousand_records_round_trip_without_loss_or_duplicates(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(4)
        n = 20_000
        for i in range(n):
            client.produce(topic, i.to_bytes(4, "big"), key=str(i).encode(), partition=i % 4)
        client.flush(60)

        ends = client.end_offsets(topic)
        assert ends == {p: n // 4 for p in range(4)}
        seen: list[int] = []
        for p, end in ends.items():
            got = _fetch_all(client, topic, p, 0, end)
            assert [r.offset for r in got] == list(range(end))
            values = [int.from_bytes(r.value or b"", "big") for r in got]
            assert all(v % 4 == p for v in values)
            assert values == sorted(values)
            seen.extend(values)
        assert len(seen) == n
        assert set(seen) == set(range(n))

    def test_produce_to_a_missing_partition_fails(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(2)
        with pytest.raises(KafkaError):
            client.produce(topic, b"lost", partition=9)
            client.flush(15)

    def test_partitions_of_a_missing_topic_fail(self, client: KafkaClient) -> None:
        with pytest.raises(KafkaError, match="does not exist"):
            client.partitions(f"missing-{uuid.uuid4().hex}")

    def test_commit_then_committed_per_group(
        self, client: KafkaClient, new_topic: NewTopic
    ) -> None:
        topic = new_topic(3)
        group = f"g-{uuid.uuid4().hex}"
        assert client.committed(group, topic) == {}
        client.commit(group, topic, {0: 5, 2: 7})
        assert client.committed(group, topic) == {0: 5, 2: 7}
        client.commit(group, topic, {0: 9})
        assert client.committed(group, topic) == {0: 9, 2: 7}
        assert client.committed(f"other-{uuid.uuid4().hex}", topic) == {}

    def test_commits_are_visible_to_a_new_client_of_the_other_implementation(
        self, client: KafkaClient, broker, new_topic: NewTopic
    ) -> None:
        topic = new_topic(2)
        group = f"g-{uuid.uuid4().hex}"
        client.commit(group, topic, {1: 3})
        for name in sorted(CLIENTS):
            other = connect(KafkaSettings(broker.bootstrap, client=name))
            try:
                assert other.committed(group, topic) == {1: 3}
            finally:
                other.close()

    def test_bad_commits_are_config_errors(self, client: KafkaClient, new_topic: NewTopic) -> None:
        topic = new_topic(1)
        with pytest.raises(ConfigError):
            client.commit("", topic, {0: 1})
        with pytest.raises(ConfigError):
            client.commit("g", topic, {0: -1})
        client.commit(f"g-{uuid.uuid4().hex}", topic, {})  # nothing to do
