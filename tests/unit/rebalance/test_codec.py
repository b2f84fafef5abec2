"""Rebalancer snapshots through JSON: the same decisions after the round trip; seeding a map."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skewlab.errors import StateError
from skewlab.rebalance import LoadSnapshot, make_rebalancer
from skewlab.rebalance.base import hash_worker
from skewlab.rebalance.codec import seeded, snapshot_from_dict, snapshot_to_dict

pytestmark = pytest.mark.unit

W = 4
PARAMS = {
    "smalops": {"threshold": 0.05, "gate": False, "seed": 11},
    "dlb-h": {"theta": 5.0},
    "dlb-l": {"theta": 5.0},
    "lptf": {"theta": 5.0},
    "none": {},
}


def intervals(n: int, seed: int = 0) -> list[LoadSnapshot]:
    """``n`` skewed intervals over 60 keys, the hot ones changing (placement = hash)."""
    rng = np.random.default_rng(seed)
    keys = tuple(f"k{i}" for i in range(60))
    out = []
    for t in range(n):
        loads = rng.zipf(1.6, size=len(keys)).clip(max=500)
        loads[(t * 7) % len(keys)] += 2_000
        out.append(
            LoadSnapshot(
                now=10.0 * (t + 1), interval_s=10.0, workers=W, keys=keys,
                loads=loads, placement=np.asarray([hash_worker(k, W) for k in keys]),
            )
        )  # fmt: skip
    return out


def moves(decision) -> list[tuple[str, int, int, str]]:  # type: ignore[no-untyped-def]
    return [(m.key, m.src, m.dst, m.kind) for m in decision.moves]


@pytest.mark.parametrize("policy", sorted(PARAMS))
def test_json_round_trip_continues_identically(policy: str) -> None:
    cfg = make_rebalancer(policy, workers=W, **PARAMS[policy])
    steps = intervals(6)
    straight = cfg.build()
    for s in steps[:3]:
        straight.decide(s.now, s)
    snap = straight.snapshot()
    restored_snap = snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(snap))))
    assert restored_snap == snap
    restored = cfg.build(state=restored_snap)
    for s in steps[3:]:
        a, b = straight.decide(s.now, s), restored.decide(s.now, s)
        assert moves(a) == moves(b) and a.assignment == b.assignment


def test_malformed_snapshots_are_refused() -> None:
    with pytest.raises(StateError, match="unknown rebalancer snapshot kind"):
        snapshot_from_dict({"kind": "dkg"})
    with pytest.raises(StateError, match="malformed"):
        snapshot_from_dict({"kind": "map", "policy": "lptf"})
    with pytest.raises(StateError, match="no codec"):
        snapshot_to_dict(object())


@pytest.mark.parametrize("policy", ["smalops", "dlb-h", "lptf"])
def test_seeded_policy_holds_the_pinned_keys(policy: str) -> None:
    cfg = make_rebalancer(policy, workers=W, **PARAMS[policy])
    key = "k3"
    away = (hash_worker(key, W) + 1) % W
    rb = seeded(cfg, {key: away})
    assert dict(rb.assignment) == {key: away}
    assert dict(seeded(cfg, {}).assignment) == {}
