"""DKG behaviour with a FakeClock: warm-up, promotions, scaling rules, gc, bounds."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import DKGConfig
from skewlab.grouping.dkg import DKGRouter
from skewlab.hashing import DKG_SEED, bucket
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

HOT = "hot"


def hot_run(cfg: DKGConfig, until: int) -> dict[int, int]:
    """One event of HOT per second from t=0..until; the pool size after each second."""
    clock = FakeClock()
    g = cfg.build(clock=clock)
    pools = {}
    for t in range(until + 1):
        clock.set(float(t))
        g.route(HOT)
        g.route(HOT)
        pools[t] = g.pool_size(HOT)
    return pools


def test_thresholds_follow_the_seed_equations() -> None:
    g = DKGConfig(workers=4).build()
    assert g.ideal_load == 25.0
    assert g.load_to_scale_up == pytest.approx(30.0)
    assert g.load_to_scale_down == pytest.approx(20.0)


def test_promotion_timing_baby_teenage_old() -> None:
    clock = FakeClock()
    g = DKGConfig(workers=4).build(clock=clock)
    spaces = {}
    for t in (0.0, 14.9, 15.0, 29.0, 44.9, 59.9, 60.0):
        clock.set(t)
        g.route(HOT)
        spaces[t] = g.space_of(HOT)
    assert spaces[0.0] == spaces[14.9] == "baby"
    assert spaces[15.0] == spaces[29.0] == spaces[59.9] == "teenage"
    assert spaces[60.0] == "old"  # the 4th cycle promotes teenage -> old
    assert g.frequency(HOT) == 7


def test_no_scale_up_during_warm_up() -> None:
    # Old space at 60 s, checks every 10 s, but the warm-up lasts 100 s.
    # Checks fall at t = 0, 11, 22, ... (due when now - last > 10); the key is old
    # and overloaded at the checks of 66, 77, 88 and 99 s, all inside the warm-up.
    pools = hot_run(DKGConfig(workers=4, warmup=100.0, check_interval=10.0), 115)
    assert all(p == 2 for t, p in pools.items() if t < 110)
    assert pools[110] == 3
    without = hot_run(DKGConfig(workers=4, warmup=0.0, check_interval=10.0), 70)
    assert without[65] == 2 and without[66] == 3


def test_scale_up_after_warm_up_and_check_interval() -> None:
    pools = hot_run(DKGConfig(workers=4), 130)
    # First check at t=0 (not old yet), next one due when now - 0 > 60: t=61 (old since 60).
    assert all(p == 2 for t, p in pools.items() if t <= 60)
    assert pools[61] == 3
    assert all(p == 3 for t, p in pools.items() if 61 <= t <= 121)
    assert pools[122] == 4


def test_grown_pools_lists_the_keys_above_the_initial_pool() -> None:
    clock = FakeClock()
    g = DKGConfig(workers=4).build(clock=clock)
    for t in range(62):
        clock.set(float(t))
        for _ in range(3):
            g.route(HOT)
        g.route("cold")
        if t == 60:
            assert g.grown_pools() == {}
    # HOT (75 % of the events) is old and its two workers are above loadToScaleUp
    # (30 %) at its check of t=61; "cold" is old too, but its least-loaded candidate is
    # below 30 %, so it keeps its 2 workers.
    assert g.grown_pools() == {HOT: g.pool_size(HOT)} == {HOT: 3}


def test_no_scale_up_outside_old_space() -> None:
    clock = FakeClock()
    g = DKGConfig(workers=4, old_every=1000, check_interval=1.0).build(clock=clock)
    for t in range(200):
        clock.set(float(t))
        g.route(HOT)
    assert g.space_of(HOT) == "teenage"
    assert g.pool_size(HOT) == 2


def crafted(counts: list[int], pool: int, space: int, now: float = 100.0) -> DKGRouter:
    """A router restored at ``now`` with ``counts`` rotated so index 0 is HOT's home."""
    w = len(counts)
    home = bucket(HOT, w, DKG_SEED)
    per_worker = [counts[(i - home) % w] for i in range(w)]
    base = DKGConfig(workers=w).build(clock=FakeClock())
    state: dict[str, Any] = dict(base.snapshot())
    spaces: list[tuple[Any, ...]] = [(), (), ()]
    spaces[space] = ((HOT, 10, now, float("-inf"), pool),)
    state.update(
        counts=tuple(per_worker),
        total=sum(counts),
        started=0.0,
        next_cycle=now + 1,
        next_gc=now + 1,
        spaces=tuple(spaces),
    )
    return DKGConfig(workers=w).build(state=state, clock=FakeClock(now))


def test_scale_up_takes_the_next_ring_worker_when_less_loaded() -> None:
    home = bucket(HOT, 4, DKG_SEED)
    g = crafted([34, 34, 32, 0], pool=2, space=2)  # min candidate 34 > 30, next 32 < 34
    assert g.route(HOT) == (home + 2) % 4
    assert g.pool_size(HOT) == 3


