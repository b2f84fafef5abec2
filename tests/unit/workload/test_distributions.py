"""Distribution checks of the synthetic workloads against their defining laws."""

from __future__ import annotations

import itertools
from collections import Counter

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.workload import (
    COUNTRIES,
    CountryHalfWorkload,
    CountryWorkload,
    DynamicWorkload,
    EpsSwitchWorkload,
    ZipfWorkload,
)

pytestmark = pytest.mark.unit


def _counts(w, n, rate=10_000.0, chunk=65_536) -> Counter[str]:
    out: Counter[str] = Counter()
    for c in w.events(n, chunk=chunk, rate=rate):
        ids, cnt = np.unique(c.keys.ids, return_counts=True)
        for i, k in zip(ids.tolist(), cnt.tolist()):
            out[c.vocab.keys[i]] += k
    return out


def _within(observed: int, n: int, p: float, z: float = 5.0) -> bool:
    """Binomial count within ``z`` standard deviations of ``n * p``."""
    sd = max((n * p * (1 - p)) ** 0.5, 1.0)
    return abs(observed - n * p) <= z * sd


def test_zipf_rank_frequency_follows_the_law():
    w = ZipfWorkload(seed=11, s=1.1, v=2.72, keys=2_000)
    n = 300_000
    counts = _counts(w, n)
    p = w.probabilities()
    assert np.isclose(p.sum(), 1.0)
    for rank in (0, 1, 2, 5, 10, 50, 200):
        assert _within(counts[f"k{rank}"], n, p[rank]), rank
    assert set(counts) <= {f"k{r}" for r in range(2_000)}
    # Slope of log-frequency over log(v + rank) on the head is -s.
    ranks = np.arange(30)
    freq = np.array([counts[f"k{r}"] for r in ranks], dtype=float)
    slope = np.polyfit(np.log(ranks + 2.72), np.log(freq), 1)[0]
    assert abs(slope + 1.1) < 0.1


def test_zipf_exponent_below_one_is_flatter():
    steep = _counts(ZipfWorkload(seed=1, s=1.5, keys=1_000), 50_000)
    flat = _counts(ZipfWorkload(seed=1, s=0.2, keys=1_000), 50_000)
    assert steep["k0"] > 5 * flat["k0"]


@pytest.mark.parametrize("kwargs", [{"s": 0}, {"v": 0}, {"keys": 0}, {"s": "1.1"}])
def test_zipf_bad_params(kwargs):
    with pytest.raises(ConfigError):
        ZipfWorkload(**kwargs)


@pytest.mark.parametrize("ratio", [0, 50, 80, 100])
def test_country_skew_gives_ratio_to_the_hot_key(ratio):
    w = CountryWorkload(seed=5, ratio=ratio)
    n = 200_000
    counts = _counts(w, n)
    assert _within(counts["Turkey"], n, w.hot_share())
    assert set(counts) <= set(COUNTRIES)
    if ratio == 100:
        assert set(counts) == {"Turkey"}
    else:
        assert len(counts) == len(COUNTRIES)
        other = (1 - ratio / 100) / len(COUNTRIES)
        assert all(_within(counts[c], n, other) for c in ("Albania", "Zimbabwe", "Peru"))


def test_country_r80_is_about_80_percent():
    counts = _counts(CountryWorkload(seed=9, ratio=80), 100_000)
    assert 0.79 < counts["Turkey"] / 100_000 < 0.82


def test_country_hot_key_can_be_chosen_but_must_be_a_country():
    counts = _counts(CountryWorkload(seed=1, ratio=90, hot="Japan"), 10_000)
    assert counts.most_common(1)[0][0] == "Japan"
    with pytest.raises(ConfigError, match="COUNTRIES"):
        CountryWorkload(hot="Atlantis")
    for bad in (-1, 101, 0.5):
        with pytest.raises(ConfigError):
            CountryWorkload(ratio=bad)


def test_country_list_is_english_names_without_duplicates():
    assert len(COUNTRIES) >= 190
    assert len(set(COUNTRIES)) == len(COUNTRIES)
    assert all(c.isascii() and "," not in c and c.strip() == c for c in COUNTRIES)


