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


def test_route_sets_apply_versions_by_event_time_and_mark_the_end_of_sets():
    from skewlab.pipeline.route import AssignmentVersion

    cfg = make_grouping("key", workers=4)
    keys, ts = _stream(4000)
    plain = Splitter(cfg).route(keys, ts)
    hot = collections.Counter(keys).most_common(1)[0][0]
    home = int(plain[keys.index(hot)])
    eff = float(ts[2000])
    v1 = AssignmentVersion(1, eff, ((hot, (home + 1) % 4, 1),))
    whole = Splitter(cfg).route_sets(keys, ts, [v1])
    is_hot = np.array([k == hot for k in keys])
    before = np.arange(4000) < 2000
    assert (whole.workers[is_hot & before] == home).all()
    assert (whole.workers[is_hot & ~before] == (home + 1) % 4).all()
    assert (whole.set_ids[is_hot & ~before] == 1).all() and (
        whole.sources[is_hot & ~before] == home
    ).all()
    (m,) = whole.markers
    assert (m.index, m.key, m.worker, m.set_id, m.next_worker) == (
        2000,
        hot,
        home,
        0,
        (home + 1) % 4,
    )
    # A batch boundary in between and the version seen by both batches: same routing, one marker.
    first = Splitter(cfg)
    a = first.route_sets(keys[:1500], ts[:1500], [v1])
    assert a.markers == [] and first.applied == 0
    second = Splitter(cfg, pickle.loads(pickle.dumps(first.state())))
    b = second.route_sets(keys[1500:], ts[1500:], [v1])
    assert np.array_equal(np.concatenate([a.workers, b.workers]), whole.workers)
    assert [x.index + 1500 for x in b.markers] == [2000]
    # Replaying the second batch from the same state with a newer version written
    # meanwhile (effective later than every event of the batch) routes identically.
    late = AssignmentVersion(2, float(ts[-1]) + 5.0, ((hot, home, 2),))
    again = Splitter(cfg, pickle.loads(pickle.dumps(first.state()))).route_sets(
        keys[1500:], ts[1500:], [v1, late]
    )
    assert np.array_equal(again.workers, b.workers) and again.markers == b.markers
