"""Records written into a run's ``events`` topic from outside the run (issue 37 point 1).

A live run gets 18 foreign records mid-run: 15 the route job must quarantine and 3 valid
events (one a copy of the run's ``seq`` 0). The run is still EXACT, its quality check
passes, and one count (the topic's records, what the route job read) is the verdict's
expected events, the quality expectation and the summary's events figure; the verdict
names how many events came from elsewhere.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.integration.fixtures.live import LIVE_DEFAULTS, RunRefs

from skewlab.live.report.aggregate import verify
from skewlab.pipeline import events
from skewlab.quality.events import run_events

pytestmark = pytest.mark.integration

N = LIVE_DEFAULTS["events"]

MALFORMED: list[bytes] = [
    b"this is {not json",
    b'{"ts": 1.5, "seq": 3, "payload": ""}',
    b'{"key": 42, "ts": 1.5, "seq": 3}',
    b'{"key": "Turkey", "ts": "yesterday", "seq": 3}',
    b'{"key": "Turkey", "ts": 1.5, "seq": "three"}',
    b'["Turkey", 1.5, 3]',
    b"",
    b'{"key": "poison", "ts": Infinity, "seq": 1}',
    b'{"key": "\\ud800", "ts": 1.5, "seq": 1}',
    b'{"key": "poison", "ts": 1e300, "seq": 1}',
    b'{"key": "poison", "ts": NaN, "seq": 1}',
    b'{"key": "poison", "ts": -1e308, "seq": 1}',
    b"\xff\xfe not utf-8",
    b'{"key": "", "ts": 1.5, "seq": 1}',
    b"null",
]
"""15 records the route job quarantines."""


def test_foreign_records_are_one_count_everywhere_and_named_in_the_verdict(run_live, broker):
    from skewlab.io.kafka import KafkaSettings, connect

    injected: dict[str, Any] = {}

    def inject(sent: int, procs: Any, refs: RunRefs) -> None:
        if injected:
            return
        outside = connect(KafkaSettings(broker.bootstrap))
        try:
            (first,) = list(outside.fetch(refs.events_topic, 0, 0, 1))  # seq 0 is in partition 0
            assert first.value is not None and b'"seq":0,' in first.value
            valid = [
                (0, first.value, first.key),  # a copy of seq 0, as an outsider would send it
                (1, events.encode("outsider", time.time(), 10**9), b"outsider"),
                (0, events.encode("Turkey", time.time(), 10**9 + 1), b"Turkey"),
            ]
            for i, raw in enumerate(MALFORMED):
                outside.produce(refs.events_topic, raw, key=b"bad", partition=i % 2)
            for part, raw, key in valid:
                outside.produce(refs.events_topic, raw, key=key, partition=part)
            outside.flush()
        finally:
            outside.close()
        injected.update(sent=sent, valid=len(valid), malformed=len(MALFORMED))

    run = run_live("pkg", hook=inject, quality=True)
    assert injected == {"sent": 2048, "valid": 3, "malformed": 15}  # mid-run
    s = run.summary
    # the verdict: EXACT over every event the route job read, 3 of them foreign
    assert s.exact, s.exactness
    assert f"expected {N + 3} events, merged {N + 3}" in s.exactness
    assert f"(input: {N} from the run's producer, 3 foreign)" in s.exactness
    # the summary's figure is the same count; the quarantined ones are apart
    assert (s.events, s.foreign, s.quarantined) == (N + 3, 3, 15)
    # the quality check expected that count too, and passed
    assert s.quality == "passed", s.quality_failures
    got = run_events(run.run_dir.parent.parent, run.run_id, limit=None)
    assert got.full and got.produced == N and got.foreign == 3 and got.rejected == 15
    assert got.expected_rows == len(got.frame) == N + 3
    # the copy of seq 0 is there twice: once from the run, once foreign
    seq0 = got.frame[got.frame["seq"] == 0]
    assert len(seq0) == 2 and set(seq0["partition"]) == {0}
    # recomputed from the kept topic: the same count and the same origin
    report = verify(run.store, run.client, run.run_id, run.events_topic, run.settings.window_s)
    assert (report.expected_events, report.actual_events) == (N + 3, N + 3)
    assert report.foreign_events == 3 and report.exact
