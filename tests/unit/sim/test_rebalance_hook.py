"""The simulator adapter: overrides follow decisions, pauses delay the target worker."""

from __future__ import annotations

import pytest

from skewlab.grouping import make_grouping
from skewlab.rebalance import make_rebalancer
from skewlab.sim import ConstantService, SimConfig, simulate
from skewlab.sim.rebalance_hook import RebalanceHook, StateTransfer
from skewlab.workload import EpsSwitchWorkload, ZipfWorkload

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


def test_smalops_fed_by_the_stream_places_heavy_keys_before_the_first_tick() -> None:
    wl = ZipfWorkload(seed=1, keys=30)  # top keys 15.4 % and 10.9 %: heavy at 10 %
    rb = make_rebalancer("smalops", 8, threshold=0.1, gate=False, seed=1).build()
    transfer = StateTransfer(bytes_per_s=1e6, latency_s=1e-3)
    hook = RebalanceHook(rb, interval_s=10.0, handoff=transfer)
    cfg = SimConfig(service=ConstantService(2e-5), window_s=10.0, arrivals="poisson")
    simulate(make_grouping("key", 8), wl, 200_000, 10_000.0, config=cfg, hooks=[hook])
    placed = {m.key for d in hook.online for m in d.moves}
    assert {k for d in hook.online for k, _ in d.assignment} == {"k0", "k1"}
    assert hook.online[0].ts < 1.0 < hook.decisions[0].ts  # detected within the first second
    # each moved key's hand-off: 1 ms + its counted tuples * 100 B at 1 MB/s
    assert placed and len(hook.handoffs) == len(placed) == hook.moves_of("place")
    for _, key, seconds in hook.handoffs:
        tuples = next(m.state_tuples for d in hook.online for m in d.moves if m.key == key)
        assert seconds == pytest.approx(1e-3 + tuples * 100 / 1e6)
