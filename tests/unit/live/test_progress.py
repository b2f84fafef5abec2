"""Progress line (terminal: in place; otherwise periodic plain lines) and the producer's
resume: a second producer after a crash sends each partition's missing events once."""

from __future__ import annotations

import io
import json
from collections import defaultdict
from typing import Any

import pytest

from skewlab.live.producer import ProduceSettings, produce
from skewlab.live.watch import ProgressLine, progress_text
from skewlab.workload import parse_workload

pytestmark = pytest.mark.unit


def _p(produced: float, processed: float) -> dict[str, float]:
    return {"produced": produced, "total": 100.0, "routed": produced, "processed": processed,
            "lag": produced - processed, "rate": 12.0, "imbalance": 5.0}  # fmt: skip


def test_plain_lines_come_every_ten_seconds_and_the_last_state_at_close() -> None:
    out = io.StringIO()
    now = [0.0]
    line = ProgressLine("dkg", out, tty=False, clock=lambda: now[0])
    for t in range(0, 25):
        now[0] = float(t)
        line(_p(4 * t, 2 * t))
    line.close()
    lines = out.getvalue().splitlines()
    assert len(lines) == 4  # t = 0, 10, 20, and the last state (t = 24) at close
    assert lines[1] == progress_text("dkg", _p(40, 20))
    assert "produced 96/100" in lines[-1] and "lag 48" in lines[-1]
    assert "\r" not in out.getvalue()


def test_a_terminal_line_is_redrawn_in_place() -> None:
    out = io.StringIO()
    line = ProgressLine("key", out, tty=True)
    for t in range(5):
        line(_p(10 * t, 5 * t))
    line.close()
    text = out.getvalue()
    assert text.count("\n") <= 2  # one line, redrawn; a newline when it ends
    assert "produced 40/100" in text.splitlines()[-1] or "produced 40/100" in text


class Recorder:
    def __init__(self, drop_after: dict[int, int] | None = None) -> None:
        self.parts: dict[int, list[int]] = defaultdict(list)
        self.drop_after = drop_after or {}

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                partition: int = 0, headers: Any = None) -> None:  # fmt: skip
        if len(self.parts[partition]) < self.drop_after.get(partition, 1 << 30):
            self.parts[partition].append(json.loads(value)["seq"])

    def flush(self) -> None:
        pass


def test_a_resumed_producer_sends_each_partitions_missing_events_once() -> None:
    s = ProduceSettings("events", 3, 1000, 1e9, chunk=128)
    first = Recorder(drop_after={0: 100, 1: 40, 2: 333})  # a crash left unequal prefixes
    produce(first, parse_workload("zipf:s=1.1,keys=50", seed=3), s, sleep=lambda dt: None)
    present = {p: len(v) for p, v in first.parts.items()}
    second = Recorder()
    report = produce(
        second, parse_workload("zipf:s=1.1,keys=50", seed=3), s, sleep=lambda dt: None,
        present=present,
    )  # fmt: skip
    assert report.events == 1000
    for p in range(3):
        together = first.parts[p] + second.parts[p]
        assert together == list(range(p, 1000, 3)), f"partition {p}"


class RawProducer:
    """librdkafka-shaped: ``produce(topic, value, key, partition, headers=)``, ``poll``."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.seqs: list[int] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.calls.append(f"list_topics {topic}")

    def produce(
        self, topic: str, value: bytes, key: Any, partition: int, headers: Any = None
    ) -> None:
        self.calls.append("produce")
        self.seqs.append(json.loads(value)["seq"])

    def poll(self, timeout: float) -> int:
        return 0


class DirectClient(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.producer = RawProducer()


def test_the_producer_is_connected_before_the_first_event_and_called_directly() -> None:
    client = DirectClient()
    s = ProduceSettings("events", 2, 300, 1e9, chunk=64)
    report = produce(client, parse_workload("zipf:s=1.1,keys=20", seed=1), s, sleep=lambda dt: None)
    assert report.events == 300
    assert client.producer.calls[0] == "list_topics events"
    assert client.producer.seqs == list(range(300)) and not client.parts
