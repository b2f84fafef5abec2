"""Each SMALOPS claim, computed at a reduced scale through the experiments' own code.

Scale: the static runs use ``scale=0.05`` (15 s at ~41,700 ev/s, ~630k events,
decisions every 5 s): long enough for three decisions and for a
p99 over ~7k tail events, short enough that a run takes well under a second.
The dynamic runs use ``scale=0.2`` (60 s, keys shifting every 12 s, decisions
every 10 s), the smallest at which a shift period outlasts a decision interval
as at scale 1 (a minute vs 10 s). Each test applies the claim's rule to the
value; where the paper's claim does not hold for us, the test pins what we
found instead (the reason the report gives), so a change in behaviour fails it.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest

from skewlab.experiments.smalops_runs import (
    GATE_THRESHOLD,
    PAPER_THRESHOLD,
    PLACEMENTS,
    READING,
    RenamedWorkload,
    RunOutcome,
    SmalopsSetup,
    claim_fig9_drop,
    claim_fig9_flat,
    claim_gate,
    claim_keys_tracked,
    claim_p99_change,
    pct,
    run_policy,
    spread,
)
from skewlab.hashing import kafka_partition
from skewlab.workload import DynamicWorkload, ZipfWorkload

pytestmark = pytest.mark.unit

SEED = 1
STATIC = SmalopsSetup.of(0.05)
DYNAMIC = SmalopsSetup.of(0.2)


@cache
def static(
    service_us: int, threshold: float | None, gate: bool = False, reading: str = READING
) -> RunOutcome:
    wl = ZipfWorkload(seed=SEED, keys=STATIC.keys)
    return run_policy(
        STATIC, wl, service_us * 1e-6, threshold, seed=SEED, gate=gate, reading=reading
    )


@cache
def dynamic(threshold: float | None, reading: str = READING) -> RunOutcome:
    wl = DynamicWorkload(seed=SEED, keys=DYNAMIC.keys, period=DYNAMIC.run_s / 5.0)
    return run_policy(DYNAMIC, wl, 20e-6, threshold, seed=SEED, reading=reading)


def change(service_us: int) -> float:
    return pct(static(service_us, PAPER_THRESHOLD).p99, static(service_us, None).p99)


def test_hashing_is_kafkas_partitioner_and_loads_the_hottest_partition_to_90_percent() -> None:
    shares = STATIC.top_shares()
    parts = np.bincount(
        [kafka_partition(f"k{i}", STATIC.partitions) for i in range(STATIC.keys)],
        weights=shares,
        minlength=STATIC.partitions,
    )
    assert STATIC.hottest_share == pytest.approx(parts.max())
    assert STATIC.rate * 50e-6 * STATIC.hottest_share == pytest.approx(0.9)
    assert static(50, None).p99 > 10 * static(20, None).p99 > 0  # queueing at both


def test_fig8_p99_reduction_at_50us_within_15_points_of_73() -> None:
    claim = claim_p99_change(50, change(50))
    assert -88.0 < claim.value < -58.0
    assert claim.holds, claim.row()


def test_fig8_p99_reduction_at_20us_is_real_but_short_of_57() -> None:
    # finding (claim's why): one FIFO server per partition, ~40 % busy at 20 us
    claim = claim_p99_change(20, change(20))
    assert -42.0 < claim.value < -10.0
    assert not claim.holds


def test_best_fit_migrates_when_several_keys_are_heavy_and_not_at_10_percent() -> None:
    r = static(50, GATE_THRESHOLD, reading="share")
    assert r.moves("migrate") >= 1
    assert r.extra_max("heavy_keys") >= 10  # per key, 16 keys carry >= 2 % each
    # at 10 % the hottest key alone is heavy: best fit has nothing to move
    assert static(50, PAPER_THRESHOLD).moves("migrate") == 0
    assert static(50, PAPER_THRESHOLD).heavy_mean() == pytest.approx(1.0)


def test_eq4_gate_with_state_sized_t_sm_holds_back_best_fit() -> None:
    off = static(50, GATE_THRESHOLD, reading="share")
    on = static(50, GATE_THRESHOLD, gate=True, reading="share")
    row = {"migrate_moves": off.moves("migrate"), "p99_s": off.p99}
    gated = {"migrate_moves": on.moves("migrate"), "p99_s": on.p99, "gated_eq4": 0.0}
    gated["gated_eq4"] = on.extra_sum("gated_eq4")
    claim = claim_gate(row, gated)
    assert claim.holds, claim.row()
    assert gated["gated_eq4"] >= 1


def test_fig9_heaviest_keys_reading_changes_nothing_up_to_the_top_keys_share() -> None:
    # finding: the hottest key carries 15.4 %; every t up to it makes the same key heavy
    p99 = {t: static(50, t).p99 for t in (0.02, 0.05, PAPER_THRESHOLD)}
    claim = claim_fig9_drop(p99)
    assert p99[0.05] == p99[PAPER_THRESHOLD] and claim.value == 0.0
    assert not claim.holds


def test_fig9_keys_tracked_rise_with_the_threshold_only_in_the_heaviest_keys_reading() -> None:
    ts = (0.02, PAPER_THRESHOLD, 0.2, 0.5)
    cumulative = claim_keys_tracked({t: static(50, t).heavy_mean() for t in ts})
    per_key = claim_keys_tracked(
        {t: static(50, t, reading="share").heavy_mean() for t in ts}, reading="share"
    )
    assert cumulative.value[0.02] < cumulative.value[0.5]
    assert per_key.value[0.02] > per_key.value[0.5]
    assert cumulative.holds and not per_key.holds


def test_fig9_above_10_percent_under_the_heaviest_keys_reading() -> None:
    p99 = {t: static(50, t).p99 for t in (PAPER_THRESHOLD, 0.15, 0.2)}
    claim = claim_fig9_flat(p99)
    assert abs(pct(p99[0.15], p99[PAPER_THRESHOLD])) < 20.0  # still the top key alone
    assert static(50, 0.2).heavy_mean() == pytest.approx(2.0)
    assert claim.value >= abs(pct(p99[0.15], p99[PAPER_THRESHOLD]))


def test_fig10_dynamic_load_at_10_percent_is_near_hashing_and_2_percent_per_key_improves() -> None:
    hash_p99 = dynamic(None).p99
    assert abs(pct(dynamic(PAPER_THRESHOLD).p99, hash_p99)) < 20.0
    assert pct(dynamic(GATE_THRESHOLD, reading="share").p99, hash_p99) < -10.0


def test_renamed_keys_are_the_same_stream_placed_elsewhere() -> None:
    wl = ZipfWorkload(seed=SEED, keys=30)
    own = next(iter(wl.events(2000, chunk=2000)))
    renamed = next(iter(RenamedWorkload(wl, "a/").events(2000, chunk=2000)))
    assert renamed.keys.ids.tolist() == own.keys.ids.tolist()
    assert renamed.vocab.keys == ["a/" + k for k in own.vocab.keys]
    shares = {p: SmalopsSetup.of(0.05, prefix=p).hottest_share for p in PLACEMENTS}
    assert len(set(shares.values())) > 1  # other names, other keys put together


def test_spread_reports_the_own_value_median_and_range() -> None:
    values = {"": 5.0, "a/": -1.0, "b/": 2.0}
    got = spread(lambda p: {"x": values[p]}, prefixes=("", "a/", "b/"))["x"]
    assert (got.own, got.median, got.low, got.high, got.n) == (5.0, 2.0, -1.0, 5.0, 3)
