"""Metrics as the seeds define them (DKG STD_DEV / DIST_COST, DLB imbScore, SMALOPS E_LB)."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError
from skewlab.metrics import (
    LatencyHistogram,
    LatencySummary,
    dist_cost,
    e_lb,
    imb_score,
    latency_summary,
    std_dev_pct,
    throughput,
)

pytestmark = pytest.mark.unit

loads_st = st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=30)


class TestStdDevPct:
    def test_even_split_is_zero(self) -> None:
        assert std_dev_pct([250, 250, 250, 250]) == 0.0

    @pytest.mark.parametrize("workers", [2, 5, 10])
    def test_all_on_one_worker(self, workers: int) -> None:
        loads = [0] * workers
        loads[0] = 1234
        # shares: one worker 100 %, W-1 workers 0 % -> std = 100*sqrt(W-1)/W
        assert std_dev_pct(loads) == pytest.approx(100 * math.sqrt(workers - 1) / workers)

    def test_hand_computed(self) -> None:
        # shares 60 % and 40 %: mean 50, deviations +-10 -> population std 10
        assert std_dev_pct([60, 40]) == pytest.approx(10.0)

    @given(loads_st, st.integers(min_value=1, max_value=1000))
    @settings(max_examples=50)
    def test_scale_invariant(self, loads: list[int], factor: int) -> None:
        assert std_dev_pct([x * factor for x in loads]) == pytest.approx(
            std_dev_pct(loads), abs=1e-9
        )

    def test_no_load_is_zero(self) -> None:
        assert std_dev_pct([0, 0, 0]) == 0.0

    @pytest.mark.parametrize("bad", [[], [-1, 2], [float("nan")]])
    def test_bad_input(self, bad: list[float]) -> None:
        with pytest.raises(ConfigError):
            std_dev_pct(bad)


class TestDistCost:
    def test_key_grouping_is_one(self) -> None:
        assert dist_cost([1, 1, 1, 1]) == 1.0

    def test_unseen_keys_ignored(self) -> None:
        # keys with 2, 3 and 1 workers; two never-seen vocabulary entries
        assert dist_cost([2, 0, 3, 1, 0]) == pytest.approx(6 / 3)

    def test_empty(self) -> None:
        assert dist_cost([0, 0]) == 0.0

    def test_negative(self) -> None:
        with pytest.raises(ConfigError):
            dist_cost([-1])


class TestImbScore:
    def test_relative_std(self) -> None:
        loads = np.array([10.0, 20.0, 30.0, 40.0])
        expected = 100 * np.sqrt(((loads - 25) ** 2).mean()) / 25
        assert imb_score(loads) == pytest.approx(expected)

    @given(loads_st)
    @settings(max_examples=50)
    def test_related_to_std_dev_pct(self, loads: list[int]) -> None:
        # imbScore = std/mean, STD_DEV = std of shares = std/total*100 = imbScore / W
        if sum(loads) == 0:
            return
        assert imb_score(loads) == pytest.approx(std_dev_pct(loads) * len(loads), rel=1e-9)

    def test_zero_mean(self) -> None:
        assert imb_score([0, 0]) == 0.0


class TestELB:
    def test_hand_computed(self) -> None:
        # R_avg = 20; |10-20| + |20-20| + |30-20| = 20
        assert e_lb([10, 20, 30]) == pytest.approx(20.0)

    @given(loads_st)
    @settings(max_examples=50)
    def test_zero_iff_equal(self, loads: list[int]) -> None:
        assert (e_lb(loads) == 0) == (len(set(loads)) == 1)


class TestThroughput:
    def test_ratio(self) -> None:
        assert throughput(1000, 4.0) == 250.0
        assert throughput(10, 0.0) == 0.0

    def test_negative(self) -> None:
        with pytest.raises(ConfigError):
            throughput(-1, 1.0)


class TestLatency:
    def test_exact_summary(self) -> None:
        s = latency_summary(np.arange(1, 101, dtype=float))
        assert (s.n, s.p50, s.p90, s.p99, s.max) == (100, 50.0, 90.0, 99.0, 100.0)
        assert s.mean == pytest.approx(50.5)

    def test_empty(self) -> None:
        assert latency_summary([]) == LatencySummary.empty()
        assert LatencyHistogram().summary() == LatencySummary.empty()

    def test_summary_is_frozen_and_picklable(self) -> None:
        s = latency_summary([1.0, 2.0])
        assert pickle.loads(pickle.dumps(s)) == s
        with pytest.raises(AttributeError):
            s.n = 3  # type: ignore[misc]

    def test_histogram_close_to_exact(self) -> None:
        rng = np.random.default_rng(7)
        samples = rng.lognormal(mean=-6, sigma=2, size=50_000)
        hist = LatencyHistogram()
        for part in np.array_split(samples, 7):
            hist.add(part)
        exact = latency_summary(samples)
        approx = hist.summary()
        assert approx.n == exact.n
        assert approx.max == exact.max
        assert approx.mean == pytest.approx(exact.mean)
        width = 10 ** (1 / hist.bins_per_decade) - 1
        for q in ("p50", "p90", "p99"):
            assert getattr(approx, q) == pytest.approx(getattr(exact, q), rel=width)

    def test_zeros_report_zero(self) -> None:
        hist = LatencyHistogram()
        hist.add(np.zeros(90))
        hist.add(np.full(10, 0.5))
        s = hist.summary()
        assert s.p50 == 0.0
        assert s.p99 == pytest.approx(0.5, rel=0.03)
        assert s.max == 0.5

    def test_memory_is_bounded(self) -> None:
        hist = LatencyHistogram()
        size = hist._counts.size
        hist.add(np.random.default_rng(0).exponential(1e-3, 200_000))
        assert hist._counts.size == size

    def test_overflow_and_merge(self) -> None:
        a = LatencyHistogram(lo=1e-3, hi=1.0, bins_per_decade=10)
        b = LatencyHistogram(lo=1e-3, hi=1.0, bins_per_decade=10)
        a.add([0.01, 0.02])
        b.add([5.0])
        a.merge(b)
        assert a.n == 3
        assert a.quantile(1.0) == 5.0
        with pytest.raises(ConfigError):
            a.merge(LatencyHistogram())

    def test_cdf_monotone_ends_at_one(self) -> None:
        hist = LatencyHistogram()
        hist.add(np.random.default_rng(1).exponential(0.01, 5000))
        values, frac = hist.cdf()
        assert np.all(np.diff(values) >= 0)
        assert np.all(np.diff(frac) > 0)
        assert frac[-1] == pytest.approx(1.0)
        assert values[-1] == hist.summary().max

    def test_rejects_negative(self) -> None:
        with pytest.raises(ConfigError):
            LatencyHistogram().add([-1.0])
