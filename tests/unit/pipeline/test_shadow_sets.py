"""Shadow sets at a worker: a key taken over from a shadow equals the hand-off it replaces."""

from __future__ import annotations

import json

import pytest

from skewlab.pipeline.handoff import Handoff, KeySets, Rec, SetEntry, Status, cut_row

SPLITTERS = 2


def recs(n: int, splitter: int = 0, start: int = 0) -> list[Rec]:
    return [Rec(float(i), start + i, 10 + i, splitter) for i in range(n)]


def holder_and_shadow() -> tuple[KeySets, KeySets]:
    """Worker 0 holds key k (set 0, 3 records applied); worker 5 shadows a copy of it."""
    holder = KeySets(0, SPLITTERS)
    for r in recs(3):
        holder.record("k", 0, -1, r)
    shadow = KeySets(5, SPLITTERS)
    copy = SetEntry.from_json(json.loads(json.dumps(holder.sets["k"][0].to_json())), [])
    shadow.shadow_start("k", copy, restored_bytes=40)
    return holder, shadow


def test_shadow_takes_the_key_at_the_switch_with_the_holders_final_state() -> None:
    holder, shadow = holder_and_shadow()
    for r in recs(2, splitter=1, start=100):  # after the copy: the holder and the shadow read it
        holder.record("k", 0, -1, r)
        shadow.shadow_record("k", 0, 0, r)
    moved = recs(2, splitter=0, start=50)  # routed to worker 5 after the switch: set 1
    for r in moved:
        assert shadow.record("k", 1, 0, r) == []  # buffered: the set waits for its state
    assert shadow.waiting() == 1
    # the first splitter's marker: not yet complete
    assert shadow.shadow_end_of_set("k", 0, 0, 0, 5) == (None, [])
    holder.end_of_set("k", 0, 0, 5)
    holder.end_of_set("k", 0, 1, 5)
    sid, applied = shadow.shadow_end_of_set("k", 0, 0, 1, 5)
    assert sid == 1 and applied == moved
    assert shadow.waiting() == 0 and shadow.received["k"] == 1
    (h,) = holder.take_handoffs()
    state_before_buffer = h.state
    # the shadow's set 1 = the holder's final set 0 (3 + 2 records) + the two buffered
    assert state_before_buffer["count"] == 5
    assert shadow.sets["k"][1].state["count"] == 7
    # the real hand-off arrives later: a duplicate that agrees, so nothing changes
    assert shadow.receive(h) == []
    assert shadow.sets["k"][1].state["count"] == 7
    assert shadow.sets["k"][1].state["violations"] == 0


def test_a_shadow_that_disagrees_with_the_hand_off_counts_a_violation() -> None:
    holder, shadow = holder_and_shadow()
    holder.record("k", 0, -1, Rec(9.0, 999, 1, 1))  # the shadow misses this record
    for sp in range(SPLITTERS):
        holder.end_of_set("k", 0, sp, 5)
        shadow.shadow_end_of_set("k", 0, 0, sp, 5)
    (h,) = holder.take_handoffs()
    shadow.receive(h)
    assert shadow.sets["k"][1].state["violations"] == 1


def test_a_real_hand_off_first_drops_the_shadow() -> None:
    holder, shadow = holder_and_shadow()
    for sp in range(SPLITTERS):
        holder.end_of_set("k", 0, sp, 5)
    (h,) = holder.take_handoffs()
    assert shadow.receive(h) == []
    assert "k" not in shadow.shadow and shadow.received["k"] == 1
    assert shadow.shadow_end_of_set("k", 0, 0, 0, 5) == (None, [])


def test_shadow_is_never_key_state_and_survives_a_restore() -> None:
    _, shadow = holder_and_shadow()
    shadow.shadow_meta = {"epoch": 1, "sources": {"0": {"offset": 7, "wm": {}, "ended": False}}}
    rows = shadow.rows()
    back = KeySets.from_rows(5, SPLITTERS, rows)
    assert back.sets == {}  # a shadow is not a held set
    assert back.shadow["k"].state == shadow.shadow["k"].state
    assert back.shadow_meta == shadow.shadow_meta
    assert back.shadow_stats["k"] == [40, 0]


