import collections

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.pipeline.worker import LatencyWindows, WindowedAggregate, window_start

pytestmark = pytest.mark.unit


def _records(n, rng, partitions=3):
    keys = [f"k{int(x)}" for x in rng.zipf(1.5, n) % 20]
    ts = np.sort(rng.uniform(0, 100, n))
    values = rng.integers(1, 50, n)
    parts = rng.integers(0, partitions, n)
    offsets = np.zeros(n, dtype=np.int64)
    nxt = collections.Counter()
    for i, p in enumerate(parts):
        offsets[i] = nxt[p]
        nxt[p] += 1
    return keys, ts, values, parts, offsets


def _expected(keys, ts, values, window):
    out = collections.defaultdict(lambda: [0, 0])
    for k, t, v in zip(keys, ts, values):
        slot = out[(window_start(t, window), k)]
        slot[0] += 1
        slot[1] += int(v)
    return {s: tuple(v) for s, v in out.items()}


def _merge(partials):
    out = collections.defaultdict(lambda: [0, 0])
    for p in partials:
        out[(p.window_start, p.key)][0] += p.count
        out[(p.window_start, p.key)][1] += p.sum
    return {s: tuple(v) for s, v in out.items()}


def test_counts_and_sums_per_window_and_key():
    rng = np.random.default_rng(1)
    recs = _records(5000, rng)
    agg = WindowedAggregate(window_s=15)
    assert agg.process(*recs).all()
    assert _merge(agg.drain()) == _expected(recs[0], recs[1], recs[2], 15)
    assert agg.drain() == []


def test_replayed_records_are_dropped_and_restart_from_watermarks_is_exact():
    rng = np.random.default_rng(2)
    keys, ts, values, parts, offsets = _records(3000, rng)
    agg = WindowedAggregate(window_s=10)
    agg.process(keys[:2000], ts[:2000], values[:2000], parts[:2000], offsets[:2000])
    first = agg.drain()
    saved = agg.watermarks
    # crash: the rest was processed but never committed; the upstream replays 1500.. again
    agg.process(keys[2000:], ts[2000:], values[2000:], parts[2000:], offsets[2000:])
    restarted = WindowedAggregate(window_s=10, watermarks=saved)
    taken = restarted.process(keys[1500:], ts[1500:], values[1500:], parts[1500:], offsets[1500:])
    assert not taken[:500].any() and taken[500:].all()
    assert restarted.dropped == 500
    merged = _merge(first + restarted.drain())
    assert merged == _expected(keys, ts, values, 10)


def test_window_must_be_positive():
    with pytest.raises(ConfigError):
        WindowedAggregate(window_s=0)


def test_latency_windows_exact_when_under_cap_and_bounded_above():
    lat = LatencyWindows(window_s=15, cap=1000, rng=np.random.default_rng(0))
    xs = np.arange(1, 501) / 100.0
    for x in xs:
        lat.add(0.0, float(x))
    ((row),) = lat.drain()
    w, p50, p90, p99, mx, n = row.window_start, row.p50, row.p90, row.p99, row.max, row.n
    assert p50 <= p90 <= p99 <= mx
    assert sorted(row.sample.tolist()) == xs.tolist()
    assert (w, n, mx) == (0.0, 500, 5.0)
    assert p50 == pytest.approx(np.percentile(xs, 50))
    assert p99 == pytest.approx(np.percentile(xs, 99))
    big = LatencyWindows(window_s=15, cap=200, rng=np.random.default_rng(0))
    ys = np.random.default_rng(3).exponential(1.0, 20000)
    for y in ys:
        big.add(15.0, float(y))
    assert len(big._samples[15.0]) == 200
    ((row),) = big.drain()
    p50, mx, n = row.p50, row.max, row.n
    assert len(row.sample) == 200
    assert n == 20000 and mx == ys.max()
    assert p50 == pytest.approx(np.median(ys), rel=0.2)


