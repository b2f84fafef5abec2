"""The ListOffsets workaround (:func:`resolve_true_ends`) against fake partition logs."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from skewlab.errors import UnknownNameError
from skewlab.io.kafka import KafkaError, KafkaSettings, connect, resolve_true_ends, split_extra

pytestmark = pytest.mark.unit


class FakeLog:
    """Partitions holding ``ends[p]`` records; a probe answers like one fetch would.

    ``per_fetch`` None: the fetch response carries the high watermark (the true end).
    ``per_fetch`` k: only k more records are visible per probe (no watermark), so
    the resolver has to walk the tail batch by batch.
    """

    def __init__(self, ends: Mapping[int, int], per_fetch: int | None = None) -> None:
        self.ends = dict(ends)
        self.per_fetch = per_fetch
        self.calls: list[dict[int, int]] = []

    def probe(self, starts: Mapping[int, int]) -> dict[int, int]:
        self.calls.append(dict(starts))
        out = {}
        for p, start in starts.items():
            if self.per_fetch is None:
                out[p] = max(start, self.ends[p])
            else:
                out[p] = max(start, min(self.ends[p], start + self.per_fetch))
        return out


def test_tansu_like_reported_ends_are_corrected() -> None:
    log = FakeLog({0: 5000, 1: 0, 2: 7, 3: 1})
    reported = {0: 4913, 1: 0, 2: 0, 3: 0}
    assert resolve_true_ends(reported, log.probe) == {0: 5000, 1: 0, 2: 7, 3: 1}
    # one probe finds the ends, a second confirms nothing lies beyond
    assert len(log.calls) == 2
    assert log.calls[1] == {0: 5000, 2: 7, 3: 1}


def test_true_reported_ends_need_one_probe_and_stay() -> None:
    log = FakeLog({0: 5000, 1: 0})
    assert resolve_true_ends({0: 5000, 1: 0}, log.probe) == {0: 5000, 1: 0}
    assert log.calls == [{0: 5000, 1: 0}]


def test_tail_visible_one_batch_at_a_time_is_walked_to_the_end() -> None:
    log = FakeLog({0: 1000}, per_fetch=300)
    assert resolve_true_ends({0: 100}, log.probe) == {0: 1000}
    assert [c[0] for c in log.calls] == [100, 400, 700, 1000]


def test_max_rounds_bounds_the_walk_and_keeps_a_valid_end() -> None:
    log = FakeLog({0: 1000}, per_fetch=100)
    assert resolve_true_ends({0: 0}, log.probe, max_rounds=3) == {0: 300}
    assert len(log.calls) == 3


def test_probe_missing_a_partition_is_an_error() -> None:
    with pytest.raises(KafkaError, match=r"\[1\]"):
        resolve_true_ends({0: 0, 1: 0}, lambda starts: {0: 4})


def test_empty_topic_needs_no_probe() -> None:
    log = FakeLog({})
    assert resolve_true_ends({}, log.probe) == {}
    assert log.calls == []


def test_max_rounds_must_be_positive() -> None:
    with pytest.raises(ValueError):
        resolve_true_ends({0: 0}, FakeLog({0: 0}).probe, max_rounds=0)


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
