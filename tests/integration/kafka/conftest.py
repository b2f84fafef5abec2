"""Fixtures of the Kafka client tests: one connected client per implementation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skewlab.io.kafka import CLIENTS, KafkaClient, KafkaSettings, connect


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest, broker, new_topic) -> Iterator[KafkaClient]:
    """A client of each implementation in ``CLIENTS``, connected to the real broker.

    Set up after ``new_topic``, so it is closed before the test's topics are deleted:
    a librdkafka 2.16 consumer that had read a topic refreshing its metadata after the
    topic's deletion crashed the test process (SIGSEGV; one CI run, in
    ``test_worker_fetch.py``), which is what the client's own ``delete_topic`` guards
    against for the consumers it keeps."""
    c = connect(KafkaSettings(broker.bootstrap, client=request.param))
    try:
        yield c
    finally:
        c.close()