def _reservoir_reference(batches, window_s, cap, seed):
    """Algorithm R sample by sample, from its definition: the i-th sample (1-based) of a
    window fills slot i - 1 while i <= cap, then replaces slot j = integers(0, i) if
    j < cap; one draw per sample beyond its window's cap, in arrival order."""
    rng = np.random.default_rng(seed)
    samples, counts, top = {}, {}, {}
    for ts, lat in batches:
        for t, x in zip(ts.tolist(), lat.tolist()):
            w = window_start(t, window_s)
            i = counts[w] = counts.get(w, 0) + 1
            top[w] = max(top.get(w, float("-inf")), x)
            s = samples.setdefault(w, [])
            if i <= cap:
                s.append(x)
            else:
                j = int(rng.integers(0, i))
                if j < cap:
                    s[j] = x
    return samples, counts, top


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_latency_windows_by_batch_are_algorithm_r_sample_by_sample(seed):
    """Batches of interleaved windows (sizes 0..400, cap 64): every window's reservoir,
    count, max and percentiles are those of Algorithm R taken one sample at a time."""
    gen = np.random.default_rng(100 + seed)
    batches = []
    t0 = 0.0
    for _ in range(40):
        k = int(gen.integers(0, 400))
        ts = t0 + gen.uniform(-20.0, 40.0, k)  # late and early records: several windows
        batches.append((ts, gen.exponential(1.0, k)))
        t0 += 2.0
    lat = LatencyWindows(window_s=15, cap=64, rng=np.random.default_rng(seed))
    for ts, x in batches:
        lat.add_many(np.floor(ts / 15.0) * 15.0, x)
    rows = lat.drain()
    samples, counts, top = _reservoir_reference(batches, 15.0, 64, seed)
    assert [r.window_start for r in rows] == sorted(samples)
    assert any(c > 64 for c in counts.values()) and any(c <= 64 for c in counts.values())
    for r in rows:
        ref = np.asarray(samples[r.window_start])
        assert r.sample.tolist() == ref.tolist()
        assert (r.n, r.max) == (counts[r.window_start], top[r.window_start])
        assert (r.p50, r.p90, r.p99) == tuple(float(v) for v in np.percentile(ref, [50, 90, 99]))
    assert lat.drain() == []


@pytest.mark.parametrize("span", [100.0, 9.5])
def test_process_takes_a_record_iff_above_its_partitions_watermark_so_far(span):
    """Replays, reordering and restarts: the batch mask, the watermarks and the partials
    are those of the rule applied one record at a time (many windows, or one)."""
    gen = np.random.default_rng(7)
    n = 4000
    keys = [f"k{int(x)}" for x in gen.zipf(1.5, n) % 30]
    ts = gen.uniform(0, span, n)
    values = gen.integers(1, 50, n)
    parts = gen.integers(0, 3, n)
    offsets = gen.integers(0, 600, n)  # out of order and repeated: many dropped
    start = {0: 50, 2: -1}
    agg = WindowedAggregate(window_s=10, watermarks=start)
    wm = dict(start)
    want_mask = []
    want = collections.defaultdict(lambda: [0, 0])
    for k, t, v, p, o in zip(keys, ts, values, parts.tolist(), offsets.tolist()):
        ok = o > wm.get(p, -1)
        want_mask.append(ok)
        if ok:
            wm[p] = o
            want[(window_start(t, 10), k)][0] += 1
            want[(window_start(t, 10), k)][1] += int(v)
    got = []
    for a, b in [(0, 1), (1, 700), (700, 700), (700, 2500), (2500, n)]:
        sl = slice(a, b)
        got += agg.process(keys[sl], ts[sl], values[sl], parts[sl], offsets[sl]).tolist()
    assert got == want_mask and 0 < sum(got) < n
    assert agg.watermarks == wm
    assert (agg.accepted, agg.dropped) == (sum(got), n - sum(got))
    assert _merge(agg.drain()) == {s: tuple(v) for s, v in want.items()}
