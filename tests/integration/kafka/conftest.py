"""Fixtures of the Kafka client tests: one connected client per implementation."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from skewlab.io.kafka import CLIENTS, KafkaClient, KafkaSettings, connect


@pytest.fixture(params=sorted(CLIENTS))
def client(request: pytest.FixtureRequest, broker) -> Iterator[KafkaClient]:
    """A client of each implementation in ``CLIENTS``, connected to the real broker."""
    c = connect(KafkaSettings(broker.bootstrap, client=request.param))
    try:
        yield c
    finally:
        c.close()
