"""Each SMALOPS claim, computed at a reduced scale through the experiments' own code.

Scale: the static runs use ``scale=0.05`` (15 s of the paper's 45,635 ev/s,
~680k events, decisions every 5 s): long enough for three decisions and for a
p99 over ~7k tail events, short enough that a run takes well under a second.
The dynamic runs use ``scale=0.2`` (60 s, keys shifting every 12 s, decisions
every 10 s), the smallest at which a shift period outlasts a decision interval
as at scale 1 (a minute vs 10 s). Each test applies the claim's rule to the
value; where the paper's claim does not hold for us, the test pins what we
found instead (the reason the report gives), so a change in behaviour fails it.
"""

from __future__ import annotations

from functools import cache

import pytest

from skewlab.experiments.smalops_runs import (
    GATE_THRESHOLD,
    PAPER_THRESHOLD,
    RunOutcome,
    SmalopsSetup,
    claim_fig9_drop,
    claim_fig9_flat,
    claim_gate,
    claim_p99_change,
    pct,
    run_policy,
)
from skewlab.workload import DynamicWorkload, ZipfWorkload

pytestmark = pytest.mark.unit

SEED = 1
STATIC = SmalopsSetup.of(0.05)
DYNAMIC = SmalopsSetup.of(0.2)


@cache
def static(service_us: int, threshold: float | None, gate: bool = False) -> RunOutcome:
    wl = ZipfWorkload(seed=SEED, keys=STATIC.keys)
    return run_policy(STATIC, wl, service_us * 1e-6, threshold, seed=SEED, gate=gate)


@cache
def dynamic(threshold: float | None) -> RunOutcome:
    wl = DynamicWorkload(seed=SEED, keys=DYNAMIC.keys, period=DYNAMIC.run_s / 5.0)
    return run_policy(DYNAMIC, wl, 20e-6, threshold, seed=SEED)


def change(service_us: int) -> float:
    return pct(static(service_us, PAPER_THRESHOLD).p99, static(service_us, None).p99)


def test_setup_puts_the_hottest_partition_near_saturation_at_50us() -> None:
    # the rate is derived, not given: hottest hashed partition 90 % busy at 50 us
    assert STATIC.rate * 50e-6 * STATIC.hottest_share == pytest.approx(0.9)
    assert static(50, None).p99 > 10 * static(20, None).p99 > 0  # queueing at both


def test_fig8_p99_reduction_at_50us_within_15_points_of_73() -> None:
    claim = claim_p99_change(50, change(50))
    assert claim.holds, claim.row()


def test_fig8_p99_reduction_at_20us_is_real_but_short_of_57() -> None:
    # finding (claim's why): one FIFO server per partition, 36 % busy at 20 us
    claim = claim_p99_change(20, change(20))
    assert -42.0 < claim.value < -15.0
    assert not claim.holds


def test_best_fit_migration_runs_when_several_keys_are_heavy() -> None:
    r = static(50, GATE_THRESHOLD)
    assert r.moves("migrate") >= 1
    assert r.extra_max("heavy_keys") >= 10  # 16 keys carry >= 2 % each
    # at 10 % the two heavy keys are placed on distinct partitions: nothing to migrate
    assert static(50, PAPER_THRESHOLD).moves("migrate") == 0


def test_eq4_gate_with_state_sized_t_sm_holds_back_best_fit() -> None:
    off, on = static(50, GATE_THRESHOLD), static(50, GATE_THRESHOLD, gate=True)
    row = {"migrate_moves": off.moves("migrate"), "p99_s": off.p99}
    gated = {"migrate_moves": on.moves("migrate"), "p99_s": on.p99, "gated_eq4": 0.0}
    gated["gated_eq4"] = on.extra_sum("gated_eq4")
    claim = claim_gate(row, gated)
    assert claim.holds, claim.row()
    assert gated["gated_eq4"] >= 1


def test_fig9_no_sharp_drop_at_10_percent() -> None:
    # finding: lower thresholds balance more heavy keys; 10 % is no better than 5 %
    p99 = {t: static(50, t).p99 for t in (0.02, 0.05, PAPER_THRESHOLD)}
    claim = claim_fig9_drop(p99)
    assert not claim.holds
    assert p99[0.02] <= p99[PAPER_THRESHOLD]


def test_fig9_not_flat_above_10_percent_with_30_keys() -> None:
    # finding: at 20 % no key is heavy, SMALOPS is hashing; at 15 % the top key still is
    p99 = {t: static(50, t).p99 for t in (PAPER_THRESHOLD, 0.15, 0.2)}
    claim = claim_fig9_flat(p99)
    assert not claim.holds
    assert p99[0.2] == pytest.approx(static(50, None).p99)
    assert abs(pct(p99[0.15], p99[PAPER_THRESHOLD])) < 20.0


def test_fig10_dynamic_load_at_10_percent_is_near_hashing_and_2_percent_improves() -> None:
    # finding (claim's why): at 10 % SMALOPS stays within a few % of hashing's p99 under
    # dynamic load; with more heavy keys (2 %) it is clearly below
    hash_p99 = dynamic(None).p99
    assert abs(pct(dynamic(PAPER_THRESHOLD).p99, hash_p99)) < 15.0
    assert pct(dynamic(GATE_THRESHOLD).p99, hash_p99) < -10.0
