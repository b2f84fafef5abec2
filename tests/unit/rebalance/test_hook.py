"""The simulator adapter: overrides follow decisions, pauses delay the target worker."""

from __future__ import annotations

import pytest

from skewlab.grouping import make_grouping
from skewlab.rebalance import make_rebalancer
from skewlab.sim import ConstantService, SimConfig, simulate
from skewlab.sim.rebalance_hook import RebalanceHook
from skewlab.workload import EpsSwitchWorkload

pytestmark = pytest.mark.unit

WL = EpsSwitchWorkload(seed=1, keys=500, low=1.5, high=1.5, low_s=5.0, high_s=5.0)


def run(policy: str, pause: float = 0.0) -> tuple:
    hook = RebalanceHook(
        make_rebalancer(policy, 4).build(), interval_s=1.0, pause_s_per_tuple=pause
    )
    cfg = SimConfig(service=ConstantService(1e-4), window_s=1.0)
    r = simulate(make_grouping("key", 4), WL, 20_000, 4000.0, config=cfg, hooks=[hook])
    return r, hook


def test_hook_rebalances_and_lowers_imbalance() -> None:
    base, h0 = run("none")
    dlb, h1 = run("dlb-h")
    assert not h0.rebalances and h1.rebalances
    assert dlb.imb_score < base.imb_score
    assert dlb.overrides >= 1 and len(h1.series) == len(h1.decisions)


def test_pauses_cost_latency() -> None:
    free, _ = run("lptf")
    paused, _ = run("lptf", pause=1e-4)
    assert paused.sojourn.p99 > free.sojourn.p99
