"""The embedded Apache Kafka broker as a service: start, health, stop, durability across a
restart, a recorded port taken meanwhile, and a broker killed under its clients.

Each test starts its own broker in its own data directory (the session broker is shared
and must never be stopped or killed). Timeouts here only bound a hang.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewlab.io.kafka import (
    BrokerUnavailableError,
    KafkaClient,
    KafkaSettings,
    connect,
    producer_fn,
)
from skewlab.live.worker.fetch import end_offset
from skewlab.services import Broker, PortInUseError
from skewlab.services.broker_config import MAIN_CLASS
from skewlab.services.process import pid_alive, tcp_connectable, wait_until

pytestmark = pytest.mark.integration

START_S = 120.0
GROUP = "durable-group"


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Broker]:
    broker = Broker(tmp_path / "home")
    try:
        yield broker
    finally:
        broker.stop()


def _write(client: KafkaClient, topic: str) -> None:
    client.create_topic(topic, 3, exist_ok=False)
    for i in range(300):
        client.produce(topic, f"v{i}".encode(), key=str(i).encode(), partition=i % 3)
    client.flush()
    client.commit(GROUP, topic, {0: 40, 2: 7})


def _produce_until_error(client: KafkaClient, topic: str) -> None:
    """Queue records without a flush, as a run's producer does (the 60 s only bound a
    hang): librdkafka's "all brokers are down" makes a confluent client check the broker
    at its next poll. kafka-python has no such event (its queue fills for minutes)."""
    produce = producer_fn(client)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        client.produce(topic, b"queued", partition=0)
        produce(topic, b"direct", None, 1, None)


def _check(client: KafkaClient, topic: str) -> None:
    """Every record, end and committed offset :func:`_write` left is still there."""
    assert topic in client.list_topics()
    assert client.partitions(topic) == 3
    assert client.end_offsets(topic) == {0: 100, 1: 100, 2: 100}
    assert client.committed(GROUP, topic) == {0: 40, 2: 7}
    values = [r.value for r in client.fetch(topic, 1, 0, 100, timeout_s=30)]
    assert values == [f"v{i}".encode() for i in range(1, 300, 3)]


def test_start_health_stop_and_a_restart_keeps_topics_records_and_offsets(
    service: Broker,
) -> None:
    first = service.start(timeout_s=START_S)
    assert service.health()
    assert MAIN_CLASS.encode() in Path(f"/proc/{first.pid}/cmdline").read_bytes()
    assert "Kafka Server started" in Path(first.log).read_text()
    assert service.start(timeout_s=START_S) == first  # idempotent
    topic = f"durable-{uuid.uuid4().hex}"
    client = connect(KafkaSettings(first.url))
    try:
        _write(client, topic)
    finally:
        client.close()

    assert service.stop() is True
    assert not pid_alive(first.pid) and not service.health()

    # the recorded port, taken meanwhile: one line naming it, nothing started
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind((first.host, first.port))
        squatter.listen(1)
        with pytest.raises(PortInUseError, match=f"{first.host}:{first.port}") as info:
            service.start(timeout_s=START_S)
        assert "\n" not in str(info.value)
        assert service.state() is None

    again = service.start(timeout_s=START_S)
    assert again.url == first.url and again.pid != first.pid
    assert again.extra["cluster_id"] == first.extra["cluster_id"]
    for name in ("confluent", "kafka-python"):
        client = connect(KafkaSettings(again.url, client=name))
        try:
            _check(client, topic)
        finally:
            client.close()


@pytest.mark.parametrize("name", ["confluent", "kafka-python"])
def test_a_killed_broker_fails_its_clients_fast_and_restarts_intact(
    service: Broker, name: str
) -> None:
    """SIGKILL: each call that needs the broker raises ``BrokerUnavailableError`` naming the
    bootstrap (long before the 30 s admin timeout it would otherwise wait out); started
    again, the broker has every acknowledged record and committed offset."""
    state = service.start(timeout_s=START_S)
    topic = f"killed-{uuid.uuid4().hex}"
    client = connect(KafkaSettings(state.url, client=name))
    late = connect(KafkaSettings(state.url, client=name))  # its first broker call comes after
    try:
        _write(client, topic)
        os.kill(state.pid, signal.SIGKILL)
        # gone: its main thread is a zombie and (the other threads exited) its port refuses
        assert wait_until(
            lambda: not pid_alive(state.pid) and not tcp_connectable(state.host, state.port), 30
        )
        calls = {
            "list_topics": client.list_topics,
            "end_offsets": lambda: client.end_offsets(topic),
            "end_offset, a new client": lambda: end_offset(late, topic, 0),
            "fetch": lambda: list(client.fetch(topic, 0, 0, 100, timeout_s=30)),
            "commit": lambda: client.commit(GROUP, topic, {1: 1}),
            "flush": lambda: (client.produce(topic, b"late", partition=0), client.flush(30)),
            "create_topic": lambda: client.create_topic(f"new-{uuid.uuid4().hex}", 1),
        }
        if name == "confluent":
            calls["produce"] = lambda: _produce_until_error(client, topic)
        for call in calls.values():
            with pytest.raises(BrokerUnavailableError, match=state.url) as info:
                call()
            assert "\n" not in str(info.value)
    finally:
        client.close(flush_s=0)
        late.close(flush_s=0)
    assert not service.status().running

    again = service.start(timeout_s=START_S)
    assert again.url == state.url
    fresh = connect(KafkaSettings(again.url, client=name))
    try:
        _check(fresh, topic)
    finally:
        fresh.close()
