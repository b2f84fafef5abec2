"""``advise --topic``: a real topic sampled: newest records, bad ones counted, offsets untouched."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from skewlab.io.kafka import CLIENTS, KafkaSettings, connect
from skewlab.io.stream_sample import sample_topic

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("impl", sorted(CLIENTS))
def test_sample_reads_the_newest_records_in_time_order_and_commits_nothing(
    broker: Any, new_topic: Callable[..., str], impl: str
) -> None:
    topic = new_topic(partitions=2)
    kc = connect(KafkaSettings(broker.bootstrap))
    try:
        for i in range(40):
            value = json.dumps({"key": f"k{i % 5}", "ts": float(i), "seq": i, "payload": ""})
            kc.produce(topic, value.encode(), partition=i % 2)
        kc.produce(topic, b'{"key": "", "ts": 40.0}', partition=0)  # an empty key: bad
        kc.flush()
        s = sample_topic(broker.bootstrap, topic, records=21, client=impl)
        assert s.bad_rows == 1
        assert len(s) == 20
        assert s.ts is not None and s.ts.tolist() == [float(t - 20) for t in range(20, 40)]
        assert [s.vocab.keys[i] for i in s.ids.tolist()] == [f"k{i % 5}" for i in range(20, 40)]
        for group in ("skewlab-reader", "skewlab-advise"):
            assert kc.committed(group, topic) == {}
    finally:
        kc.close(0)
