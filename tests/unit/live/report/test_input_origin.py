"""One count of a run's input: the producer marks its events, the verdict, the quality
expectation and the summary's figure all count the topic, and tell foreign records apart."""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from skewlab.io.kafka.base import Record
from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.live.report.aggregate import plain_count
from skewlab.pipeline.events import PRODUCER_HEADER, encode, marked, producer_mark
from skewlab.pipeline.exactness import ExactnessReport, InputCounts, check
from skewlab.quality.events import read_topic
from skewlab.workload import parse_workload

pytestmark = pytest.mark.unit

TOPIC = "events-run-a"


class Topic:
    """An in-memory topic: what was produced, with headers, read back by offsets."""

    def __init__(self) -> None:
        self.parts: dict[int, list[Record]] = defaultdict(list)

    def produce(self, topic: str, value: bytes, key: bytes | None = None,
                partition: int = 0, headers: Any = None) -> None:  # fmt: skip
        recs = self.parts[partition]
        pairs = tuple((k, v) for k, v in headers or ())
        recs.append(Record(topic, partition, len(recs), key, value, pairs))

    def flush(self) -> None:
        pass

    def begin_offsets(self, topic: str) -> dict[int, int]:
        return dict.fromkeys(self.parts, 0)

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(r) for p, r in self.parts.items()}

    def fetch(self, topic: str, partition: int, start: int, end: int) -> Iterator[Record]:
        yield from self.parts[partition][start:end]


def _run_topic(events: int = 600) -> tuple[Topic, int]:
    """A run's topic: ``events`` from its producer, then 18 records written from outside
    (15 malformed, a copy of ``seq`` 0, one more valid event, one marked for another run)."""
    client = Topic()
    s = ProduceSettings(TOPIC, 3, events, 1e9, chunk=128)
    workload = parse_workload("zipf:s=1.1,keys=50", seed=3)
    report = produce(client, workload, s, sleep=lambda _: None)
    first = client.parts[0][0]
    assert first.value is not None and json.loads(first.value)["seq"] == 0
    for i in range(15):
        client.produce(TOPIC, b"\xff not an event %d" % i, partition=i % 3)
    client.produce(TOPIC, first.value, first.key, partition=1)  # a copy of seq 0, unmarked
    client.produce(TOPIC, encode("outsider", 1.0e9, 7), partition=2)
    client.produce(TOPIC, encode("other-run", 1.0e9, 8), partition=0, headers=[
        producer_mark("events-run-b")
    ])  # fmt: skip
    return client, report.events


def test_the_producer_marks_every_event_with_its_topic() -> None:
    client, produced = _run_topic()
    recs = [r for part in client.parts.values() for r in part]
    own = [r for r in recs if marked(r.headers, TOPIC)]
    assert len(own) == produced == 600
    assert all(r.headers == ((PRODUCER_HEADER, TOPIC.encode()),) for r in own)
    assert not any(marked(r.headers, "events-run-b") for r in own)


def test_the_plain_count_counts_foreign_events_and_the_verdict_names_them() -> None:
    client, produced = _run_topic()
    expected, rejects = plain_count(client, TOPIC, 1.0)
    assert rejects == 15
    assert isinstance(expected, InputCounts) and expected.foreign == 3
    assert sum(c for c, _ in expected.values()) == produced + 3
    report = check(expected, dict(expected))
    assert report.exact and report.expected_events == produced + 3
    assert report.foreign_events == 3
    assert "(input: 600 from the run's producer, 3 foreign)" in report.summary()
    # the handle keeps the report as a dict; the rebuilt one says the same
    again = ExactnessReport(**dataclasses.asdict(report))
    assert again.summary() == report.summary()


def test_a_count_without_origin_says_nothing_of_it() -> None:
    report = check({(0.0, "a"): (2, 10)}, {(0.0, "a"): (2, 10)})
    assert report.foreign_events is None
    assert "foreign" not in report.summary()
    with pytest.raises(ValueError):
        InputCounts({}, -1)


def test_the_quality_expectation_is_the_producers_events_plus_the_valid_foreign_ones() -> None:
    client, produced = _run_topic()
    got = dataclasses.replace(read_topic(client, TOPIC), produced=produced)
    assert got.full and got.rejected == 15 and got.foreign == 3
    assert got.expected_rows == len(got.frame) == produced + 3
    assert "(3 foreign)" in got.note()
    # an event of the run's producer missing from the topic is missed by the expectation
    del client.parts[0][5]
    got = dataclasses.replace(read_topic(client, TOPIC), produced=produced)
    assert got.expected_rows == produced + 3 and len(got.frame) == produced + 2
