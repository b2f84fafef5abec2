"""DKG's generational key spaces on their own."""

from __future__ import annotations

import pytest

from skewlab.grouping._keyspace import BABY, OLD, TEENAGE, KeySpaces

pytestmark = pytest.mark.unit


def filled(counts: dict[str, int], teen_cap: int = 2, old_cap: int = 1) -> KeySpaces:
    sp = KeySpaces(baby_cap=3, teen_cap=teen_cap, old_cap=old_cap, baby_limit=100)
    for key, count in counts.items():
        item, gone = sp.add(key, 0.0, 2)
        item.count = count
        assert gone == []
    return sp


def test_cycle_truncates_baby_and_promotes_the_most_frequent() -> None:
    sp = filled({"a": 1, "b": 5, "c": 3, "d": 4, "e": 2})
    gone = sp.cycle(promote_old=False)
    assert {it.key for it in gone} == {"a", "e"}  # baby keeps its 3 most frequent
    assert [it.key for it in sp.teen] == ["b", "d"]
    assert [it.key for it in sp.baby] == ["c"]
    assert all(sp.items[k].space == TEENAGE for k in "bd")
    assert set(sp.items) == {"b", "c", "d"}


def test_swap_needs_strictly_higher_frequency() -> None:
    sp = filled({"a": 5, "b": 4})
    sp.cycle(promote_old=False)
    x, _ = sp.add("x", 0.0, 2)
    x.count = 4  # ties the least frequent teenager: no swap
    sp.cycle(promote_old=False)
    assert [it.key for it in sp.teen] == ["a", "b"]
    x.count = 6
    sp.cycle(promote_old=False)
    assert [it.key for it in sp.teen] == ["x", "a"]
    assert [it.key for it in sp.baby] == ["b"] and sp.items["b"].space == BABY


def test_old_promotion_only_when_asked() -> None:
    sp = filled({"a": 5, "b": 4})
    sp.cycle(promote_old=False)
    assert sp.old == []
    sp.cycle(promote_old=True)
    assert [it.key for it in sp.old] == ["a"] and sp.items["a"].space == OLD


def test_baby_limit_compacts_early() -> None:
    sp = KeySpaces(baby_cap=3, teen_cap=2, old_cap=1, baby_limit=5)
    hot, _ = sp.add("hot", 0.0, 2)
    hot.count = 50
    evicted = []
    for i in range(20):
        _, gone = sp.add(f"k{i}", 0.0, 2)
        evicted.extend(gone)
        assert len(sp.baby) <= 5
    assert "hot" in sp.items
    assert len(evicted) == 21 - len(sp.items)


def test_gc_evicts_only_stale_teenage_and_old_keys() -> None:
    sp = filled({"a": 5, "b": 4, "c": 1})
    sp.cycle(promote_old=False)
    sp.items["b"].last_seen = 50.0
    gone = sp.gc(now=3650.0, ttl=3600.0)
    assert [it.key for it in gone] == ["a"]
    assert set(sp.items) == {"b", "c"}  # "c" is a baby: not collected


def test_snapshot_round_trip_keeps_order_and_fields() -> None:
    sp = filled({"a": 5, "b": 4, "c": 1})
    sp.cycle(promote_old=True)
    copy = KeySpaces(3, 2, 1, 100)
    copy.restore(sp.snapshot())
    assert copy.snapshot() == sp.snapshot()
    assert {k: it.space for k, it in copy.items.items()} == {
        k: it.space for k, it in sp.items.items()
    }
