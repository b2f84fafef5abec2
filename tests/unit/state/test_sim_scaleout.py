"""The scale-out simulator (skewlab.sim.scaleout) at small size: exact, and the seed's ordering."""

from __future__ import annotations

import dataclasses

import pytest

from skewlab.errors import ConfigError
from skewlab.sim.scaleout import ScaleOutSimConfig, simulate_scaleout
from skewlab.state import ThresholdConfig, make_policy

pytestmark = pytest.mark.unit


def run(name: str, **params):
    cfg = ScaleOutSimConfig(
        policy=make_policy(name), duration_s=1100.0, state_keys=2000, dt_s=0.1, **params
    )
    return simulate_scaleout(cfg)


@pytest.fixture(scope="module")
def results():
    return {n: run(n) for n in ("checkpointing", "active-backup", "restart")}


def test_every_policy_is_exact_and_scales_out_twice(results):
    for r in results.values():
        assert r.processed == pytest.approx(r.arrived, rel=1e-9)
        outs = [e for e in r.events if e.kind == "scale-out"]
        assert [(e.before, e.after) for e in outs] == [(2, 4), (4, 8)]
        assert all(e.done is not None and e.done >= e.t for e in outs)


def test_the_seed_ordering(results):
    ck, ab, rs = results["checkpointing"], results["active-backup"], results["restart"]
    assert ab.latency_p99_s <= ck.latency_p99_s < rs.latency_p99_s
    assert ck.instance_seconds < ab.instance_seconds
    assert ab.backup_seconds > 0 and ck.backup_seconds == 0
    assert ab.max_pause_s < 1.0 and ck.max_pause_s < 5.0 and rs.max_pause_s > 20.0
    assert max(ab.takeover_s) < 0.5 < min(ck.takeover_s)
    assert rs.fairness < ck.fairness <= 1.0


def test_step_ramp_and_time_compression():
    cfg = ScaleOutSimConfig(policy=make_policy("checkpointing"), ramp="step", state_keys=500)
    small = cfg.scaled(0.01)
    assert small.period_s == pytest.approx(5.0) and small.read_keys_per_s == pytest.approx(1e8)
    assert cfg.rate(499.0) == 200.0 and cfg.rate(500.0) == 400.0
    with pytest.raises(ConfigError, match="ramp"):
        dataclasses.replace(cfg, ramp="linear")


def test_take_over_is_timed_from_the_scale_out_decision():
    """Alarming just below scale_out and a slow set-up: the secondaries are not ready at the
    decision, the take-over waits for them; alarming early leaves time, no wait."""

    def active_backup(alarming: float, startup_s: float):
        thr = ThresholdConfig(scale_in=0.0, alarming=alarming, hysteresis=1.0)
        policy = make_policy("active-backup", thresholds=thr)
        return run_cfg(policy, startup_s=startup_s)

    late = active_backup(68.0, 20.0)
    early = active_backup(40.0, 20.0)
    assert early.takeovers() == pytest.approx([0.0, 0.0], abs=1e-9)
    waits = late.takeovers()
    # at most the set-up (20 s start + the state copy), acknowledged at the next 0.1 s step
    assert len(waits) == 2 and all(10.0 < w < 20.2 for w in waits)
    # the wait shows as latency too
    assert late.latency_p99_s > early.latency_p99_s + 5.0


def test_alternating_ramp_rate():
    cfg = ScaleOutSimConfig(policy=make_policy("restart"), ramp="alternate", period_s=300.0)
    assert [cfg.rate(t) for t in (0.0, 299.0, 300.0, 599.0, 600.0, 900.0)] == [
        200.0,
        200.0,
        400.0,
        400.0,
        200.0,
        400.0,
    ]


def test_snapshot_stalls_cost_their_length_and_add_latency():
    """Storm's 1 s checkpoints at a constant load (no scale event): the stalls, each a
    fraction of a step or a whole one, are counted as state work and add latency."""

    def restart(keys_per_s: float):
        return run_cfg(
            make_policy("restart"), growth=1.0, base_rate=250.0, snapshot_keys_per_s=keys_per_s
        )

    costly, half, free = restart(2e4), restart(4e4), restart(1e12)
    assert costly.events == [] and costly.checkpoints == free.checkpoints == 1100
    # 2000 keys at 2e4 keys/s: 0.1 s of stall per checkpoint (one 0.1 s step here)
    assert costly.snapshot_stall_s == pytest.approx(0.1 * costly.checkpoints)
    assert half.snapshot_stall_s == pytest.approx(0.05 * half.checkpoints)
    assert free.snapshot_stall_s < 1e-3
    assert free.latency_mean_s < half.latency_mean_s < costly.latency_mean_s


def test_change_fraction_triggers_checkpoints_in_the_simulator():
    base = run_cfg(make_policy("checkpointing", interval_s=100.0))
    eager = run_cfg(make_policy("checkpointing", interval_s=100.0, change_fraction=0.5))
    assert eager.checkpoints > base.checkpoints
    assert eager.processed == pytest.approx(eager.arrived, rel=1e-9)


def run_cfg(policy, **params):
    cfg = ScaleOutSimConfig(policy=policy, duration_s=1100.0, state_keys=2000, dt_s=0.1, **params)
    return simulate_scaleout(cfg)
