"""``advise --verify``'s pure parts: the error, a live run's figures, every candidate's command."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from skewlab import cli
from skewlab.advise import candidates
from skewlab.advise.command import run_args
from skewlab.commands._advise_verify import (
    VerifyResult,
    VerifyRow,
    live_figures,
    rel_error,
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
