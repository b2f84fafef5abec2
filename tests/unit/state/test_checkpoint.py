"""Checkpoint (theta, tau, beta) and restore: replay exactly beta and the input after tau."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import StateError
from skewlab.state import (
    Checkpoint,
    KeyedOperator,
    OperatorState,
    StreamTuple,
    replay_input,
    restore,
)

pytestmark = pytest.mark.unit


def stream(keys: list[str]) -> list[StreamTuple]:
    return [StreamTuple(tau, k, float(tau)) for tau, k in enumerate(keys)]


def reference(tuples: list[StreamTuple]) -> dict:
    op = KeyedOperator()
    for t in tuples:
        op.receive(t)
    op.process()
    return dict(op.state())


def test_checkpoint_holds_theta_tau_and_beta():
    op = KeyedOperator()
    for t in stream(["a", "b", "a", "c", "b"]):
        op.receive(t)
    op.process(3)
    cp = op.checkpoint(7)
    assert cp.tau == 2 and cp.resume_after == 4
    assert dict(cp.theta) == {"a": {"count": 2, "sum": 2.0}, "b": {"count": 1, "sum": 1.0}}
    assert [t.tau for t in cp.beta] == [3, 4]


def test_replay_is_exactly_beta_then_input_after_the_checkpoint():
    log = stream(["a", "b", "a", "c", "b", "d", "a", "c"])
    op = KeyedOperator()
    for t in log[:6]:
        op.receive(t)
    op.process(4)
    cp = op.checkpoint(1)
    replayed = replay_input(cp, log)
    assert [t.tau for t in replayed] == [4, 5, 6, 7]
    assert replayed[:2] == list(cp.beta)


@settings(max_examples=80, deadline=None)
@given(
    keys=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=60),
    data=st.data(),
    eta=st.integers(1, 5),
)
def test_restore_onto_eta_instances_loses_and_doubles_nothing(keys, data, eta):
    log = stream(keys)
    received = data.draw(st.integers(0, len(log)))
    processed = data.draw(st.integers(0, received))
    op = KeyedOperator()
    for t in log[:received]:
        op.receive(t)
    op.process(processed)
    cp = op.checkpoint(0)
    # the old instance goes on after the checkpoint; its work there is lost in a crash
    for t in log[received:]:
        op.receive(t)
    op.process()
    instances = restore(cp, eta, log)
    assert sum(i.buffered for i in instances) == len(log) - processed
    for i in instances:
        i.process()
    merged: dict = {}
    for i in instances:
        merged.update(i.state())
    assert merged == reference(log) == dict(op.state())


def test_a_replayed_duplicate_is_refused():
    op = KeyedOperator()
    op.receive(StreamTuple(3, "a"))
    with pytest.raises(StateError, match="not after"):
        op.receive(StreamTuple(3, "a"))


def test_beta_must_follow_tau():
    with pytest.raises(StateError, match="beta"):
        Checkpoint(0, OperatorState(), 5, (StreamTuple(5, "a"),))


def test_from_checkpoint_continues_where_it_left_off():
    log = stream(["x", "y", "x"])
    op = KeyedOperator()
    for t in log:
        op.receive(t)
    op.process(1)
    again = KeyedOperator.from_checkpoint(op.checkpoint(0))
    assert again.process() == op.process()
    assert again.state() == op.state()


def test_changed_share_counts_added_removed_and_changed_keys():
    from skewlab.state.checkpoint import changed_share

    before = {"a": 1, "b": 2, "c": 3, "d": 4}
    assert changed_share(before, dict(before)) == 0.0
    assert changed_share({}, {}) == 0.0
    # b changed, d removed, e added: 3 of the 5 keys in either state
    assert changed_share(before, {"a": 1, "b": 5, "c": 3, "e": 0}) == pytest.approx(3 / 5)
    assert changed_share({}, {"x": None}) == 1.0
