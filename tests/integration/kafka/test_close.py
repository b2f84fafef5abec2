"""Closing a client whose broker died: at once, the queued records dropped with a
warning, and nothing of the client left reconnecting (the real broker, killed)."""

from __future__ import annotations

import logging
import os
import re
import signal
import uuid
from pathlib import Path

import pytest

from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import Broker

pytestmark = pytest.mark.integration


def test_a_client_of_a_dead_broker_closes_its_producer_without_flushing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    service = Broker(tmp_path / "broker-home")
    state = service.start(timeout_s=30)
    try:
        client = connect(KafkaSettings(state.url))
        topic = f"t-{uuid.uuid4().hex}"
        client.create_topic(topic, 1)
        for _ in range(10):
            client.produce(topic, b"sent", partition=0)
        client.flush()
        os.kill(state.pid, signal.SIGKILL)
        producer = client.producer
        for _ in range(100):
            client.produce(topic, b"queued", partition=0)
        with caplog.at_level(logging.WARNING, logger="skewlab.io.kafka.confluent"):
            client.close(flush_s=0)
        # librdkafka's queue length also counts the events it has not served yet (the
        # "all brokers down" error, when it came first): at least the 100 records
        left = re.search(
            r"closing producer: (\d+) record\(s\) or event\(s\) still queued", caplog.text
        )
        assert left is not None, caplog.text
        assert int(left.group(1)) >= 100
        # closed, not only dropped: a handle still referenced elsewhere is dead too
        with pytest.raises(RuntimeError, match="closed"):
            producer.flush(0)
    finally:
        service.stop()
