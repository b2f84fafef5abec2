"""A Stream replayed as a workload: the recorded events, in order, at the recorded or given rate."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.advise import AdviseError, StreamWorkload, stream_of
from skewlab.errors import ConfigError
from skewlab.workload.trace_check import BadRow

pytestmark = pytest.mark.unit


def _stream(with_ts: bool = True):
    rows = [(f"k{i % 7}", 100.0 + i * 0.5 if with_ts else None, 10 + i) for i in range(50)]
    return stream_of("t", rows)


def test_replay_yields_the_recorded_events_in_order() -> None:
    s = _stream()
    chunks = list(StreamWorkload(s).events(len(s), chunk=16))
    ids = np.concatenate([c.keys.ids for c in chunks])
    ts = np.concatenate([c.ts for c in chunks])
    assert np.array_equal(ids, s.ids)
    assert ts.tolist() == [i * 0.5 for i in range(50)]
    assert [c.seq0 for c in chunks] == [0, 16, 32, 48]


def test_a_given_rate_stretches_the_timestamps() -> None:
    s = _stream()
    w = StreamWorkload(s, rate=8.0)
    assert s.native_rate() == pytest.approx(2.0)
    assert w.arrival_rate == 8.0
    assert np.allclose(w.times(), s.ts * 0.25)


def test_without_timestamps_a_rate_is_needed() -> None:
    s = _stream(with_ts=False)
    with pytest.raises(ConfigError):
        StreamWorkload(s)
    assert np.allclose(StreamWorkload(s, rate=10.0).times(), np.arange(50) / 10.0)


def test_a_replay_never_invents_events() -> None:
    s = _stream()
    with pytest.raises(ConfigError):
        list(StreamWorkload(s).events(len(s) + 1))


def test_bad_rows_are_counted_and_an_all_bad_stream_is_refused() -> None:
    rows = [BadRow("f", i, "bad") for i in range(5)] + [("a", None, None)]
    s = stream_of("f", rows)
    assert s.bad_rows == 5 and len(s.bad) == 3 and len(s) == 1
    with pytest.raises(AdviseError):
        stream_of("f", rows[:5])


def test_timestamps_are_kept_only_when_every_row_has_one() -> None:
    s = stream_of("t", [("a", 5.0, None), ("b", None, None)])
    assert s.ts is None
