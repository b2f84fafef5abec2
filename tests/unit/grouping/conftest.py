"""Shared helpers for the grouping tests: a seeded skewed key stream."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.keys import KeyVocab


def skewed_ids(n: int, distinct: int, seed: int, exponent: float = 1.3) -> np.ndarray:
    """``n`` Zipf-distributed ids below ``distinct`` (id 0 hottest), seeded."""
    rng = np.random.default_rng(seed)
    return ((rng.zipf(exponent, n) - 1) % distinct).astype(np.int64)


@pytest.fixture
def stream() -> tuple[KeyVocab, np.ndarray]:
    """A vocabulary of 300 keys and 12,000 skewed events over it."""
    vocab = KeyVocab(f"key-{i}" for i in range(300))
    return vocab, skewed_ids(12_000, 300, seed=7)
