"""The scale-out simulator (skewlab.sim.scaleout) at small size: exact, and the seed's ordering."""

from __future__ import annotations

import dataclasses

import pytest

from skewlab.errors import ConfigError
from skewlab.sim.scaleout import ScaleOutSimConfig, simulate_scaleout
from skewlab.state import make_policy

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
