"""Kafka client settings and the broker liveness check, with no broker running."""

from __future__ import annotations

import socket

import pytest

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.io.kafka import BrokerUnavailableError, KafkaError, KafkaSettings, connect, split_extra
from skewlab.io.kafka._common import any_reachable, bootstrap_addresses
from skewlab.services.process import free_port

pytestmark = pytest.mark.unit


def test_split_extra_routes_prefixed_keys_to_one_role() -> None:
    got = split_extra(
        {"producer.linger.ms": "50", "client.id": "x", "consumer.fetch.wait.max.ms": "7"}
    )
    assert got["producer"] == {"linger.ms": "50", "client.id": "x"}
    assert got["consumer"] == {"fetch.wait.max.ms": "7", "client.id": "x"}
    assert got["admin"] == {"client.id": "x"}


def test_connect_is_lazy_and_rejects_unknown_clients() -> None:
    # nothing listens on port 1: a lazy client must not try to connect yet
    for name in ("confluent", "kafka-python", "KAFKA_PYTHON"):
        client = connect(KafkaSettings("127.0.0.1:1", client=name))
        client.close()
    with pytest.raises(UnknownNameError, match="confluent, kafka-python"):
        connect(KafkaSettings("127.0.0.1:1", client="librdkafka"))


def test_bootstrap_addresses_are_parsed() -> None:
    assert bootstrap_addresses("127.0.0.1:9092, kafka-2:19092") == [
        ("127.0.0.1", 9092),
        ("kafka-2", 19092),
    ]
    assert bootstrap_addresses("PLAINTEXT://h:1,[::1]:2") == [("h", 1), ("::1", 2)]
    with pytest.raises(ConfigError, match="host:port"):
        bootstrap_addresses("h:1,nohost")


def test_reachable_means_one_bootstrap_server_accepts() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        up = int(sock.getsockname()[1])
        down = free_port()
        assert any_reachable([("127.0.0.1", down), ("127.0.0.1", up)])
        assert not any_reachable([("127.0.0.1", down)])


@pytest.mark.parametrize("name", ["confluent", "kafka-python"])
def test_a_client_without_a_broker_names_it_in_one_error(name: str) -> None:
    """Nothing listens: the first call that waits on the broker fails within a slice
    (no wall-clock assertion: the 30 s admin timeout is only what it must not wait)."""
    bootstrap = f"127.0.0.1:{free_port()}"
    client = connect(KafkaSettings(bootstrap, client=name))
    try:
        with pytest.raises(BrokerUnavailableError, match=bootstrap) as info:
            client.list_topics()
        assert isinstance(info.value, KafkaError)
        assert "unavailable" in str(info.value) and "\n" not in str(info.value)
    finally:
        client.close(flush_s=0)
