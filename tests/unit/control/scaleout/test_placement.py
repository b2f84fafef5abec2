"""The state manager's sweep memory: which keys a sweep must look at again.

``Placement`` caches each key's operator and hash part (equal to the hashes it
stands for), and tells a sweep that only keys it has not seen can move as long
as neither the instances nor the routing map changed since the last full sweep.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from skewlab.control.scaleout.state import Placement, VersionRows
from skewlab.rebalance.base import hash_worker
from skewlab.state import owner, split_hash

KEYS = [f"k{i}" for i in range(200)]


def test_cached_hashes_equal_the_hashes() -> None:
    p = Placement(3)
    for _ in range(2):  # computed, then cached
        assert [p.group(k) for k in KEYS] == [hash_worker(k, 3) for k in KEYS]
        for n in (1, 2, 3, 2):
            assert [p.part(k, n) for k in KEYS] == [owner(k, n, split_hash) for k in KEYS]


def test_batch_hashes_equal_the_hashes() -> None:
    p = Placement(3)
    p.part(KEYS[0], 3)  # one key hashed alone first
    p.hash_new(KEYS[:150])
    assert p.groups(KEYS).tolist() == [hash_worker(k, 3) for k in KEYS]
    for n in (1, 2, 3, 5):
        assert p.parts(KEYS, n).tolist() == [owner(k, n, split_hash) for k in KEYS]
    per = [1 + i % 4 for i in range(len(KEYS))]  # a count per key
    want = [owner(k, n, split_hash) for k, n in zip(KEYS, per, strict=True)]
    assert p.parts(KEYS, np.array(per)).tolist() == want


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


def _rows_key_by_key(
    seen: list[str], sig: tuple[tuple[int, ...], ...], mapping: dict[str, tuple[int, int]]
) -> list[tuple[str, int, int, bool]]:
    """The version's rule, one key at a time: a key goes to its group's instance of its
    hash part; moved (set + 1) when ``mapping`` has it elsewhere (unmapped: its group,
    set 0); kept when mapped and staying."""
    out = []
    for k in sorted(set(seen) | set(mapping)):
        g = hash_worker(k, len(sig))
        to = sig[g][owner(k, len(sig[g]), split_hash)]
        cur, sid = mapping.get(k, (g, 0))
        if to != cur:
            out.append((k, to, sid + 1, True))
        elif k in mapping:
            out.append((k, to, sid, False))
    return out


@pytest.mark.parametrize(
    "sig", [((0,),), ((0, 1),), ((0, 2, 3), (1,)), ((0,), (1, 2)), ((4, 0), (3, 1, 2))]
)
def test_version_rows_follow_the_rule_key_by_key(sig: tuple[tuple[int, ...], ...]) -> None:
    rng = random.Random(len(sig) * 10 + sum(map(len, sig)))
    seen = rng.sample(KEYS, 120)
    # mapped keys: some seen, some not; placed on an instance of any group, sets 0-3
    instances = sorted({j for a in sig for j in a} | {5})
    mapping = {k: (rng.choice(instances), rng.randrange(4)) for k in rng.sample(KEYS, 80)}
    for m in ({}, mapping):
        rows = VersionRows.build(Placement(len(sig)), seen, sig, m)
        want = _rows_key_by_key(seen, sig, m)
        got = list(zip(rows.keys, rows.instances, rows.sets, rows.is_move, strict=True))
        assert got == want
        assert rows.moved == [(k, s) for k, _, s, mv in want if mv]
        assert [(k, to) for k, _, _, to in rows.unmarked] == [(k, t) for k, t, _, mv in want if mv]
        for k, cur, sid, _ in rows.unmarked:
            assert (cur, sid) == m.get(k, (hash_worker(k, len(sig)), 0))
        groups = [hash_worker(k, len(sig)) for k in set(seen) | set(m)]
        assert rows.group_keys == [groups.count(g) for g in range(len(sig))]
        assert rows.every == set(seen) | set(m)


def test_version_rows_of_no_keys_are_empty() -> None:
    rows = VersionRows.build(Placement(2), [], ((0,), (1, 2)), {})
    assert (rows.keys, rows.moved, rows.group_keys) == ([], [], [0, 0])
