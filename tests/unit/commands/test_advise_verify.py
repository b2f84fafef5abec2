"""``advise --verify``'s pure parts: the error, a live run's figures, every candidate's command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from skewlab import cli
from skewlab.advise import Candidate, SimSettings, StreamWorkload, candidates, evaluate, stream_of
from skewlab.advise.calibrate import rel_error, service_from_flushes
from skewlab.advise.command import run_args
from skewlab.commands._advise_verify import (
    VerifyResult,
    VerifyRow,
    calibrate,
    live_figures,
    measured_service,
    model_run,
    route_batches,
)
from skewlab.commands.run import settings_list

pytestmark = pytest.mark.unit


def test_relative_error() -> None:
    assert rel_error(1.1, 1.0) == pytest.approx(0.1)
    assert rel_error(0.9, 1.0) == pytest.approx(0.1)
    assert rel_error(0.0, 0.0) == 0.0
    assert math.isinf(rel_error(1.0, 0.0))


def test_live_figures_use_the_simulators_definitions() -> None:
    summary = SimpleNamespace(
        window_loads=[[10, 10], [30, 10], [0, 0]],
        dist_cost=1.5,
        p99_ms=800.0,
        p50_ms=90.0,
        keys_moved=6,
    )
    f = live_figures(summary, events=6_000, rate=1_000.0)  # one tenth of a minute
    assert f["keys_moved_min"] == pytest.approx(60.0)
    assert f["dist_cost"] == 1.5 and f["p99_ms"] == 800.0
    assert f["imbalance"] == pytest.approx((0 * 20 + 50.0 * 40) / 60)


def test_verify_table_holds_every_strategy_and_metric() -> None:
    sim = {"imbalance": 1.0, "dist_cost": 1.0, "p99_ms": 10.0, "keys_moved_min": 0.0}
    live = {"imbalance": 2.0, "dist_cost": 1.0, "p99_ms": 10.0, "keys_moved_min": 0.0}
    result = VerifyResult(100, 10.0, 5.0, [VerifyRow("key", sim, live, "r1", True)])
    recs = result.records()
    assert [(r["strategy"], r["metric"]) for r in recs] == [("key", m) for m in sim]
    assert [r["rel_error"] for r in recs] == [0.5, 0.0, 0.0, 0.0]
    assert all(r["within"] for r in recs)  # imbalance: 1 point apart, within the tolerance
    far = {**live, "imbalance": 3.0}
    (imb, *_) = VerifyResult(100, 10.0, 5.0, [VerifyRow("key", sim, far, "r", True)]).records()
    assert not imb["within"]
    assert len(result.cells()) == len(recs)
    assert set(result.metrics()) == {f"verify_key_{m}_err" for m in sim}


@pytest.mark.parametrize("candidate", candidates(4), ids=lambda c: c.label)
def test_every_candidates_command_is_a_valid_skewlab_run(candidate, tmp_path: Path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("key\n" + "k\n" * 100)
    args = run_args(candidate, workers=4, workload=f"trace:{trace}", events=100, rate=50.0,
                    service_us=250.0, window_s=0.5, interval_s=1.0)  # fmt: skip
    (s,) = settings_list(cli.build_parser().parse_args(["run", *args]))
    assert (s.strategy, s.rebalance) == (candidate.grouping, candidate.rebalance)
    assert s.strategy_params == dict(candidate.params)
    assert s.rebalance_params == dict(candidate.rebalance_params)
    assert (s.workers, s.events, s.rate, s.service_us, s.window_s) == (4, 100, 50.0, 250.0, 0.5)


def test_verify_records_carry_the_ratio_and_the_p99_before_calibration() -> None:
    sim = {"imbalance": 2.0, "dist_cost": 1.5, "p99_ms": 600.0, "keys_moved_min": 0.0}
    live = {"imbalance": 2.5, "dist_cost": 1.5, "p99_ms": 500.0, "keys_moved_min": 0.0}
    row = VerifyRow("pkg", sim, live, "r", True, sim_uncalibrated_p99_ms=50.0)
    result = VerifyResult(100, 10.0, 300.0, [row], 1000.0, 0.5)
    recs = {r["metric"]: r for r in result.records()}
    p99 = recs["p99_ms"]
    assert (p99["ratio"], p99["rel_error"], p99["within"]) == (1.2, pytest.approx(0.2), True)
    assert (p99["sim_uncalibrated"], p99["rel_error_uncalibrated"]) == (50.0, 0.9)
    assert not p99["within_uncalibrated"]
    assert recs["imbalance"]["sim_uncalibrated"] == recs["imbalance"]["sim"] == 2.0
    assert "0.50 s micro-batch" in result.table() and "90.0 %" in result.table()


def test_the_route_jobs_batch_times_are_read_from_its_log(tmp_path: Path) -> None:
    log = tmp_path / "route.log"
    log.write_text(
        "2026-11-28 14:13:36 __main__ progress batch 0: 398 rows, durationMs "
        '{"triggerExecution": 38440}\n'  # the warm-up
        "2026-11-28 14:13:43 __main__ progress batch 1: 2048 rows, durationMs "
        '{"addBatch": 5611, "triggerExecution": 5884}\n'
        "26/11/28 14:13:48 WARN ProcessingTimeExecutor: Current batch is falling behind.\n"
        "2026-11-28 14:13:48 __main__ progress batch 2: 952 rows, durationMs "
        '{"triggerExecution": 5584}\n'
        "2026-11-28 14:13:49 __main__ progress batch 3: 10 rows, durationMs {not json}\n"
    )
    assert route_batches(log) == [(2048, 5.884), (952, 5.584)]
    assert route_batches(tmp_path / "missing.log") == []


def _two_keys_on_two_workers() -> tuple[str, str]:
    """Two keys KEY grouping puts on different workers of two."""
    settings = SimSettings(workers=2, service_s=0.001, window_s=1.0, interval_s=1.0)
    home = {}
    for k in (f"k{i}" for i in range(50)):
        one = stream_of("t", ((k, None, None),))
        loads = evaluate(Candidate("key"), StreamWorkload(one, rate=1.0), settings).worker_loads
        home.setdefault(int(np.argmax(loads)), k)
        if len(home) == 2:
            return home[0], home[1]
    raise AssertionError("no two keys on different workers")


def test_the_simulator_windows_the_stream_as_the_live_producer_sent_it(tmp_path: Path) -> None:
    # 1,000 events of one key, then 1,000 of a key on the other worker, at 100 events/s
    # (2 s load windows): sent as one 2,048-event chunk, as skewlab's producer sends them,
    # the whole stream carries one time stamp and falls in one window holding both keys
    # (imbalance 0), which is what the live run measures; paced one by one, every window
    # holds one key (imbalance 100: the drifting stream's miss)
    a, b = _two_keys_on_two_workers()
    stream = stream_of("t", ((k, None, None) for k in [a] * 1_000 + [b] * 1_000))
    sim = SimSettings(workers=2, service_s=0.001, window_s=2.0, interval_s=2.0)
    chunked = model_run(Candidate("key"), stream, 100.0, 2_048, sim, tmp_path, 1_000.0)
    paced = model_run(Candidate("key"), stream, 100.0, 1, sim, tmp_path, 1_000.0)
    assert chunked.outcome.imbalance == 0.0
    assert paced.outcome.imbalance == pytest.approx(100.0)
    assert not chunked.latency.batches_matched  # no route.log in that run directory


def test_the_simulators_windows_start_where_the_live_runs_clock_put_them(tmp_path: Path) -> None:
    # a chunk of 100 events a second, keys a and b by turns, 2 s windows: at the clock's
    # phase 0 each window holds an a-chunk and a b-chunk (imbalance 0); a run whose first
    # event was sent 1 s into a window has a window of one chunk at each end (100 each,
    # 200 of 2,000 events: 10)
    a, b = _two_keys_on_two_workers()
    keys = [a if (i // 100) % 2 == 0 else b for i in range(2_000)]
    stream = stream_of("t", ((k, None, None) for k in keys))
    sim = SimSettings(workers=2, service_s=0.001, window_s=2.0, interval_s=2.0)
    aligned = model_run(Candidate("key"), stream, 100.0, 100, sim, tmp_path, 1_000.0)
    shifted = model_run(Candidate("key"), stream, 100.0, 100, sim, tmp_path, 1_001.0)
    assert aligned.outcome.imbalance == pytest.approx(0.0)
    assert shifted.outcome.imbalance == pytest.approx(10.0)


def test_each_runs_p99_is_modelled_on_its_own_batches_plus_keys_delay(tmp_path: Path) -> None:
    # two runs of the same stream; the second's route job was slower: its modelled p99
    # (never fitted) grows by that, KEY's fitted delay is added to both
    stream = stream_of("t", ((f"k{i % 9}", None, None) for i in range(300)))
    sim = SimSettings(workers=2, service_s=0.001, window_s=0.5, interval_s=0.5)
    runs = []
    for name, secs in (("fast", 0.2), ("slow", 1.2)):
        d = tmp_path / name
        d.mkdir()
        (d / "route.log").write_text(
            f'x progress batch 1: 100 rows, durationMs {{"triggerExecution": {secs * 1e3}}}\n'
            f'x progress batch 2: 200 rows, durationMs {{"triggerExecution": {secs * 1e3}}}\n'
        )
        runs.append(model_run(Candidate("key"), stream, 100.0, 100, sim, d, 0.0))
    fast, slow = runs
    assert fast.latency.batches_matched and slow.latency.batches_matched
    live = {"imbalance": 0.0, "dist_cost": 1.0, "p99_ms": 0.0, "keys_moved_min": 0.0}
    rows = [VerifyRow("key", fast.outcome.figures(), {**live, "p50_ms": fast.latency.p50_ms + 50},
                      "r1", True),
            VerifyRow("key", slow.outcome.figures(), dict(live), "r2", True)]  # fmt: skip
    cal = calibrate(rows, runs, 0.5)
    assert cal.delay_ms == pytest.approx(50.0)
    assert cal.trigger_s == pytest.approx(0.5)  # 0.2 s batches: never below the trigger
    assert rows[0].sim["p99_ms"] == pytest.approx(fast.latency.p99_ms + 50.0)
    assert rows[1].sim["p99_ms"] == pytest.approx(slow.latency.p99_ms + 50.0)
    assert slow.latency.p99_ms > fast.latency.p99_ms + 900.0


def test_the_service_time_is_the_work_per_event_of_the_full_steps_between_flushes() -> None:
    # worker 1 (hot) flushes after every step of 300 events: 1.0, 1.1 and 1.2 s of work,
    # then one after 3 s idle (waiting for the next chunk); worker 0's short steps (10
    # events: it waited for them) are no measure of work
    flushes = [(1, 0.0, 0), (1, 1.0, 300), (1, 2.1, 600), (1, 3.3, 900), (1, 7.3, 1200),
               (0, 0.0, 0), (0, 2.0, 10), (0, 4.0, 20)]  # fmt: skip
    # the median of 1.0, 1.1, 1.2 and 4.0 s per 300 events: the idle one moves it little
    assert service_from_flushes(flushes) == pytest.approx(1.15 / 300)
    assert service_from_flushes([(0, 0.0, 0), (0, 1.0, 5)]) is None  # no full step
    assert service_from_flushes([(0, 0.0, 0)]) is None


def test_the_service_time_is_read_from_the_runs_own_worker_flushes(tmp_path: Path) -> None:
    # real Delta table, two runs: only the run's own flushes count (three per worker, a
    # full step each); a run directory without its handle measures nothing
    from skewlab.io.delta.store import DeltaStore

    store = DeltaStore(str(tmp_path / "delta"))
    for version, offset in enumerate((0, 400, 800), start=1):
        for run, worker in (("run-a", 0), ("run-b", 1)):
            row = {"worker": [worker], "routed_offset": [offset], "watermarks": ["{}"]}
            store.append("worker_progress", row, app_id=f"{run}-{worker}", version=version,
                         run_id=run)  # fmt: skip
    run_dir = tmp_path / "runs" / "run-a"
    run_dir.mkdir(parents=True)
    assert measured_service(run_dir) is None
    (run_dir / "handle.json").write_text(json.dumps({"delta_root": str(tmp_path / "delta")}))
    got = measured_service(run_dir)
    assert got is not None and got > 0
    # --measure-service: the run is simulated with it
    stream = stream_of("t", ((f"k{i % 5}", None, None) for i in range(200)))
    sim = SimSettings(workers=2, service_s=1.0, window_s=0.5, interval_s=0.5)
    m = model_run(Candidate("key"), stream, 100.0, 50, sim, run_dir, 0.0, measure_service=True)
    assert m.service_s == got
    given = model_run(Candidate("key"), stream, 100.0, 50, sim, run_dir, 0.0)
    assert given.service_s is None and given.latency.p50_ms > m.latency.p50_ms
    missing = tmp_path / "runs" / "run-c"
    missing.mkdir()
    (missing / "handle.json").write_text(json.dumps({"delta_root": str(tmp_path / "delta")}))
    assert measured_service(missing) is None
