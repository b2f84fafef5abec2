"""Space saving: the per-event steps, bounded memory, config."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.sketch import SpaceSavingConfig

pytestmark = pytest.mark.unit


def test_single_updates_follow_the_replace_the_minimum_step():
    sk = SpaceSavingConfig(capacity=2).build()
    for key in ["a", "a", "a", "b", "b", "c"]:
        sk.update(key)
    # c replaced b (the minimum, count 2): count = 2 + 1, error = 2
    assert sk.bounds("c") == (1, 3)
    assert sk.bounds("a") == (3, 3)
    assert sk.bounds("b") == (0, sk.min_count())
    assert sk.estimate("b") == 0
    sk.update("a", 4)
    assert sk.estimate("a") == 7 and sk.n == 10


def test_counts_sum_to_n_per_event_and_at_most_n_per_batch():
    per_event = SpaceSavingConfig(capacity=5).build()
    batched = SpaceSavingConfig(capacity=5).build()
    rng = np.random.default_rng(4)
    for _ in range(10):
        keys = [f"k{r}" for r in rng.zipf(1.5, size=300).tolist()]
        for key in keys:
            per_event.update(key)
        batched.update_batch(keys)
        assert len(per_event.snapshot().entries) == len(batched.snapshot().entries) == 5
        assert sum(c for _, c, _ in per_event.snapshot().entries) == per_event.n
        assert sum(c for _, c, _ in batched.snapshot().entries) <= batched.n == per_event.n


def test_memory_is_capacity_on_many_distinct_keys():
    capacity = 100
    sk = SpaceSavingConfig(capacity=capacity).build()
    vocab = KeyVocab()
    rng = np.random.default_rng(1)
    for start in range(0, 300_000, 30_000):
        ids = vocab.encode([f"u{i}" for i in range(start, start + 30_000)])
        hot = np.full(6_000, vocab.add("hot"), dtype=np.int64)
        sk.update_batch(KeyBatch(rng.permutation(np.concatenate([ids, hot])), vocab))
        assert len(sk) == capacity
    n = sk.n
    lo, hi = sk.bounds("hot")
    assert lo <= 60_000 <= hi and hi - 60_000 <= n / capacity
    assert list(sk.heavy_hitters(0.1)) == ["hot"]


@pytest.mark.parametrize("kwargs", [{"capacity": 0}, {"capacity": 2.5}, {"threshold": -1}])
def test_bad_config_is_refused(kwargs):
    with pytest.raises(ConfigError):
        SpaceSavingConfig(**kwargs)
