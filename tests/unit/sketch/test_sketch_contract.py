"""One contract suite over every sketch: bounds against exact counts, batches, snapshots."""

from __future__ import annotations

import pickle
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError, StateError, UnknownNameError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.sketch import (
    SKETCHES,
    LossyCountingConfig,
    Sketch,
    SpaceSavingConfig,
    WindowReport,
    sketch_config,
)

pytestmark = pytest.mark.unit

CONFIGS = [
    pytest.param(LossyCountingConfig(epsilon=0.05, threshold=0.2), id="lossy"),
    pytest.param(SpaceSavingConfig(capacity=20, threshold=0.2), id="space-saving"),
]


def _skewed_keys(seed: int, n: int, universe: int = 300) -> list[str]:
    rng = np.random.default_rng(seed)
    ranks = np.minimum(rng.zipf(1.3, size=n) - 1, universe - 1)
    return [f"k{r}" for r in ranks.tolist()]


@pytest.mark.parametrize("config", CONFIGS)
def test_built_object_follows_the_protocol(config):
    sk = config.build()
    assert isinstance(sk, Sketch)
    assert sk.n == 0
    assert len(sk) == 0
    assert sk.heavy_hitters() == {}


@pytest.mark.parametrize("config", CONFIGS)
def test_key_batch_and_string_keys_and_single_updates_agree_for_one_batch(config):
    keys = _skewed_keys(1, 2_000)
    by_batch = config.build()
    by_batch.update_batch(KeyBatch.from_keys(keys))
    by_strings = config.build()
    by_strings.update_batch(keys)
    assert by_batch.snapshot() == by_strings.snapshot()
    assert by_batch.n == by_strings.n == len(keys)


@pytest.mark.parametrize("config", CONFIGS)
def test_weighted_batch_equals_repeated_events(config):
    vocab = KeyVocab(["a", "b", "c"])
    weighted = config.build()
    weighted.update_batch(KeyBatch(np.array([0, 1, 0, 2], dtype=np.int64), vocab), [3, 2, 4, 0])
    repeated = config.build()
    repeated.update_batch(["a"] * 7 + ["b"] * 2)
    assert weighted.n == repeated.n == 9
    for key in "abc":
        assert weighted.estimate(key) == repeated.estimate(key)
    assert weighted.estimate("c") == 0


@pytest.mark.parametrize("config", CONFIGS)
def test_snapshot_is_picklable_and_continues_identically(config):
    keys = _skewed_keys(2, 3_000)
    original = config.build()
    original.update_batch(keys[:1_500])
    snap = pickle.loads(pickle.dumps(original.snapshot()))
    restored = config.build(state=snap)
    for part in (keys[1_500:2_000], keys[2_000:]):
        original.update_batch(part)
        restored.update_batch(part)
    assert restored.snapshot() == original.snapshot()
    assert restored.heavy_hitters(0.05) == original.heavy_hitters(0.05)


@pytest.mark.parametrize("config", CONFIGS)
def test_snapshot_is_immutable(config):
    sk = config.build()
    sk.update("x", 3)
    snap = sk.snapshot()
    with pytest.raises(AttributeError):
        snap.n = 0  # type: ignore[misc]
    sk.update("y", 5)
    assert snap.n == 3


@pytest.mark.parametrize("config", CONFIGS)
def test_foreign_snapshot_is_refused(config):
    other = (
        SpaceSavingConfig(capacity=3) if config.name == "lossy-counting" else LossyCountingConfig()
    )
    with pytest.raises(StateError):
        config.build(state=other.build().snapshot())


@pytest.mark.parametrize("config", CONFIGS)
def test_new_window_reports_heavy_keys_and_starts_empty(config):
    sk = config.build()
    sk.update_batch(["hot"] * 60 + [f"c{i}" for i in range(40)])
    report = sk.new_window()
    assert isinstance(report, WindowReport)
    assert (report.window, report.n) == (0, 100)
    assert list(report.heavy) == ["hot"]
    assert sk.n == 0 and len(sk) == 0 and sk.estimate("hot") == 0
    sk.update_batch(["other"] * 10)
    assert sk.new_window() == WindowReport(1, 10, {"other": 10})