def test_scale_up_refused_when_next_ring_worker_is_not_less_loaded() -> None:
    home = bucket(HOT, 4, DKG_SEED)
    g = crafted([33, 33, 34, 0], pool=2, space=2)  # next 34 >= 33
    assert g.route(HOT) == home  # least loaded candidate, tie to the lowest i
    assert g.pool_size(HOT) == 2


def test_scale_up_needs_load_above_threshold() -> None:
    g = crafted([30, 30, 10, 30], pool=2, space=2)  # 30 is not above 30
    g.route(HOT)
    assert g.pool_size(HOT) == 2


def test_scale_down_when_two_candidates_are_below_threshold() -> None:
    home = bucket(HOT, 4, DKG_SEED)
    g = crafted([10, 10, 5, 75], pool=3, space=1)  # all three below 20
    assert g.route(HOT) == home  # chosen again among the smaller pool
    assert g.pool_size(HOT) == 2


def test_no_scale_down_with_one_candidate_below_threshold() -> None:
    home = bucket(HOT, 4, DKG_SEED)
    g = crafted([30, 10, 30, 30], pool=3, space=1)
    assert g.route(HOT) == (home + 1) % 4
    assert g.pool_size(HOT) == 3


def test_scaling_checks_are_rate_limited_per_key() -> None:
    g = crafted([10, 10, 5, 5, 70], pool=4, space=1)  # W=5: ideal 20, down ~15.5
    clock = g._clock
    assert isinstance(clock, FakeClock)
    g.route(HOT)
    assert g.pool_size(HOT) == 3
    clock.set(160.0)  # exactly 60 s later: not yet due (now - last > interval)
    g.route(HOT)
    assert g.pool_size(HOT) == 3
    clock.set(160.5)
    g.route(HOT)
    assert g.pool_size(HOT) == 2


def test_gc_evicts_keys_unseen_for_an_hour() -> None:
    clock = FakeClock()
    g = DKGConfig(workers=4).build(clock=clock)
    g.route("a")
    clock.set(15.0)
    g.route("b")
    assert g.space_of("a") == "teenage"
    clock.set(3659.0)
    g.route("b")
    assert g.space_of("a") is not None  # the gc run at 3600 s: 3600 - 0 is not > 3600
    clock.set(3660.0)
    g.route("b")
    assert g.space_of("a") is None
    assert g.pool_size("a") == 2


def test_state_stays_bounded_on_many_distinct_keys() -> None:
    cfg = DKGConfig(workers=8, baby_limit=500)
    clock = FakeClock()
    g = cfg.build(clock=clock)
    vocab = KeyVocab(f"u{i}" for i in range(60_000))
    ids = np.arange(60_000, dtype=np.int64)
    for i in range(0, len(ids), 5_000):
        clock.advance(4.0)
        g.route_batch(KeyBatch(ids[i : i + 5_000], vocab))
        baby, teen, old = g.space_sizes()
        assert baby <= 500 + 40 and teen <= 40 and old <= 10
    snap = g.snapshot()
    assert sum(len(s) for s in snap["spaces"]) <= 590
    assert len(pickle.dumps(snap)) < 100_000


def test_hot_keys_survive_in_the_spaces_among_a_long_tail() -> None:
    cfg = DKGConfig(workers=8, baby_limit=200)
    clock = FakeClock()
    g = cfg.build(clock=clock)
    vocab = KeyVocab(f"t{i}" for i in range(50_000))
    rng = np.random.default_rng(3)
    for _ in range(40):
        clock.advance(5.0)
        tail = rng.integers(1, 50_000, 900)
        ids = np.concatenate([np.zeros(100, dtype=np.int64), tail])
        g.route_batch(KeyBatch(rng.permutation(ids), vocab))
    assert g.space_of("t0") == "old"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("initial_pool", 0),
        ("capacity", 5),
        ("warmup", -1.0),
        ("check_interval", float("nan")),
        ("promotion_interval", 0.0),
        ("gc_interval", 0),
        ("old_every", 0),
        ("baby_limit", 10),
    ],
)
def test_bad_parameters_are_config_errors(field: str, value: object) -> None:
    with pytest.raises(ConfigError, match=field):
        DKGConfig(workers=4, **{field: value})  # type: ignore[arg-type]


def test_a_long_quiet_gap_replays_few_cycles_and_keeps_the_old_phase():
    from skewlab.clock import ManualClock
    from skewlab.grouping import make_grouping
    from skewlab.keys import KeyBatch

    cfg = make_grouping("dkg", workers=4)
    clock = ManualClock(0.0)
    g = cfg.build(clock=clock)
    g.route_batch(KeyBatch.from_keys(["a"] * 100))
    clock.set(1e9)  # ~6.7e7 promotion cycles late
    g.route_batch(KeyBatch.from_keys(["a"] * 10))
    snap = g.snapshot()
    assert snap["next_cycle"] > 1e9 and snap["next_cycle"] - 1e9 <= cfg.promotion_interval
    assert snap["next_gc"] > 1e9 and snap["next_gc"] - 1e9 <= cfg.gc_interval
    # unseen for far longer than the 1 h gc ttl: evicted, then re-entered as a baby
    assert g.space_of("a") == "baby"
    assert g.frequency("a") == 10
