import collections
import pickle
import time

import numpy as np
import pytest

from skewlab.grouping import make_grouping
from skewlab.pipeline.route import Splitter, key_loads

pytestmark = pytest.mark.unit


def _stream(n, seed=0, t0=1.7e9, rate=2000.0):
    rng = np.random.default_rng(seed)
    keys = [f"k{int(x)}" for x in np.minimum(rng.zipf(1.3, n), 500)]
    ts = t0 + np.arange(n) / rate
    return keys, ts


@pytest.mark.parametrize("name", ["shuffle", "key", "pkg", "dkg", "d-choices"])
def test_restored_splitter_decides_like_the_uninterrupted_one(name):
    cfg = make_grouping(name, workers=5)
    keys, ts = _stream(120_000)  # 60 s of event time: DKG promotions and checks happen
    whole = Splitter(cfg).route(keys, ts)
    first = Splitter(cfg)
    a = first.route(keys[:50_000], ts[:50_000])
    state = pickle.loads(pickle.dumps(first.state()))
    b = Splitter(cfg, state).route(keys[50_000:], ts[50_000:])
    assert np.array_equal(np.concatenate([a, b]), whole)
    assert (whole >= 0).all() and (whole < 5).all()


def test_a_new_splitter_starts_its_clock_at_its_first_event():
    # a clock starting at 0 would have to catch up 1.7e9 s of DKG cycles
    cfg = make_grouping("dkg", workers=4)
    keys, ts = _stream(1000)
    sp = Splitter(cfg)
    t = time.perf_counter()
    sp.route(keys, ts)
    assert time.perf_counter() - t < 5.0
    assert sp.clock.now() == pytest.approx(ts[-1], abs=0.2)
    assert Splitter(cfg).state() is None


def test_assignments_override_the_grouping_for_the_keys_they_name():
    cfg = make_grouping("key", workers=4)
    keys, ts = _stream(5000)
    plain = Splitter(cfg).route(keys, ts)
    hot = collections.Counter(keys).most_common(1)[0][0]
    target = (int(plain[keys.index(hot)]) + 1) % 4
    moved = Splitter(cfg).route(keys, ts, assignments={hot: target})
    is_hot = np.array([k == hot for k in keys])
    assert (moved[is_hot] == target).all()
    assert np.array_equal(moved[~is_hot], plain[~is_hot])


def test_key_loads_aggregate_per_window_key_worker():
    ts = np.array([0.1, 0.2, 5.5, 5.6, 5.7])
    rows = key_loads(
        5.0,
        ts,
        ["a", "a", "a", "b", "a"],
        np.array([0, 1, 0, 2, 0]),
        np.array([10, 20, 30, 40, 50]),
    )
    got = {(r["window_start"], r["key"], r["worker"]): (r["count"], r["bytes"]) for r in rows}
    assert got == {
        (0.0, "a", 0): (1, 10),
        (0.0, "a", 1): (1, 20),
        (5.0, "a", 0): (2, 80),
        (5.0, "b", 2): (1, 40),
    }
