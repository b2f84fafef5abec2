"""Message sets at a worker: buffering, hand-off, order, completion, checkpoint round trip."""

import json

import pytest

from skewlab.pipeline.handoff import Handoff, KeySets, Rec, Status
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit


def rec(seq, splitter=0, size=10):
    return Rec(ts=1.0 + seq, seq=seq, size=size, splitter=splitter)


def test_set_zero_applies_and_hands_off_when_every_splitter_ended_it():
    a = KeySets(worker=0, splitters=2)
    assert a.record("k", 0, -1, rec(0)) == [rec(0)]
    assert a.record("k", 0, -1, rec(1, splitter=1)) == [rec(1, splitter=1)]
    a.end_of_set("k", 0, splitter=0, next_worker=3)
    assert a.take_handoffs() == []  # splitter 1 has not ended the set yet
    a.end_of_set("k", 0, splitter=1, next_worker=3)
    (h,) = a.take_handoffs()
    assert (h.key, h.set_id, h.src, h.dst, h.tuples) == ("k", 1, 0, 3, 2)
    assert h.state["last"] == {"0": 0, "1": 1} and "k" not in a.sets
    a.end_of_set("k", 0, splitter=0, next_worker=3)  # a replayed marker: ignored
    assert a.take_handoffs() == [] and "k" not in a.sets


def test_new_worker_buffers_until_the_hand_off_then_applies_in_order():
    b = KeySets(worker=3, splitters=1)
    assert b.record("k", 1, 0, rec(5)) == [] and b.record("k", 1, 0, rec(6)) == []
    assert b.waiting() == 1 and b.buffered() == 2
    state = {"count": 5, "sum": 50, "last": {"0": 4}, "violations": 0}
    assert b.receive(Handoff("k", 1, 0, 3, state)) == [rec(5), rec(6)]
    assert b.receive(Handoff("k", 1, 0, 3, state)) == []  # duplicate copy: ignored
    e = b.sets["k"][1]
    assert e.status is Status.ACTIVE and e.state["count"] == 7 and e.state["violations"] == 0
    assert b.record("k", 1, 0, rec(3)) == [rec(3)]  # behind the handed-off order
    assert b.sets["k"][1].state["violations"] == 1


def test_end_of_stream_completes_sets_whose_next_holder_is_known():
    a = KeySets(worker=0, splitters=3)
    a.record("k", 0, -1, rec(0))
    a.end_of_set("k", 0, splitter=1, next_worker=2)
    a.record("j", 0, -1, rec(1))
    a.end_of_stream()
    (h,) = a.take_handoffs()
    assert h.key == "k" and "j" in a.sets  # j never moved: stays here


def test_checkpoint_rows_restore_the_same_state():
    b = KeySets(worker=1, splitters=2)
    b.record("k", 2, 0, rec(9))
    b.record("j", 0, -1, rec(1))
    b.end_of_set("j", 0, splitter=0, next_worker=0)
    c = KeySets.from_rows(1, 2, b.rows())
    assert c.rows() == b.rows() and c.buffered() == 1 and c.waiting() == 1
    assert json.loads(dict((k, v) for k, v, _ in c.rows())["j"])["sets"][0]["ended"] == [0]


def test_rebalance_needs_key_grouping_and_a_known_policy():
    from skewlab.errors import ConfigError

    with pytest.raises(ConfigError, match="runs on top of KEY grouping") as exc:
        ExperimentSettings(strategy="pkg", rebalance="smalops")
    assert "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="smalops, dlb-h, dlb-l, lptf"):
        ExperimentSettings(strategy="key", rebalance="best")
    assert ExperimentSettings(strategy="key", rebalance="dlb-h").rebalance == "dlb-h"


def test_incremental_rows_restore_the_state_at_every_checkpoint():
    """changed_rows() per flush + latest_rows() over the history == the whole state."""
    from skewlab.pipeline.handoff import latest_rows

    a = KeySets(worker=0, splitters=2)
    history: list[tuple[int, str, bytes, bytes | None]] = []
    steps = [
        lambda: a.record("k", 0, -1, rec(0)),
        lambda: a.record("j", 0, -1, rec(1)),
        lambda: a.record("k", 0, -1, rec(2, splitter=1)),
        lambda: a.end_of_set("k", 0, splitter=0, next_worker=2),
        lambda: a.record("x", 1, 3, rec(3)),  # waiting for its hand-off: buffered
        lambda: a.end_of_set("k", 0, splitter=1, next_worker=2),  # k handed on
        lambda: a.receive(
            Handoff("x", 1, 3, 0, {"count": 4, "sum": 9, "last": {}, "violations": 0})
        ),
        lambda: a.end_of_stream(),
    ]
    for checkpoint, step in enumerate(steps):
        step()
        changed = a.changed_rows()
        assert len(changed) <= len(a.rows())  # only what changed (+ the worker's own row)
        history += [(checkpoint, k, v, b) for k, v, b in changed]
        restored = KeySets.from_rows(0, 2, latest_rows(history))
        assert restored.rows() == a.rows(), f"after step {checkpoint}"
    assert [k for k, _, _ in a.changed_rows()] == [""]  # nothing changed since the last call
    assert json.loads(dict((k, v) for k, v, _ in a.rows())["k"])["sets"] == []


def test_latest_rows_takes_each_keys_newest_row():
    from skewlab.pipeline.handoff import latest_rows

    rows = [(5, "a", b"new", None), (2, "a", b"old", b"buf"), (3, "b", b"b3", None)]
    assert latest_rows(rows) == [("a", b"new", None), ("b", b"b3", None)]
