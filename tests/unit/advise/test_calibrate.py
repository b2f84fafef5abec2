"""The simulator's calibration from the live pipeline and the simulator-vs-live error math."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skewlab.advise import Candidate, SimSettings, stream_of
from skewlab.advise.calibrate import (
    MAX_GROUPS,
    Calibration,
    bin_counts,
    bin_values,
    chunk_arrivals,
    compare,
    effective_period,
    fit_delay,
    modelled_latency,
    rel_error,
    release_schedule,
)
from skewlab.metrics import LatencyHistogram

pytestmark = pytest.mark.unit


def test_the_producer_sends_its_chunks_at_once_each_stamped_with_its_send_time() -> None:
    # 4 events/s in chunks of 3: a chunk every 0.75 s, its events all stamped alike
    assert chunk_arrivals(7, 4.0, 3).tolist() == [0, 0, 0, 0.75, 0.75, 0.75, 1.5]
    assert chunk_arrivals(3, 10.0, 1).tolist() == pytest.approx([0.0, 0.1, 0.2])
    with pytest.raises(ValueError):
        chunk_arrivals(3, 10.0, 0)


def test_a_micro_batch_starts_when_its_events_are_in_and_the_one_before_has_ended() -> None:
    arrivals = np.array([0, 0, 0, 2, 2], dtype=np.float64)
    # a quick route job: each batch starts when its chunk is in
    assert release_schedule(arrivals, [(3, 1.0), (2, 0.5)]).tolist() == [1, 1, 1, 2.5, 2.5]
    # a busy one: the second chunk waits for the first batch to end (at 3 s)
    assert release_schedule(arrivals, [(3, 3.0), (2, 0.5)]).tolist() == [3, 3, 3, 3.5, 3.5]
    # batches that do not hold exactly the stream's events: no schedule
    assert release_schedule(arrivals, [(3, 1.0)]) is None
    assert release_schedule(arrivals, []) is None


def test_the_wait_histogram_is_read_back_per_bin() -> None:
    h = LatencyHistogram()
    samples = [0.0, 0.0, 1e-4, 0.0123, 0.0124, 0.5, 0.5, 2.0, 7.77]
    h.add(samples)
    counts = bin_counts(h.cdf(), len(samples))
    assert counts.tolist() == h._counts.tolist()
    v = bin_values()[counts > 0]
    assert v[0] == 0.0 and v[-1] == pytest.approx(7.77, rel=0.024)


def test_latency_is_the_release_delay_plus_the_wait_behind_the_same_batch() -> None:
    # one worker, 10 ms per event; chunks of 10 sent at 0 s and 1 s; the first micro-batch
    # takes 0.5 s (released at 0.5 s: latencies 0.51 .. 0.60 s), the second 0.2 s
    # (1.21 .. 1.30 s, i.e. 0.21 .. 0.30 s after their send time)
    stream = stream_of("t", ((f"k{i}", None, None) for i in range(20)))
    settings = SimSettings(workers=1, service_s=0.01, window_s=0.5, interval_s=1.0)
    arrivals = chunk_arrivals(20, 10.0, 10)
    lat = modelled_latency(Candidate("key"), stream, arrivals, [(10, 0.5), (10, 0.2)],
                           settings, span_s=2.0)  # fmt: skip
    assert lat.batches_matched
    assert lat.p99_ms == pytest.approx(600.0, rel=0.024)
    assert lat.p50_ms == pytest.approx(300.0, rel=0.024)
    # the first batch runs 1.5 s: the second starts late, at 1.5 s (0.71 .. 0.80 s)
    slow = modelled_latency(Candidate("key"), stream, arrivals, [(10, 1.5), (10, 0.2)],
                            settings, span_s=2.0)  # fmt: skip
    assert slow.p99_ms == pytest.approx(1_600.0, rel=0.024)
    assert slow.p50_ms == pytest.approx(800.0, rel=0.024)
    # no batches measured: sent, released at once, and queued behind their chunk only
    bare = modelled_latency(Candidate("key"), stream, arrivals, [], settings, span_s=2.0)
    assert not bare.batches_matched
    assert bare.p99_ms == pytest.approx(100.0, rel=0.024)


def test_the_micro_batch_period_is_the_route_jobs_measured_batch_time() -> None:
    # a busy route job: 2,048 events in a 5.9 s batch, 952 in a 5.6 s one (trigger 0.5 s)
    measured = [(2048, 5.884), (952, 5.584)]
    assert effective_period(measured, 0.5) == pytest.approx((2048 * 5.884 + 952 * 5.584) / 3000)
    assert effective_period([], 0.5) == 0.5  # nothing measured: the trigger
    assert effective_period([(100, 0.2), (100, 0.3)], 0.5) == 0.5  # never below the trigger
    assert effective_period([(1, 10.0), (999, 1.0)], 0.5) == pytest.approx(1.009)  # by events


def test_the_fixed_delay_is_the_live_median_beyond_the_simulated_one() -> None:
    assert fit_delay(620.0, 120.0) == 500.0
    assert fit_delay(100.0, 120.0) == 0.0  # a pipeline is never faster than its workers
    assert fit_delay(math.nan, 120.0) == 0.0
    cal = Calibration(0.5, fit_delay(620.0, 120.0), "key")
    assert cal.p99(300.0) == 800.0


def test_a_known_pipeline_is_recovered_and_predicts_the_other_strategys_p99() -> None:
    # "live" = the modelled latency plus 180 ms: fitted on KEY's median, the delay is
    # found and PKG's p99 (never fitted) comes out right; PKG splits the hot key
    rng = np.random.default_rng(5)
    keys = ["hot" if x < 0.35 else f"k{int(x * 200)}" for x in rng.random(3_000)]
    stream = stream_of("t", ((k, None, None) for k in keys))
    settings = SimSettings(workers=2, service_s=0.002, window_s=1.0, interval_s=2.0)
    arrivals = chunk_arrivals(3_000, 400.0, 1_000)
    batches = [(1_000, 0.8), (1_000, 0.6), (1_000, 0.7)]
    key, pkg = (modelled_latency(Candidate(g), stream, arrivals, batches, settings, 7.5)
                for g in ("key", "pkg"))  # fmt: skip
    cal = Calibration(0.7, fit_delay(key.p50_ms + 180.0, key.p50_ms), "key")
    assert cal.delay_ms == pytest.approx(180.0)
    assert cal.p99(pkg.p99_ms) == pytest.approx(pkg.p99_ms + 180.0)
    assert pkg.p99_ms < key.p99_ms


def test_relative_error_is_against_the_live_figure() -> None:
    assert rel_error(100.0, 150.0) == pytest.approx(1 / 3)  # not 1/2: live is the truth
    assert rel_error(150.0, 100.0) == pytest.approx(0.5)
    assert rel_error(0.0, 0.0) == 0.0 and math.isinf(rel_error(1.0, 0.0))
    c = compare("p99_ms", 120.0, 100.0)
    assert (c.ratio, c.rel_error) == (pytest.approx(1.2), pytest.approx(0.2))


@pytest.mark.parametrize(
    ("metric", "sim", "live", "within"),
    [
        ("p99_ms", 100.0, 131.0, True),  # 23.7 % <= 30 %
        ("p99_ms", 100.0, 150.0, False),  # 33 %
        ("p99_ms", 131.0, 100.0, False),  # 31 %
        ("imbalance", 30.0, 34.0, True),  # 11.8 %
        ("imbalance", 30.0, 40.0, False),  # 25 %, 10 points
        ("imbalance", 0.3, 0.5, True),  # 40 % of nothing: 0.2 points
        ("dist_cost", 1.2, 1.0, False),  # 20 %, 0.2 apart
        ("dist_cost", 1.04, 1.0, True),
        ("dist_cost", 2.0, 1.75, True),  # 14.3 %
        ("keys_moved_min", 90.0, 10.0, True),  # reported, no target
    ],
)
def test_within_target(metric: str, sim: float, live: float, within: bool) -> None:
    assert compare(metric, sim, live).within is within


def test_an_unknown_metric_has_no_target() -> None:
    with pytest.raises(KeyError, match="p95_ms"):
        compare("p95_ms", 1.0, 1.0)


def test_a_paced_stream_in_micro_batches_is_modelled_in_at_most_max_groups() -> None:
    # 1,000 events paced at 100/s (chunks of 1), batches of 100 that take 0.5 s each: every
    # event has its own release delay (1.49 s for a batch's first, 0.5 s for its last);
    # cut into MAX_GROUPS groups at their mean delay, the quantiles stay close
    stream = stream_of("t", ((f"k{i}", None, None) for i in range(1_000)))
    settings = SimSettings(workers=1, service_s=1e-4, window_s=1.0, interval_s=1.0)
    arrivals = chunk_arrivals(1_000, 100.0, 1)
    lat = modelled_latency(Candidate("key"), stream, arrivals, [(100, 0.5)] * 10, settings, 10.0)
    assert MAX_GROUPS < 1_000
    assert lat.p99_ms == pytest.approx(1_480.0, rel=0.05)
    assert lat.p50_ms == pytest.approx(1_000.0, rel=0.05)
