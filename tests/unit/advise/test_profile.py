"""Characterisation: the Zipf fit finds the exponent it was given, drift sees a switch."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.advise import stream_of
from skewlab.advise.profile import fit_zipf, hot_set_drift, profile

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("s", [0.0, 0.8, 1.1, 1.5])
def test_zipf_fit_recovers_the_exponent_of_exact_counts(s: float) -> None:
    ranks = np.arange(1, 2001, dtype=np.float64)
    counts = np.round(1e7 * ranks**-s / (ranks**-s).sum())
    fit = fit_zipf(counts[counts > 0])
    assert fit.s == pytest.approx(s, abs=0.02)
    assert fit.good


def test_zipf_fit_of_a_two_level_stream_is_poor() -> None:
    counts = np.array([5000] * 3 + [10] * 2000)
    assert not fit_zipf(counts).good


def test_drift_is_zero_for_a_fixed_hot_set_and_drops_at_a_switch() -> None:
    rng = np.random.default_rng(0)
    first = rng.integers(0, 20, 10_000)
    later = rng.integers(100, 120, 10_000)
    steady = hot_set_drift(np.concatenate([first, first]), None, windows=4, hot=20)
    assert [w.jaccard for w in steady] == [1.0] * 4
    switch = hot_set_drift(np.concatenate([first, later]), None, windows=4, hot=20)
    assert [w.jaccard for w in switch] == [1.0, 1.0, 0.0, 1.0]
    assert switch[2].carried == 0.0


def test_drift_windows_follow_time_when_there_are_timestamps() -> None:
    ids = np.array([0] * 900 + [1] * 300)
    times = np.concatenate([np.linspace(0, 0.9, 900), np.linspace(1.1, 2, 300)])
    w = hot_set_drift(ids, times, windows=2, hot=1)
    assert [x.events for x in w] == [900, 300]


def test_profile_shares_hot_keys_and_offered_load() -> None:
    keys = ["hot"] * 600 + [f"k{i}" for i in range(400)]
    stream = stream_of("t", ((k, None, None) for k in keys))
    p = profile(stream, workers=4, rate=2000.0, rate_from="--rate", service_s=1e-3)
    assert p.top_shares[1] == pytest.approx(0.6)
    assert p.top_shares[2] == pytest.approx(0.601)
    assert p.hot_keys == 1 and p.keys_half == 1
    assert p.offered_load == pytest.approx(0.5)
    assert p.events == 1000 and p.keys == 401
