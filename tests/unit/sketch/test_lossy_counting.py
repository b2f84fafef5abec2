"""Lossy counting: the classic per-event algorithm, windows, memory, config."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.sketch import LossyCountingConfig

pytestmark = pytest.mark.unit


def classic_lossy_counting(stream: list[str], eps: float) -> dict[str, tuple[int, int]]:
    """Manku & Motwani step by step, one event at a time (the test oracle)."""
    w = math.ceil(1 / eps)
    entries: dict[str, list[int]] = {}
    for n, key in enumerate(stream, start=1):
        b = math.ceil(n / w)
        if key in entries:
            entries[key][0] += 1
        else:
            entries[key] = [1, b - 1]
        if n % w == 0:
            entries = {k: v for k, v in entries.items() if v[0] + v[1] > b}
    return {k: (f, d) for k, (f, d) in entries.items()}


def _stream(seed: int, n: int) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"k{r}" for r in np.minimum(rng.zipf(1.2, size=n), 500).tolist()]


@pytest.mark.parametrize("eps", [0.01, 0.1, 0.3])
def test_single_updates_are_the_classic_algorithm(eps):
    stream = _stream(3, 1_500)
    sk = LossyCountingConfig(epsilon=eps, threshold=0.5).build()
    for key in stream:
        sk.update(key)
    expected = classic_lossy_counting(stream, eps)
    assert {k: (f, d) for k, f, d in sk.snapshot().entries} == expected


def test_width_is_ceil_of_inverse_epsilon():
    assert LossyCountingConfig(epsilon=0.001).width == 1000
    assert LossyCountingConfig(epsilon=0.1, threshold=0.5).width == 10
    assert LossyCountingConfig(epsilon=0.3, threshold=0.5).width == 4


def test_memory_stays_bounded_on_many_distinct_keys():
    eps = 0.01
    sk = LossyCountingConfig(epsilon=eps).build()
    vocab = KeyVocab()
    rng = np.random.default_rng(0)
    n = 0
    peak = 0
    for start in range(0, 200_000, 10_000):
        fresh = [f"u{i}" for i in range(start, start + 10_000)]
        ids = vocab.encode(fresh)
        hot = np.full(1_000, vocab.add("hot"), dtype=np.int64)
        batch = KeyBatch(rng.permutation(np.concatenate([ids, hot])), vocab)
        sk.update_batch(batch)
        n += len(batch)
        peak = max(peak, len(sk))
    bound = (1 / eps) * math.log(eps * n)
    assert peak <= bound
    assert "hot" in sk.heavy_hitters(0.05)
    assert sk.estimate("hot") >= 20_000 - eps * n


def test_windows_are_strictly_demarcated():
    sk = LossyCountingConfig(epsilon=0.01, threshold=0.1).build()
    sk.update_batch(["a"] * 30 + [f"x{i}" for i in range(70)])
    first = sk.new_window()
    sk.update_batch(["b"] * 30 + [f"y{i}" for i in range(70)])
    second = sk.new_window()
    assert list(first.heavy) == ["a"] and list(second.heavy) == ["b"]
    assert second.window == first.window + 1 == 1
    assert sk.window == 2


def test_absolute_threshold_from_config():
    sk = LossyCountingConfig(epsilon=0.001, threshold=100).build()
    sk.update_batch(["a"] * 150 + ["b"] * 90 + [f"c{i}" for i in range(2_000)])
    assert list(sk.heavy_hitters()) == ["a"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": 0},
        {"epsilon": 1.0},
        {"epsilon": -0.1},
        {"epsilon": True},
        {"epsilon": 0.2, "threshold": 0.1},
        {"threshold": 0},
        {"threshold": 2.0},
    ],
)
def test_bad_config_is_refused(kwargs):
    with pytest.raises(ConfigError):
        LossyCountingConfig(**kwargs)