def test_a_key_waiting_at_its_holder_is_not_shadowed() -> None:
    shadow = KeySets(5, SPLITTERS)
    shadow.shadow_start("w", SetEntry(1, 0, Status.WAITING), 0)
    shadow.shadow_record("w", 1, 0, Rec(1.0, 1, 1, 0))
    assert shadow.shadow["w"].state["count"] == 0
    for sp in range(SPLITTERS):
        assert shadow.shadow_end_of_set("w", 1, 0, sp, 5)[0] is None
    assert shadow.waiting() == 0 and "w" not in shadow.received
    h = Handoff("w", 2, 0, 5, {"count": 4, "sum": 8, "last": {}, "violations": 0})
    shadow.record("w", 2, 0, Rec(2.0, 2, 1, 0))
    assert len(shadow.receive(h)) == 1  # the hand-off path still works for it


def test_the_cut_rule_agrees_on_both_sides_and_survives_a_restore() -> None:
    """The holder cuts its first-held keys (set 0, ACTIVE) of the moved part; a shadow
    that read the same records goes live on exactly those; both come back from rows."""
    holder = KeySets(0, SPLITTERS)
    shadow = KeySets(5, SPLITTERS)
    for i, k in enumerate(["a", "b", "c"]):  # first held here: set 0
        for r in recs(2, start=10 * i):
            holder.record(k, 0, -1, r)
            shadow.shadow_record(k, 0, 0, r)
    holder.record("w", 1, 3, Rec(1.0, 1, 1, 0))  # waits for its hand-off: not cut
    shadow.shadow_start("w", SetEntry(1, 0, Status.WAITING), 0)
    moved = {"a", "b", "w"}
    cut = holder.cuttable(lambda ks: [k in moved for k in ks])
    assert sorted(cut) == ["a", "b"]
    holder.cut_keys(cut)
    assert sorted(k for k in shadow.shadow_go_live(0) if k in moved) == ["a", "b"]
    after = Rec(9.0, 99, 5, 0)
    assert holder.record("a", 0, -1, after) == []  # dropped at the holder: not its work
    assert shadow.shadow_record("a", 0, 0, after) is True  # live output at the new one
    holder.end_of_set("a", 0, 0, 5)
    holder.end_of_set("a", 0, 1, 5)
    assert holder.take_handoffs() == []  # no hand-off leaves a cut key
    again = KeySets.from_rows(0, SPLITTERS, holder.rows())
    assert again.cut == {"a": 0, "b": 0} and "a" not in again.sets and "c" in again.sets
    back = KeySets.from_rows(5, SPLITTERS, shadow.rows())
    assert back.shadow["a"].live and not back.shadow["w"].live
    assert back.shadow["a"].state["count"] == 3


@pytest.mark.parametrize("completed, cut, received", [(0, 0, 0), (-1, 0, 7), (3, 2, 123456)])
def test_a_cut_keys_row_is_what_json_makes_of_it(completed: int, cut: int, received: int) -> None:
    """The fixed form a cut commit writes per cut key is the JSON of its value, byte for
    byte, and a restore reads it back as cut."""
    value = {"received": received, "completed": completed, "sets": [], "cut": cut}
    assert cut_row(completed, cut, received) == json.dumps(value, sort_keys=True).encode()


def test_rows_of_cut_keys_restore_the_cut_with_their_counts() -> None:
    holder = KeySets(0, SPLITTERS)
    for i, k in enumerate(["a", "b", "c"]):
        for r in recs(3, start=10 * i):
            holder.record(k, 0, -1, r)
    holder.changed_rows()
    holder.cut_keys(["a", "c"])
    rows = {k: v for k, v, _ in holder.changed_rows()}
    assert set(rows) == {"", "a", "c"}  # the meta row and the cut keys
    assert json.loads(rows["a"]) == {"completed": 0, "cut": 0, "received": 0, "sets": []}
    again = KeySets.from_rows(0, SPLITTERS, holder.rows())
    assert again.cut == {"a": 0, "c": 0} and set(again.sets) == {"b"}
    assert {k: again.completed.get(k, -1) for k in "abc"} == {"a": 0, "b": -1, "c": 0}
