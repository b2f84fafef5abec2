"""The producer's pacing: bursts of at most 0.1 s of events, each stamped when it is sent.

Driven by an injected clock (``wall`` advances only when the producer sleeps), so the
checks are of the schedule the producer keeps, never of this machine's speed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.workload import parse_workload

pytestmark = pytest.mark.unit


class Stamps:
    """A client that records each event's ``seq``, its ``ts`` and the clock when sent."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.sent: list[tuple[int, float, float]] = []

    def produce(self, topic: str, value: bytes, key: Any = None, partition: int = 0,
                headers: Any = None) -> None:  # fmt: skip
        v = json.loads(value)
        self.sent.append((v["seq"], v["ts"], self.clock[0]))

    def flush(self) -> None:
        pass


def _run(s: ProduceSettings, n_chunks: list[int] | None = None) -> Stamps:
    clock = [1000.0]

    def sleep(dt: float) -> None:
        clock[0] += dt

    client = Stamps(clock)
    progress = None if n_chunks is None else (lambda sent, total: n_chunks.append(sent))
    produce(client, parse_workload("zipf:s=1.1,keys=30", seed=2), s,
            wall=lambda: clock[0], sleep=sleep, progress=progress)  # fmt: skip
    return client


def test_a_low_rate_is_sent_in_bursts_of_a_tenth_of_a_second_not_whole_chunks() -> None:
    s = ProduceSettings("events", 2, 1_000, 400.0)  # chunk 2,048: the whole run in one chunk
    assert s.burst == 40
    client = _run(s)
    assert [seq for seq, _, _ in client.sent] == list(range(1_000))
    for seq, ts, sent_at in client.sent:
        due = 1000.0 + (seq // 40) * 40 / 400.0  # its burst's start
        assert sent_at == pytest.approx(due)  # never sent ahead of its burst
        assert ts == pytest.approx(sent_at, abs=1e-6)  # stamped when sent
    stamps = {round(ts, 6) for _, ts, _ in client.sent}
    assert len(stamps) == 25  # 1,000 events in 25 bursts, not one


def test_progress_is_still_told_per_chunk() -> None:
    seen: list[int] = []
    _run(ProduceSettings("events", 2, 1_000, 400.0, chunk=256), seen)
    assert seen == [256, 512, 768, 1_000]


def test_a_ramp_keeps_its_schedule_with_bursts() -> None:
    s = ProduceSettings("events", 1, 600, 100.0, chunk=32, ramp_factor=2.0, ramp_interval_s=2.0)
    client = _run(s)
    for seq, _, sent_at in client.sent:
        assert sent_at <= 1000.0 + s.due(seq) + 1e-9  # never later than one burst behind
        assert sent_at >= 1000.0 + s.due(seq - seq % s.burst) - 1e-9  # never ahead
