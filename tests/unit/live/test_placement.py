"""The state manager's sweep memory: which keys a sweep must look at again.

``Placement`` caches each key's operator and hash part (equal to the hashes it
stands for), and tells a sweep that only keys it has not seen can move as long
as neither the instances nor the routing map changed since the last full sweep.
"""

from __future__ import annotations

from skewlab.control.scaleout_state import Placement
from skewlab.rebalance.base import hash_worker
from skewlab.state import owner, split_hash

KEYS = [f"k{i}" for i in range(200)]


def test_cached_hashes_equal_the_hashes() -> None:
    p = Placement(3)
    for _ in range(2):  # computed, then cached
        assert [p.group(k) for k in KEYS] == [hash_worker(k, 3) for k in KEYS]
        for n in (1, 2, 3, 2):
            assert [p.part(k, n) for k in KEYS] == [owner(k, n, split_hash) for k in KEYS]


def test_primed_parts_equal_the_hashes() -> None:
    p = Placement(2)
    p.part(KEYS[0], 3)  # cached for another count: primed again
    for n in (2, 3):
        p.prime(KEYS[:150], n)
        # cached by the one call, before any part() asks
        assert all(p._part[k] == (n, owner(k, n, split_hash)) for k in KEYS[:150])
        assert [p.part(k, n) for k in KEYS] == [owner(k, n, split_hash) for k in KEYS]


def test_only_new_keys_need_a_look_until_instances_or_map_change() -> None:
    p = Placement(1)
    mapping: dict[str, tuple[int, int]] = {}
    assert p.unseen(KEYS, ((0,),), mapping) is None  # never swept: full sweep
    p.swept(set(KEYS[:100]), ((0,),), mapping)
    assert p.unseen(KEYS, ((0,),), mapping) == KEYS[100:]
    p.saw(KEYS[100:150])
    assert p.unseen(KEYS, ((0,),), mapping) == KEYS[150:]
    assert p.unseen(KEYS, ((0, 1),), mapping) is None  # an instance started
    assert p.unseen(KEYS, ((0,),), dict(mapping)) is None  # a new map (a switch, recovery)