def test_country_half_is_skewed_then_uniform():
    w = CountryHalfWorkload(seed=2, ratio=80)
    n = 100_000
    chunks = list(w.events(n, chunk=10_000))
    hot = chunks[0].vocab.id_of("Turkey")
    first = np.concatenate([c.keys.ids for c in chunks[:5]])
    second = np.concatenate([c.keys.ids for c in chunks[5:]])
    share = CountryWorkload(ratio=80).hot_share()
    assert _within(int((first == hot).sum()), n // 2, share)
    assert _within(int((second == hot).sum()), n // 2, 1 / len(COUNTRIES))


def test_country_half_switch_point_can_be_fixed():
    w = CountryHalfWorkload(seed=2, ratio=100, at=1_000)
    keys: list[str] = []
    for c in w.events(3_000, chunk=700):
        keys.extend(c.keys.keys())
    assert set(keys[:1_000]) == {"Turkey"}
    assert len(set(keys[1_000:])) > 100


def test_eps_switch_changes_exponent_by_event_time():
    w = EpsSwitchWorkload(seed=4, keys=1_000)
    rate = 100.0
    ts_edges = [0, 300, 900, 1_200, 1_800]
    n = 1_800 * int(rate)
    chunks = list(w.events(n, chunk=50_000, rate=rate))
    ts = np.concatenate([c.ts for c in chunks])
    top = np.concatenate([c.keys.ids for c in chunks]) == chunks[0].vocab.id_of("k0")
    assert np.array_equal(w.exponent_at(ts) == 1.5, (ts % 900) >= 300)
    weights = {e: (np.arange(1_000) + 1.0) ** -e for e in (0.2, 1.5)}
    for lo, hi in itertools.pairwise(ts_edges):
        phase = (ts >= lo) & (ts < hi)
        eps = 1.5 if ((lo % 900) >= 300) else 0.2
        p0 = weights[eps][0] / weights[eps].sum()
        assert _within(int(top[phase].sum()), int(phase.sum()), p0), (lo, hi)


def test_eps_switch_follows_time_not_event_count():
    w = EpsSwitchWorkload(seed=4, keys=100, low_s=10.0, high_s=10.0)
    slow = next(iter(w.events(1_000, chunk=1_000, rate=10.0)))
    fast = next(iter(w.events(1_000, chunk=1_000, rate=1_000.0)))
    assert np.array_equal(w.exponent_at(fast.ts), np.full(1_000, 0.2))
    assert (w.exponent_at(slow.ts) == 1.5).sum() > 400


@pytest.mark.parametrize("kwargs", [{"low_s": 0}, {"high_s": float("inf")}, {"low": -1.0}])
def test_eps_switch_bad_params(kwargs):
    with pytest.raises(ConfigError):
        EpsSwitchWorkload(**kwargs)


def _period_counts(w: DynamicWorkload, periods: int, per_period: int) -> list[Counter[str]]:
    rate = per_period / w.period
    chunks = list(w.events(periods * per_period, chunk=per_period, rate=rate))
    return [Counter(c.keys.keys()) for c in chunks]


@pytest.mark.parametrize("direction", ["down", "up"])
def test_dynamic_shifts_keys_every_period(direction):
    w = DynamicWorkload(seed=8, keys=200, period=60.0, shift=3, direction=direction)
    per = _period_counts(w, periods=3, per_period=40_000)
    tops = [c.most_common(1)[0][0] for c in per]
    assert len(set(tops)) == 3
    for p, counts in enumerate(per):
        rank = np.arange(200)
        expected = w.key_index(rank, np.full(200, p * 60.0))
        assert set(counts) <= {f"k{c}" for c in expected.tolist()}
        assert tops[p] == f"k{expected[0]}"
    before, after = set(per[0]), set(per[1])
    assert after - before and before - after
    if direction == "down":
        assert per[1][tops[0]] < per[0][tops[0]]
        assert tops[1] not in before
    else:
        assert per[1][tops[0]] == 0
        assert per[1][f"k{w.key_index(np.array([3]), np.zeros(1))[0]}"] > 0


def test_dynamic_without_shift_is_static_zipf():
    w = DynamicWorkload(seed=1, keys=100, shift=0, period=1.0, direction="up")
    z = ZipfWorkload(seed=1, keys=100)
    counts_dyn = _counts(w, 20_000, rate=1_000.0)
    counts_zipf = _counts(z, 20_000)
    assert set(counts_dyn) <= {f"k{r}" for r in range(100)}
    assert abs(counts_dyn["k0"] - counts_zipf["k0"]) < 0.02 * 20_000


@pytest.mark.parametrize(
    "kwargs", [{"period": 0}, {"shift": -1}, {"shift": 10**6}, {"direction": "sideways"}]
)
def test_dynamic_bad_params(kwargs):
    with pytest.raises(ConfigError):
        DynamicWorkload(**kwargs)
