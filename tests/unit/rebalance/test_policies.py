"""Unit tests of each policy's rule: Eq. 3 / Eq. 4, DLB's stop and picks, LPTF packing."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.rebalance import (
    LoadSnapshot,
    SmalopsConfig,
    SmalopsRebalancer,
    SmalopsSnapshot,
    dlb_pass,
    eq3_target,
    eq4_holds,
    imbalance,
    lpt_pack,
    make_rebalancer,
)

pytestmark = pytest.mark.unit


def snap(loads: dict[str, int], where: dict[str, int], workers: int) -> LoadSnapshot:
    return LoadSnapshot.of(loads, where, workers=workers, now=10.0, interval_s=10.0)


def test_eq3_picks_target_closest_to_average() -> None:
    # R_avg 50; moving 20 onto 25 gives |45-50|=5, onto 10 gives 20
    assert eq3_target(20.0, 100.0, {0: 25.0, 1: 10.0}, 50.0) == 0
    assert eq3_target(20.0, 100.0, {0: 45.0, 1: 28.0}, 50.0) == 1


def test_eq3_no_target_when_every_move_increases_distance() -> None:
    # source 60, targets 50/55: moving 30 makes |30-80|=50 > 10 and |30-85|=55 > 5
    assert eq3_target(30.0, 60.0, {0: 50.0, 1: 55.0}, 57.0) is None


def test_eq4_gating() -> None:
    # an empty target has no queue: gain = t_msg * (1 - R_k/R_p1)
    assert eq4_holds(1.0, 10.0, 100.0, 0.0, t_sm=0.5)
    assert not eq4_holds(1.0, 10.0, 100.0, 0.0, t_sm=0.95)
    # a loaded target (1000 msg/s) waits ~t_msg: the key alone on its source never moves
    assert not eq4_holds(1.0, 100.0, 100.0, 1000.0, t_sm=0.0)
    assert eq4_holds(1.0, 1.0, 10_000.0, 2.0, t_sm=0.0)


def collided(t_sm: float = 0.0, t_sm_per_tuple: float = 0.0) -> SmalopsRebalancer:
    """SMALOPS over 2 partitions whose map already holds heavy keys a and b on partition 0."""
    cfg = SmalopsConfig(
        workers=2, threshold=0.3, t_msg=1e-3, t_sm=t_sm, t_sm_per_tuple=t_sm_per_tuple, seed=3
    )
    state = SmalopsSnapshot(
        policy="smalops",
        workers=2,
        sketch=cfg.sketch.build().snapshot(),
        heavy=(("a", 0), ("b", 0)),
        rng_state=json.dumps(np.random.default_rng(3).bit_generator.state),
        decisions=1,
    )
    return cfg.build(state=state)


COLLIDED = {"a": 500, "b": 500}
"""Both keys heavy (50 % each) and both on partition 0: R = [100, 0] msgs/s, R_avg 50."""


def test_eq4_gate_decisions_change_with_t_sm() -> None:
    # Eq. 3 sends "a" to the empty partition 1. Eq. 4 there: stay = t_msg (2 - 50/100)
    # = 1.5 ms, go = t_SM + t_msg (2 - 1) = t_SM + 1 ms: it holds only for t_SM < 0.5 ms.
    s = snap(COLLIDED, {"a": 0, "b": 0}, 2)
    free = collided(t_sm=0.0).decide(20.0, s)
    costly = collided(t_sm=1e-3).decide(20.0, s)
    assert [(m.key, m.dst, m.kind) for m in free.moves] == [("a", 1, "migrate")]
    assert free.extra["gated_eq4"] == 0
    assert costly.moves == () and costly.extra["gated_eq4"] == 2  # a, then b, both gated
    assert free.assignment_map() != costly.assignment_map()


def test_eq4_t_sm_grows_with_the_state_moved() -> None:
    # t_SM = t_sm_per_tuple * 500 tuples of "a": 0.5 ms blocks the move, 0.4 ms lets it go
    s = snap(COLLIDED, {"a": 0, "b": 0}, 2)
    assert collided(t_sm_per_tuple=1e-6).decide(20.0, s).extra["gated_eq4"] == 2
    assert [m.key for m in collided(t_sm_per_tuple=0.8e-6).decide(20.0, s).moves] == ["a"]


def test_eq4_off_moves_regardless_of_t_sm() -> None:
    s = snap(COLLIDED, {"a": 0, "b": 0}, 2)
    rb = collided(t_sm=1.0)
    rb.config = dataclasses.replace(rb.config, gate=False)
    assert [m.kind for m in rb.decide(20.0, s).moves] == ["migrate"]


def test_smalops_observe_places_keys_as_they_turn_heavy() -> None:
    vocab = KeyVocab(["hot", *(f"c{i}" for i in range(20))])
    rb = make_rebalancer("smalops", 4, threshold=0.2, seed=5).build()
    cold = np.arange(1, 21, dtype=np.int64)
    hot = np.zeros(600, dtype=np.int64)
    # 300 hot of 900 events (33 %): heavy, but the window is below DETECT_AFTER (1000)
    assert rb.observe(0.1, KeyBatch(np.concatenate([np.tile(cold, 30), hot[:300]]), vocab)) is None
    # 300 more: 600 of 1200 counted (50 %) -> placed at once, state = its 600 tuples
    d = rb.observe(0.2, KeyBatch(hot[:300], vocab))
    assert d is not None and set(d.assignment_map()) == {"hot"}
    assert all(m.kind == "place" and m.state_tuples == 600 for m in d.moves)
    assert rb.observe(0.3, KeyBatch(np.zeros(10, dtype=np.int64), vocab)) is None  # already mapped
    # the tick decision uses the fed counter (hot 610 of 1210), not the snapshot's counts
    where = {"hot": rb.assignment["hot"], "c1": 0}
    tick = rb.decide(10.0, snap({"hot": 10, "c1": 1000}, where, 4))
    assert set(tick.assignment_map()) == {"hot"} and tick.extra["heavy_keys"] == 1


def test_smalops_best_fit_moves_smallest_heavy_stream_first() -> None:
    rb = make_rebalancer("smalops", 3, threshold=0.05, gate=False, seed=1).build()
    # first window: place keys; then force all heavy keys onto partition 0 via state
    s = snap({"a": 500, "b": 300, "c": 200}, {"a": 0, "b": 0, "c": 0}, 3)
    rb.decide(10.0, s)
    rb._map = {"a": 0, "b": 0, "c": 0}  # type: ignore[attr-defined]  # the adversarial placement under test
    d = rb.decide(20.0, s)
    mig = {m.key: m.dst for m in d.moves if m.kind == "migrate"}
    # sizes 50/30/20 on p0, avg 33.3: c (smallest) first to p1 (Eq. 3 tie -> lowest),
    # then b to p2 (|30 + 0 - 33.3| beats |30 + 20 - 33.3|); a would widen any distance
    assert mig == {"c": 1, "b": 2}
    assert d.extra["e_lb_after"] < d.extra["e_lb_before"]


def test_smalops_drops_keys_no_longer_heavy() -> None:
    rb = make_rebalancer("smalops", 4, threshold=0.3, seed=0).build()
    rb.decide(10.0, snap({"hot": 900, "x": 100}, {"hot": 1, "x": 2}, 4))
    assert set(rb.assignment) == {"hot"}
    d = rb.decide(20.0, snap({"hot": 10, "x": 990}, {"hot": rb.assignment["hot"], "x": 2}, 4))
    assert "hot" not in rb.assignment and set(rb.assignment) == {"x"}
    assert all(m.kind in ("drop", "place", "migrate") for m in d.moves)


def test_dlb_stops_at_theta() -> None:
    loads = np.array([50, 30, 10, 10, 5, 5], dtype=np.int64)
    where = np.array([0, 0, 0, 1, 1, 1], dtype=np.int64)
    final, reason, n = dlb_pass(loads, where, 2, 40.0, "light")
    after = imbalance(np.bincount(final, weights=loads, minlength=2))
    assert reason == "balanced" and after <= 40.0 and n >= 1
    # one fewer move would still be above theta
    assert imbalance(np.bincount(where, weights=loads, minlength=2)) > 40.0
    _, reason0, n0 = dlb_pass(loads, where, 2, 200.0, "light")
    assert (reason0, n0) == ("below-threshold", 0)


def test_dlb_h_moves_heaviest_improving_key_and_dlb_l_the_lightest() -> None:
    loads = np.array([60, 25, 5, 10], dtype=np.int64)
    where = np.array([0, 0, 0, 1], dtype=np.int64)  # L = [90, 10], gap 80
    fh, _, _ = dlb_pass(loads, where, 2, 0.0, "heavy")
    fl, _, _ = dlb_pass(loads, where, 2, 0.0, "light")
    assert fh[0] == 1  # key of load 60 (< gap 80) is the heaviest improving one
    assert fl[2] == 1  # key of load 5 is the lightest and goes first


def test_dlb_no_move_when_nothing_improves() -> None:
    loads = np.array([100, 1], dtype=np.int64)
    where = np.array([0, 1], dtype=np.int64)
    final, reason, n = dlb_pass(loads, where, 2, 0.0, "heavy")
    assert (reason, n) == ("no-improving-move", 0) and final.tolist() == [0, 1]


def test_lpt_packing() -> None:
    out = lpt_pack(np.array([7, 5, 4, 3, 3, 2]), 2)
    loads = np.bincount(out, weights=[7, 5, 4, 3, 3, 2], minlength=2)
    # LPT: 7->0, 5->1, 4->1, 3->0, 3->1 (9 vs 10? no: 0 has 10 after 3) ...
    assert out[0] == 0 and out[1] == 1 and out[2] == 1
    assert sorted(loads.tolist()) == [12, 12]


def test_lptf_repacks_every_key_above_theta() -> None:
    s = snap({f"k{i}": 10 * (i + 1) for i in range(6)}, {f"k{i}": 0 for i in range(6)}, 3)
    d = make_rebalancer("lptf", 3).build().decide(10.0, s)
    assert d.reason == "repacked" and len(d.assignment) == 6
    assert d.imbalance_after < d.imbalance_before


def test_registry_errors() -> None:
    with pytest.raises(UnknownNameError, match="dlb-h"):
        make_rebalancer("dlb-x", 4)
    with pytest.raises(ConfigError, match="valid"):
        make_rebalancer("dlb-h", 4, pick="light")
    with pytest.raises(ConfigError):
        make_rebalancer("smalops", 4, threshold=0.0001, epsilon=0.001)
    with pytest.raises(ConfigError):
        make_rebalancer("lptf", 0)


def test_decision_row_matches_decisions_table() -> None:
    s = snap({"a": 90, "b": 5, "c": 5}, {"a": 0, "b": 0, "c": 1}, 2)
    row = make_rebalancer("dlb-l", 2).build().decide(12.5, s).to_row()
    assert set(row) == {
        "ts",
        "loop",
        "policy",
        "detail",
        "cost",
        "imbalance_before",
        "imbalance_after",
        "reason",
    }
    assert row["ts"] == 12500 and row["policy"] == "dlb-l" and isinstance(row["detail"], str)
