"""Kafka adapter: :func:`connect` returns a :class:`KafkaClient` by implementation name.

Two lazy implementations of one contract (:data:`CLIENTS`: ``confluent`` default,
``kafka-python``); ``KafkaSettings.extra`` routing: docs/io.md. :func:`fetch_range` and
:func:`producer_fn` are the per-record hot paths. A broker that went away is a
:class:`BrokerUnavailableError` naming the bootstrap servers, raised within seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from skewlab.io.kafka.base import (
    BrokerUnavailableError,
    FetchedRange,
    Headers,
    KafkaClient,
    KafkaError,
    KafkaSettings,
    Record,
    split_extra,
)
from skewlab.registry import resolve

log = logging.getLogger(__name__)


def _confluent() -> type[KafkaClient]:
    from skewlab.io.kafka.confluent import ConfluentClient

    return ConfluentClient


def _kafka_python() -> type[KafkaClient]:
    from skewlab.io.kafka.kafkapython import KafkaPythonClient

    return KafkaPythonClient


CLIENTS: dict[str, Callable[[], type[KafkaClient]]] = {
    "confluent": _confluent,
    "kafka-python": _kafka_python,
}


def connect(settings: KafkaSettings) -> KafkaClient:
    """A (lazy) client of the implementation ``settings.client``.

    :class:`~skewlab.errors.UnknownNameError` lists the valid names if it is unknown.
    """
    cls = resolve(CLIENTS, settings.client, "kafka client")()
    return cls(settings)  # type: ignore[call-arg]


def fetch_range(client: object, topic: str, partition: int, start: int, end: int) -> FetchedRange:
    """``client.fetch_range(...)``; a client without it (an in-memory test fake with only
    ``fetch``) is read record by record into the same :class:`FetchedRange`."""
    method = getattr(client, "fetch_range", None)
    if method is not None:
        rng: FetchedRange = method(topic, partition, start, end)
        return rng
    recs = list(client.fetch(topic, partition, start, end))  # type: ignore[attr-defined]
    return FetchedRange.of_records(topic, partition, recs)


def producer_fn(client: object) -> Callable[[str, Any, Any, int, Any], None]:
    """``produce(topic, value, key, partition, headers)``: the fastest per-record call.

    On a confluent client, its librdkafka producer directly (half the Python cost per
    record of the client's ``produce``, docs/throughput.md "Session 4"), with the
    client's behaviour kept: a full local queue is drained by polling, never dropped
    (a queue full for a second checks the broker is there: ``BrokerUnavailableError``),
    delivery reports and client errors are served every 1,000 records (librdkafka's "all
    brokers are down" checks the broker too), an error becomes ``KafkaError``.
    Any other client: its ``produce``. The returned function is named ``direct`` on
    the librdkafka path (callers may inline the call and fall back to it).
    """
    producer = getattr(client, "producer", None)
    raw = getattr(producer, "produce", None)
    if raw is None or not callable(getattr(producer, "poll", None)):

        def via_client(topic: str, value: Any, key: Any, partition: int, headers: Any) -> None:
            client.produce(topic, value, key=key, partition=partition, headers=headers)  # type: ignore[attr-defined]

        return via_client
    from confluent_kafka import KafkaException

    poll = producer.poll  # type: ignore[union-attr]
    queue_full = getattr(client, "_queue_full", None)
    check_down = getattr(client, "_check_down", None)
    count = [0]

    def direct(topic: str, value: Any, key: Any, partition: int, headers: Any) -> None:
        full_since: float | None = None
        while True:
            try:
                raw(topic, value, key, partition, headers=headers)
                break
            except BufferError:
                if queue_full is not None:
                    full_since = queue_full(f"produce to {topic!r}", full_since)
                poll(0.05)
            except KafkaException as exc:
                raise KafkaError(f"produce to {topic!r}: {exc}") from exc
        count[0] += 1
        if count[0] >= 1000:
            poll(0)
            count[0] = 0
            if check_down is not None:
                check_down(f"produce to {topic!r}")

    return direct


__all__ = [
    "CLIENTS",
    "BrokerUnavailableError",
    "FetchedRange",
    "Headers",
    "KafkaClient",
    "KafkaError",
    "KafkaSettings",
    "Record",
    "connect",
    "fetch_range",
    "producer_fn",
    "split_extra",
]
