"""The Sec. V-C controller state machine, driven by hand with a FakeClock."""

from __future__ import annotations

import pickle

import pytest

from skewlab.autoscale import (
    Assignment,
    ControllerConfig,
    ControllerSnapshot,
    Phase,
    QueryAssignment,
    StartConsumer,
    StartPartition,
    StopConsumer,
    StopPartition,
)
from skewlab.errors import ConfigError, StateError
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

CFG = ControllerConfig(algorithm="mwf", consumer_capacity=120.0, timeout_s=60.0)


def settle(ctl, actions):
    """Play a well-behaved group: every consumer is ready, every message acknowledged."""
    queue = list(actions)
    seen = []
    while queue:
        a = queue.pop(0)
        seen.append(a)
        if isinstance(a, StartConsumer):
            queue += ctl.on_consumer_ready(a.consumer)
        elif isinstance(a, StopPartition):
            queue += ctl.on_ack(a.consumer, a.partition, started=False)
        elif isinstance(a, StartPartition):
            queue += ctl.on_ack(a.consumer, a.partition, started=True)
    return seen


def test_fresh_controller_assigns_everything_on_the_first_measurement():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    assert ctl.start() == []
    assert ctl.phase is Phase.SENTINEL
    actions = ctl.on_measurement([60.0, 30.0, 50.0])
    assert ctl.phase is Phase.GROUP_MANAGEMENT
    assert actions == [StartConsumer(0), StartConsumer(1)]
    assert ctl.on_consumer_ready(0) == []  # waits for every new consumer
    starts = ctl.on_consumer_ready(1)
    assert sorted(starts, key=lambda a: a.partition) == [
        StartPartition(0, 0), StartPartition(1, 1), StartPartition(1, 2),
    ]  # fmt: skip
    for a in starts:
        ctl.on_ack(a.consumer, a.partition, started=True)
    assert ctl.phase is Phase.SENTINEL
    assert ctl.current == Assignment((0, 1, 1))  # MWF: 60 | 50 + 30
    assert ctl.decisions[0][0] == "unassigned"
    assert ctl.last_reassign == 0.0


def test_sentinel_leaves_on_timeout_only_when_it_is_due():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    ctl.start()
    settle(ctl, ctl.on_measurement([60.0, 30.0, 50.0]))
    clock.advance(59.0)
    assert ctl.tick() == []
    assert ctl.on_measurement([60.0, 30.0, 50.0]) == []
    clock.advance(1.0)
    ctl.tick()
    assert ctl.decisions[-1][0] == "timeout"
    assert ctl.phase is Phase.SENTINEL  # nothing to change: straight back


def test_over_capacity_moves_a_partition_stop_ack_then_start():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    ctl.start()
    settle(ctl, ctl.on_measurement([60.0, 30.0, 50.0]))  # {0: [0], 1: [1, 2]}
    actions = ctl.on_measurement([60.0, 55.0, 50.0])  # consumer 1 now holds 105 > C = 100
    assert ctl.decisions[-1][0] == "over-capacity"
    assert actions == [StartConsumer(2)]  # 50 fits neither 60 nor 55: a new consumer first
    actions = ctl.on_consumer_ready(2)
    stops = [a for a in actions if isinstance(a, StopPartition)]
    assert stops and not any(isinstance(a, StartPartition) for a in actions)
    stop = stops[0]
    assert stop == StopPartition(1, 2)
    nxt = ctl.on_ack(stop.consumer, stop.partition, started=False)
    assert nxt == [StartPartition(2, 2)]
    assert ctl.current is not None and ctl.current.owner[stop.partition] == -1  # nobody reads it
    settle(ctl, nxt)
    assert ctl.phase is Phase.SENTINEL
    assert ctl.overloaded() == []


def test_lost_consumer_leaves_unassigned_partitions_and_triggers_reassignment():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    ctl.start()
    settle(ctl, ctl.on_measurement([60.0, 30.0, 50.0]))
    actions = ctl.on_consumer_lost(1)
    assert ctl.decisions[-1][0] == "unassigned"
    settle(ctl, actions)
    assert all(o >= 0 for o in ctl.current.owner)


def test_idle_consumers_are_stopped_after_the_moves():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    ctl.start()
    settle(ctl, ctl.on_measurement([90.0, 90.0]))
    seen = settle(ctl, ctl.on_measurement([10.0, 10.0]) or [])
    clock.advance(60.0)
    seen = settle(ctl, ctl.tick())
    assert StopConsumer(1) in seen or StopConsumer(0) in seen
    assert ctl.current.consumers == 1


def test_restart_synchronizes_from_the_consumers_reports():
    clock = FakeClock()
    ctl = CFG.build(clock=clock)
    ctl.start()
    settle(ctl, ctl.on_measurement([60.0, 30.0, 50.0]))
    snap = pickle.loads(pickle.dumps(ctl.snapshot()))
    again = CFG.build(state=snap, clock=clock)
    assert again.start() == [QueryAssignment(0), QueryAssignment(1)]
    assert again.phase is Phase.SYNCHRONIZE
    assert again.on_report(0, [0, 1]) == []
    # consumer 1 died before the crash was noticed: partition 2 is unread
    assert again.on_consumer_lost(1) == []
    assert again.phase is Phase.SENTINEL
    assert again.current == Assignment((0, 0, -1))
    settle(again, again.on_measurement([60.0, 30.0, 50.0]))
    assert all(o >= 0 for o in again.current.owner)


def test_a_partition_claimed_twice_is_stopped_on_all_but_one():
    snap = ControllerSnapshot(3, Assignment((0, 1)), 0.0)
    ctl = CFG.build(state=snap, clock=FakeClock())
    ctl.start()
    ctl.on_report(0, [0, 1])
    assert ctl.on_report(1, [1]) == [StopPartition(1, 1)]
    assert ctl.current.owner == (0, 0)


def test_config_validation():
    with pytest.raises(ConfigError):
        ControllerConfig(timeout_s=0)
    with pytest.raises(ConfigError):
        ControllerConfig(algorithm="nope")
    with pytest.raises(StateError):
        CFG.build(state="x", clock=FakeClock())  # type: ignore[arg-type]
