"""The simulator's calibration from the live pipeline and the simulator-vs-live error math."""

from __future__ import annotations

import math

import numpy as np
import pytest

from skewlab.advise import Candidate, SimSettings, StreamWorkload, evaluate, stream_of
from skewlab.advise.calibrate import (
    Calibration,
    batched_workload,
    compare,
    effective_period,
    fit_delay,
    rel_error,
    release_times,
)

pytestmark = pytest.mark.unit


def test_events_are_released_at_their_micro_batchs_end() -> None:
    # 4 events/s, 1 s micro-batches: each batch of 4 reaches the workers together
    assert release_times(10, 4.0, 1.0).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert release_times(3, 10.0, 0.05).tolist() == pytest.approx([0.0, 0.1, 0.2])  # T < gap
    with pytest.raises(ValueError):
        release_times(3, 10.0, 0.0)


def test_a_micro_batch_queues_at_one_worker_as_the_live_route_job_makes_it() -> None:
    # one worker, 100 events/s, 5 ms each (load 0.5), 0.5 s micro-batches: 50 events land
    # together, the last of a batch waits for the 49 before it (sojourn 50 x 5 ms = 250 ms);
    # paced one by one, nobody waits (sojourn = the service time)
    n, rate, service, trigger = 2_000, 100.0, 0.005, 0.5
    stream = stream_of("t", ((f"k{i % 7}", None, None) for i in range(n)))
    settings = SimSettings(workers=1, service_s=service, window_s=2.0, interval_s=4.0)
    even = evaluate(Candidate("key"), StreamWorkload(stream, rate=rate), settings, events=n)
    batched = evaluate(Candidate("key"), batched_workload(stream, rate, trigger), settings)
    assert even.sojourn_p99_ms == pytest.approx(service * 1e3)
    per_batch = rate * trigger
    assert batched.sojourn_p99_ms == pytest.approx(0.99 * per_batch * service * 1e3, abs=5.0)
    # the median event waits for half its batch
    assert batched.p50_ms == pytest.approx(0.5 * per_batch * service * 1e3, abs=5.0)


def test_the_micro_batch_period_is_the_route_jobs_measured_batch_time() -> None:
    # a busy route job: 2,048 events in a 5.9 s batch, 952 in a 5.6 s one (trigger 0.5 s)
    measured = [(2048, 5.884), (952, 5.584)]
    assert effective_period(measured, 0.5) == pytest.approx((2048 * 5.884 + 952 * 5.584) / 3000)
    assert effective_period([], 0.5) == 0.5  # nothing measured: the trigger
    assert effective_period([(100, 0.2), (100, 0.3)], 0.5) == 0.5  # never below the trigger
    assert effective_period([(1, 10.0), (999, 1.0)], 0.5) == pytest.approx(1.009)  # by events


def test_a_stream_shorter_than_one_micro_batch_is_one_burst() -> None:
    n, service = 300, 0.002
    stream = stream_of("t", ((f"k{i}", None, None) for i in range(n)))
    settings = SimSettings(workers=1, service_s=service, window_s=1.0, interval_s=2.0)
    burst = evaluate(Candidate("key"), batched_workload(stream, 100.0, 8.0), settings)
    assert burst.sojourn_p99_ms == pytest.approx(0.99 * n * service * 1e3, abs=2 * service * 1e3)


def test_the_fixed_delay_is_the_live_median_beyond_the_simulated_one() -> None:
    assert fit_delay(620.0, 120.0) == 500.0
    assert fit_delay(100.0, 120.0) == 0.0  # a pipeline is never faster than its workers
    assert fit_delay(math.nan, 120.0) == 0.0
    cal = Calibration(0.5, fit_delay(620.0, 120.0), "key")
    assert cal.p99(300.0) == 800.0


def test_a_known_pipeline_is_recovered_and_predicts_the_other_strategys_p99() -> None:
    # "live" = the batched simulation plus 180 ms: fitted on KEY's median, the delay is
    # found and PKG's p99 (never fitted) comes out right
    rng = np.random.default_rng(5)
    keys = ["hot" if x < 0.35 else f"k{int(x * 200)}" for x in rng.random(3_000)]
    stream = stream_of("t", ((k, None, None) for k in keys))
    settings = SimSettings(workers=2, service_s=0.002, window_s=1.0, interval_s=2.0)
    work = batched_workload(stream, 400.0, 0.5)
    key, pkg = (evaluate(Candidate(g), work, settings) for g in ("key", "pkg"))
    live_key_p50 = key.p50_ms + 2.0 + 180.0
    cal = Calibration(0.5, fit_delay(live_key_p50, key.p50_ms + 2.0), "key")
    assert cal.delay_ms == pytest.approx(180.0)
    assert cal.p99(pkg.sojourn_p99_ms) == pytest.approx(pkg.sojourn_p99_ms + 180.0)
    assert pkg.sojourn_p99_ms < key.sojourn_p99_ms  # the hot key split: less queueing


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
