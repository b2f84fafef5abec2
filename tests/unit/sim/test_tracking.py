"""Windowed counters: worker loads, merge cost and DIST_COST, against sets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.sim.tracking import WindowTracker

pytestmark = pytest.mark.unit


@given(
    st.sampled_from([1, 3, 64, 65, 130]),
    st.integers(min_value=0, max_value=2**31),
    st.integers(min_value=1, max_value=5),
)
@settings(max_examples=30, deadline=None)
def test_against_sets(workers: int, seed: int, parts: int) -> None:
    rng = np.random.default_rng(seed)
    n, vocab = 400, 37
    ts = np.sort(rng.uniform(0, 50, n))
    ids = rng.integers(0, vocab, n)
    who = rng.integers(0, workers, n)
    tracker = WindowTracker(workers, window_s=7.0)
    for part in np.array_split(np.arange(n), parts):
        tracker.add(ts[part], ids[part], who[part], vocab)
    tracker.finish()
    win = np.floor(ts / 7.0).astype(int)
    assert tracker.partials == len(set(zip(win.tolist(), ids.tolist(), who.tolist())))
    assert tracker.window_keys == len(set(zip(win.tolist(), ids.tolist())))
    per_key = tracker.workers_per_key()
    for i in range(vocab):
        assert per_key[i] == len(set(who[ids == i].tolist()))
    loads = tracker.window_loads()
    assert loads.shape == (win.max() + 1, workers)
    assert loads.sum() == n
    assert loads[win[0]].sum() == np.count_nonzero(win == win[0])


def test_vocabulary_grows() -> None:
    tracker = WindowTracker(2, window_s=1.0)
    tracker.add(np.array([0.0]), np.array([0]), np.array([1]), 1)
    tracker.add(np.array([0.5]), np.array([5000]), np.array([0]), 5001)
    tracker.finish()
    per_key = tracker.workers_per_key()
    assert per_key[0] == 1 and per_key[5000] == 1
    assert int(per_key.sum()) == 2
    assert tracker.window_keys == 2
