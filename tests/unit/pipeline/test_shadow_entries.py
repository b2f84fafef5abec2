"""Restored shadow keys decoded on first use (``pipeline.shadow_entries``) behave like
keys restored eagerly, and are not part of the worker's own changes."""

from __future__ import annotations

import json

from skewlab.pipeline.handoff import KeySets, Rec, SetEntry, Status


def holder_rows() -> dict[str, bytes]:
    """A holder's state rows (as ``KeySets.rows`` writes them): ``a`` and ``b`` hold set 0,
    ``c`` set 1, ``w`` waits for set 1 while holding set 0, ``gone`` was handed on."""
    src = KeySets(0, 1)
    for i, k in enumerate(["a", "a", "b", "w", "gone"]):
        src.record(k, 0, -1, Rec(1.0, i, 10, 0))
    src.record("c", 1, -1, Rec(1.0, 9, 5, 0))
    src.sets["c"][1].status = Status.ACTIVE
    src.end_of_set("w", 1, 0, 0)
    src._entry("w", 1, -1)
    src.end_of_set("gone", 0, 0, 3)
    src.take_handoffs()
    return {k: v for k, v, _ in src.rows() if k}


def eager(rows: dict[str, bytes], source: int) -> dict[str, SetEntry]:
    """The entries the eager restore made (one ACTIVE set: shadowed; else WAITING)."""
    out = {}
    for k, raw in rows.items():
        entries = json.loads(raw)["sets"]
        if not entries:
            continue
        if len(entries) == 1 and entries[0]["status"] == "active":
            e = SetEntry.from_json(entries[0], [])
            e.source = source
        else:
            e = SetEntry(max(int(x["set"]) for x in entries), source, Status.WAITING)
        out[k] = e
    return out


def test_base_keys_decode_on_first_use_like_an_eager_restore() -> None:
    rows = holder_rows()
    ks = KeySets(1, 1)
    shadowed = {k for k, raw in rows.items() if ks.shadow_base(k, raw, 0)}
    assert shadowed == {"a", "b", "c", "w"}  # "gone" holds no set: nothing to shadow
    assert ks.shadow.base_size == 4 and not list(ks.shadow.decoded())
    assert "a" in ks.shadow and "gone" not in ks.shadow
    assert [k for k, _, _ in ks.changed_rows()] == [""]  # the worker's own (meta) row only
    want = eager(rows, 0)
    assert dict(ks.shadow.items()) == want  # decoding every key gives the eager entries
    assert ks.shadow_stats["a"] == [len(rows["a"]), 0] and ks.shadow_stats["w"] == [0, 0]


def test_a_used_base_key_is_a_change_and_an_unused_one_is_not() -> None:
    rows = holder_rows()
    ks = KeySets(1, 1)
    for k, raw in rows.items():
        ks.shadow_base(k, raw, 0)
    ks.changed_rows()
    assert not ks.shadow_record("a", 0, 0, Rec(2.0, 7, 3, 0))  # replayed, suppressed
    written = {k: json.loads(v) for k, v, _ in ks.changed_rows() if k}
    assert set(written) == {"a"}
    assert written["a"]["shadow"]["state"]["count"] == 3  # 2 restored + 1 replayed
    assert ks.shadow.base_size == 3


def test_going_live_applies_to_base_keys_decoded_later_by_the_same_rule() -> None:
    rows = holder_rows()
    lazy, ref = KeySets(1, 1), KeySets(1, 1)
    for k, raw in rows.items():
        lazy.shadow_base(k, raw, 0)
    for k, e in eager(rows, 0).items():
        ref.shadow_start(k, e, 0)
    lazy.shadow["b"]  # decoded before the cut
    went = lazy.shadow_go_live(0)
    assert went == ["b"]  # only decoded keys are touched now
    assert sorted(ref.shadow_go_live(0)) == ["a", "b"]  # set 0, ACTIVE: live ("c" holds set 1)
    assert {k: e.live for k, e in lazy.shadow.items()} == {k: e.live for k, e in ref.shadow.items()}
    assert lazy.shadow_record("a", 0, 0, Rec(2.0, 8, 1, 0))  # live: output here


def test_deleting_and_clearing_cover_base_keys() -> None:
    rows = holder_rows()
    ks = KeySets(1, 1)
    for k, raw in rows.items():
        ks.shadow_base(k, raw, 0)
    del ks.shadow["a"]
    assert "a" not in ks.shadow and len(ks.shadow) == 3
    ks.shadow["b"] = SetEntry(0, 0, Status.WAITING)  # replacing a base key: no decode
    assert ks.shadow["b"].status is Status.WAITING
    ks.shadow_go_live(0)
    ks.shadow.clear()
    assert len(ks.shadow) == 0 and not ks.shadow.live_sources
