"""librdkafka's own log goes to the run's ``kafka.log``, never to the terminal (issue 37)."""

from __future__ import annotations

import logging
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewlab.io.kafka._common import LIBRDKAFKA_LOG, log_librdkafka_to
from skewlab.io.kafka.base import KafkaSettings
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Procs
from skewlab.live.driver.supervise import Supervisor
from skewlab.rundir import RunDir

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _no_file_left() -> Iterator[None]:
    yield
    log_librdkafka_to(None)


def _words(log: Path) -> list[str]:
    text = log.read_text()
    return [w for w in ("FAIL", "kafka client error") if w in text]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_supervised_runs_librdkafka_log_is_in_its_kafka_log_not_on_stderr(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("confluent_kafka")
    from skewlab.io.kafka.confluent import ConfluentClient

    terminal = logging.StreamHandler(sys.stderr)  # the CLI's: warnings to the terminal
    logging.getLogger().addHandler(terminal)
    files = RunDir.create(tmp_path, "key-log")
    handle = RunHandle("key-log", str(tmp_path), str(files.path), str(tmp_path / "d"), {})
    Supervisor(Procs(), handle, files, lambda: [])  # a supervised run: its log file
    client = ConfluentClient(KafkaSettings(f"127.0.0.1:{_closed_port()}"))
    try:
        producer = client.producer  # connects at once and fails: librdkafka logs FAIL lines
        deadline = time.monotonic() + 30
        log = files.log("kafka")
        while time.monotonic() < deadline:
            producer.poll(0.1)  # serves the log queue
            if log.exists() and {"FAIL", "kafka client error"} <= set(_words(log)):
                break
        text = log.read_text()
    finally:
        client.close(flush_s=0)
        logging.getLogger().removeHandler(terminal)
    assert "FAIL" in text and "Connection refused" in text
    assert "kafka client error" in text  # its error callback's lines too
    err = capfd.readouterr().err
    assert "%3|" not in err and "FAIL" not in err and "kafka client error" not in err


def test_the_log_file_is_replaced_and_nothing_propagates(tmp_path: Path) -> None:
    assert LIBRDKAFKA_LOG.propagate is False
    log_librdkafka_to(tmp_path / "a.log")
    LIBRDKAFKA_LOG.warning("first")
    log_librdkafka_to(tmp_path / "b.log")
    LIBRDKAFKA_LOG.warning("second")
    log_librdkafka_to(None)
    LIBRDKAFKA_LOG.warning("third")
    assert (tmp_path / "a.log").read_text().count("librdkafka") == 1
    assert "first" in (tmp_path / "a.log").read_text()
    b = (tmp_path / "b.log").read_text()
    assert "second" in b and "third" not in b