@pytest.mark.parametrize("config", CONFIGS)
def test_absolute_and_share_thresholds(config):
    sk = config.build()
    sk.update_batch(["a"] * 50 + ["b"] * 30 + ["c"] * 10)
    assert list(sk.heavy_hitters(40)) == ["a"]
    assert list(sk.heavy_hitters(0.25)) == ["a", "b"]
    for bad in (0, -1, 0.0, 1.5, True, "10%"):
        with pytest.raises(ConfigError):
            sk.heavy_hitters(bad)


@pytest.mark.parametrize("config", CONFIGS)
def test_bad_updates_are_refused(config):
    sk = config.build()
    with pytest.raises(ConfigError):
        sk.update("a", -1)
    with pytest.raises(ConfigError):
        sk.update_batch(["a", "b"], [1])
    with pytest.raises(ConfigError):
        sk.update_batch(["a"], [-2])
    with pytest.raises(ConfigError):
        sk.update_batch("abc")
    assert sk.n == 0


def test_registry_resolves_names_and_lists_them_on_error():
    assert set(SKETCHES) == {"lossy-counting", "space-saving"}
    assert sketch_config("Lossy_Counting", epsilon=0.01) == LossyCountingConfig(epsilon=0.01)
    assert sketch_config("space-saving", capacity=5) == SpaceSavingConfig(capacity=5)
    with pytest.raises(UnknownNameError, match="lossy-counting, space-saving"):
        sketch_config("count-min")
    with pytest.raises(ConfigError, match="allowed: capacity, threshold"):
        sketch_config("space-saving", epsilon=0.1)


stream = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=400)
cuts = st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=8)


def _batches(items: list[int], sizes: list[int]) -> list[list[str]]:
    out, pos, i = [], 0, 0
    while pos < len(items):
        size = sizes[i % len(sizes)]
        out.append([f"k{x}" for x in items[pos : pos + size]])
        pos += size
        i += 1
    return out


@settings(max_examples=60, deadline=None)
@given(items=stream, sizes=cuts, eps=st.sampled_from([0.02, 0.05, 0.1, 0.25]))
def test_lossy_counting_bounds_hold_against_exact_counts(items, sizes, eps):
    sk = LossyCountingConfig(epsilon=eps, threshold=0.3).build()
    for batch in _batches(items, sizes):
        sk.update_batch(batch)
    exact = Counter(f"k{x}" for x in items)
    n = len(items)
    assert sk.n == n
    for key, true in exact.items():
        est = sk.estimate(key)
        assert true - eps * n <= est <= true
        lo, hi = sk.bounds(key)
        assert lo <= true <= hi
    for s in (0.3, 0.5):
        reported = sk.heavy_hitters(s)
        assert {k for k, c in exact.items() if c >= s * n} <= set(reported)
        assert all(exact[k] >= (s - eps) * n for k in reported)


@settings(max_examples=60, deadline=None)
@given(items=stream, sizes=cuts, k=st.integers(min_value=1, max_value=12))
def test_space_saving_bounds_hold_against_exact_counts(items, sizes, k):
    sk = SpaceSavingConfig(capacity=k).build()
    for batch in _batches(items, sizes):
        sk.update_batch(batch)
    exact = Counter(f"k{x}" for x in items)
    n = len(items)
    assert sk.n == n and len(sk) <= k
    for key, true in exact.items():
        lo, hi = sk.bounds(key)
        assert lo <= true <= hi
        assert hi - true <= n / k
        if true > n / k:
            assert sk.estimate(key) >= true
    assert sum(sk.estimate(key) for key in exact) <= n
    for s in (0.2, 0.5):
        must = {key for key, c in exact.items() if c >= s * n and c > n / k}
        assert must <= set(sk.heavy_hitters(s))
