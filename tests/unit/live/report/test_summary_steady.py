"""The live summary's honest figures: steady-state latency and the consumer backlog.

Latency counts only windows ending after the first event produced after
warm-up; the backlog (produced, not yet processed) is its own figure, read
off the workers' flushes (their ``latency`` rows in a real Delta table).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from skewlab.io.delta import DeltaStore
from skewlab.live.driver.producer import ProduceReport
from skewlab.live.report.summary import _flushes, backlog, startup_seconds, summarize
from skewlab.pipeline.exactness import ExactnessReport
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0


def _latency_row(window_s: float, worker: int, values_ms: np.ndarray) -> dict[str, object]:
    return {
        "window_start": round(window_s * 1000),
        "worker": worker,
        "p50": float(np.percentile(values_ms, 50)),
        "p90": float(np.percentile(values_ms, 90)),
        "p99": float(np.percentile(values_ms, 99)),
        "max": float(values_ms.max()),
        "n": int(values_ms.size),
        "sample_ms": values_ms.astype("<f4").tobytes(),
    }


def test_backlog_of_a_late_first_batch_is_what_was_produced_before_it() -> None:
    # 1,000 events/s for 20 s in two 10 s windows; nothing processed until a first batch
    # at 17 s takes all 17,000 produced so far, then 1,000 a second.
    flush_t = T0 + np.array([17.0, 18.0, 19.0, 20.0, 21.0])
    flush_n = np.array([17_000, 1_000, 1_000, 1_000, 0])
    peak, at = backlog(
        [round(T0 * 1000), round((T0 + 10) * 1000)],
        np.array([10_000, 10_000]),
        10.0,
        T0,
        T0 + 20.0,
        flush_t,
        flush_n,
    )
    assert peak == pytest.approx(17_000)
    assert at == pytest.approx(17.0)


def test_backlog_of_a_steady_run_is_one_flush_interval_of_input() -> None:
    # 1,000 events/s for 10 s, flushed every 0.5 s with everything produced until then.
    flush_t = T0 + np.arange(1, 21) * 0.5
    peak, _ = backlog(
        [round(T0 * 1000)], np.array([10_000]), 10.0, T0, T0 + 10.0, flush_t, np.full(20, 500)
    )
    assert peak == pytest.approx(500)


def test_no_flushes_no_backlog_figure() -> None:
    peak, at = backlog([0], np.array([5]), 1.0, 0.0, 1.0, np.zeros(0), np.zeros(0))
    assert np.isnan(peak) and np.isnan(at)


def test_flushes_are_read_from_the_latency_table_in_commit_order(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path / "delta"))
    before = time.time()
    flushes = [[3], [4, 3], [5]]  # the second flush holds two windows (a two-row file)
    sizes = [sum(f) for f in flushes]
    for v, ns in enumerate(flushes):
        rows = [_latency_row(T0 + i, 0, np.full(n, 10.0)) for i, n in enumerate(ns)]
        store.append("latency", rows, app_id="work-0:r1", version=v, run_id="r1")
    store.append(
        "latency",
        [_latency_row(T0, 1, np.full(4, 1.0))],
        app_id="work-1:r2",
        version=0,
        run_id="r2",
    )
    after = time.time()
    times, counts = _flushes(store, "r1")
    assert counts.tolist() == sizes  # run r2's flush is not r1's
    assert np.all(np.diff(times) >= 0)
    assert before - 1 <= times[0] and times[-1] <= after + 1


def test_latency_counts_only_the_steady_state(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path / "delta"))
    s = ExperimentSettings(strategy="key", workers=2, window_s=1.0, home=str(tmp_path))
    rng = np.random.default_rng(3)
    # A warm-up window ending at T0 (its events waited ~20 s), then 5 steady windows.
    warm = rng.uniform(19_000, 21_000, 400)
    steady = [rng.gamma(2.0, 50.0, 300) for _ in range(10)]
    lat = [_latency_row(T0 - 1, 0, warm)]
    lat += [_latency_row(T0 + i // 2, i % 2, v) for i, v in enumerate(steady)]
    for v, row in enumerate(lat):
        store.append("latency", [row], app_id="work-0:run", version=v, run_id="run")
    kl = [
        {"window_start": round((T0 + i) * 1000), "key": "k", "worker": w, "count": 300, "bytes": 1}
        for i in range(5)
        for w in range(2)
    ]
    store.append("key_loads", kl, app_id="route:run", version=0, run_id="run")
    n = 3000
    summary = summarize(
        store,
        "run",
        s,
        ProduceReport(n, 5.0),
        ExactnessReport(n, n, 0, 0, 0),
        T0,
        T0 + 6.0,
        tmp_path / "plots",
        8.0,
    )
    pooled = np.concatenate(steady)
    assert summary.latency_events == pooled.size
    assert summary.p99_ms == pytest.approx(np.percentile(pooled, 99), rel=0.05)
    assert summary.max_ms < 2_000 < warm.min()  # the warm-up's 20 s is not latency
    assert summary.t_first_s == T0
    assert summary.backlog_max >= 0


def test_start_up_is_reported_per_component_not_as_latency() -> None:
    record = {
        "services": 0.4,
        "route": {"total": 14.2, "process": 1.0, "session": 6.1, "query": 2.0, "warm": 5.1},
        "workers": {"worker-0": 1.8, "worker-1": 2.4},
    }
    got = startup_seconds(record)
    assert got == {
        "broker": 0.4,
        "route": 14.2,
        "route_process": 1.0,
        "route_session": 6.1,
        "route_query": 2.0,
        "route_warm": 5.1,
        "workers": 2.4,  # production waits for the slowest worker
    }
    assert startup_seconds(None) == {} == startup_seconds({})
