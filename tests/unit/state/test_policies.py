"""Each policy's action sequence, driven by scores and acks with a FakeClock."""

from __future__ import annotations

import pickle

import pytest

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.state import (
    POLICIES,
    FeedInput,
    Phase,
    Replay,
    Role,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
    ThresholdConfig,
    make_policy,
)
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

THR = ThresholdConfig(dwell=1)
ALARM, OUT, CALM, LOW = 50.0, 80.0, 30.0, 10.0


def build(name: str, **params):
    clock = FakeClock()
    return make_policy(name, thresholds=THR, **params).build(clock=clock), clock


def test_checkpointing_sequence():
    """The seed's Algorithm 3 with interval checkpoints only: the replacements restore
    the newest interval checkpoint (``checkpoint_at_scale_out=False``)."""
    p, clock = build("checkpointing", interval_s=10.0, checkpoint_at_scale_out=False)
    assert p.observe(CALM) == []
    assert p.observe(ALARM) == [TakeCheckpoint(0, (0, 1))]
    clock.advance(5)
    assert p.observe(ALARM) == []
    clock.advance(5)
    assert p.observe(ALARM) == [TakeCheckpoint(1, (0, 1))]
    clock.advance(1)
    assert p.observe(OUT) == [
        StartInstances((2, 3, 4, 5), Role.REPLACEMENT),
        SplitState(1, (0, 1), (2, 3, 4, 5)),
        Replay(1, (2, 3, 4, 5)),
        FeedInput((2, 3, 4, 5)),
    ]
    assert p.phase is Phase.SCALING and p.observe(OUT) == []
    assert p.on_ready((2, 3, 4, 5)) == []
    assert p.on_caught_up((9,)) == []  # not ours
    assert p.on_caught_up((2, 3, 4, 5)) == [
        SwitchRouting((0, 1), (2, 3, 4, 5)),
        StopInstances((0, 1)),
    ]
    assert p.active == (2, 3, 4, 5) and p.phase is Phase.NORMAL


def test_checkpointing_takes_one_more_checkpoint_at_the_scale_out_decision():
    """By default the decision is a checkpoint trigger: the replacements restore the
    checkpoint taken then (the newest), not the interval one taken up to c before."""
    p, clock = build("checkpointing", interval_s=10.0)
    assert p.observe(ALARM) == [TakeCheckpoint(0, (0, 1))]
    clock.advance(7)
    assert p.observe(OUT) == [
        TakeCheckpoint(1, (0, 1)),
        StartInstances((2, 3, 4, 5), Role.REPLACEMENT),
        SplitState(1, (0, 1), (2, 3, 4, 5)),
        Replay(1, (2, 3, 4, 5)),
        FeedInput((2, 3, 4, 5)),
    ]
    assert p.phase is Phase.SCALING and p.observe(OUT) == []


def test_checkpointing_switch_at_start_routes_before_the_replacements_are_up():
    """``switch_at_start``: the switch comes with the start; the policy stays SCALING (no
    second decision) until the switched-to instances are ready, then NORMAL."""
    p, clock = build("checkpointing", interval_s=10.0, switch_at_start=True)
    p.observe(ALARM)
    clock.advance(3)
    actions = p.observe(OUT)
    assert actions[-2:] == [SwitchRouting((0, 1), (2, 3, 4, 5)), StopInstances((0, 1))]
    assert isinstance(actions[1], StartInstances) and actions[2] == SplitState(
        1, (0, 1), (2, 3, 4, 5)
    )
    assert p.active == p.pending == (2, 3, 4, 5) and p.phase is Phase.SCALING
    assert p.observe(OUT) == []  # no second scale-out while they start
    assert p.on_ready((9,)) == [] and p.phase is Phase.SCALING
    assert p.on_ready((2, 3, 4, 5)) == [] and p.on_caught_up((2, 3, 4, 5)) == []
    assert p.pending == () and p.phase is Phase.NORMAL and p.active == (2, 3, 4, 5)


def test_checkpoint_at_scale_out_must_be_a_bool():
    with pytest.raises(ConfigError, match="checkpoint_at_scale_out must be true or false"):
        make_policy("checkpointing", checkpoint_at_scale_out="yes")
    with pytest.raises(ConfigError, match="switch_at_start must be true or false"):
        make_policy("checkpointing", switch_at_start=1)


def test_checkpointing_on_significant_change_and_back_to_normal():
    p, _clock = build("checkpointing", interval_s=100.0, change_fraction=0.2)
    p.observe(ALARM)
    assert p.observe(ALARM, changed=0.1) == []
    assert p.observe(ALARM, changed=0.25) == [TakeCheckpoint(1, (0, 1))]
    assert p.observe(CALM) == [] and p.phase is Phase.NORMAL
    # straight to scale_out from NORMAL: a fresh checkpoint first
    actions = p.observe(OUT)
    assert actions[0] == TakeCheckpoint(2, (0, 1))
    assert actions[2] == SplitState(2, (0, 1), (2, 3, 4, 5))


def test_active_backup_sequence_and_stand_down():
    p, _clock = build("active-backup")
    assert p.observe(ALARM) == [
        StartInstances((2, 3, 4, 5), Role.SECONDARY),
        SplitState(None, (0, 1), (2, 3, 4, 5)),
        FeedInput((2, 3, 4, 5)),
    ]
    assert p.observe(CALM) == [StopInstances((2, 3, 4, 5))]
    assert p.phase is Phase.NORMAL and p.pending == ()
    p.observe(ALARM)
    assert p.on_ready((6, 7, 8, 9)) == []
    assert p.observe(OUT) == [SwitchRouting((0, 1), (6, 7, 8, 9)), StopInstances((0, 1))]
    assert p.active == (6, 7, 8, 9)


def test_active_backup_takes_over_when_late_secondaries_get_ready():
    p, _clock = build("active-backup")
    p.observe(ALARM)
    assert p.observe(OUT) == [] and p.phase is Phase.SCALING
    assert p.on_ready((2, 3, 4, 5)) == [
        SwitchRouting((0, 1), (2, 3, 4, 5)),
        StopInstances((0, 1)),
    ]


def test_restart_checkpoints_always_and_restarts_at_scale_out():
    p, clock = build("restart", interval_s=1.0)
    assert p.observe(CALM) == [TakeCheckpoint(0, (0, 1))]
    clock.advance(0.5)
    assert p.observe(CALM) == []
    clock.advance(0.5)
    assert p.observe(ALARM) == [TakeCheckpoint(1, (0, 1))]
    clock.advance(0.2)
    assert p.observe(OUT) == [
        StopInstances((0, 1)),
        StartInstances((2, 3, 4, 5), Role.PRIMARY),
        SplitState(1, (0, 1), (2, 3, 4, 5)),
        Replay(1, (2, 3, 4, 5)),
        SwitchRouting((0, 1), (2, 3, 4, 5)),
    ]
    clock.advance(5)
    assert p.observe(OUT) == []  # restarting: no checkpoints, no second restart
    assert p.on_ready((2, 3, 4, 5)) == [] and p.phase is Phase.NORMAL
    assert p.observe(OUT) == [TakeCheckpoint(2, (2, 3, 4, 5))]  # cooling down


def test_scale_in_composes_onto_fewer_instances_after_cooldown():
    p, clock = build("checkpointing", start_instances=4, cooldown_s=30.0)
    clock.advance(1)
    assert p.observe(LOW) == [
        StartInstances((4, 5), Role.REPLACEMENT),
        SplitState(None, (0, 1, 2, 3), (4, 5)),
        FeedInput((4, 5)),
    ]
    assert p.on_caught_up((4, 5)) == [
        SwitchRouting((0, 1, 2, 3), (4, 5)),
        StopInstances((0, 1, 2, 3)),
    ]
    clock.advance(10)
    assert p.observe(LOW) == []  # cooldown
    clock.advance(30)
    assert p.observe(LOW)[0] == StartInstances((6,), Role.REPLACEMENT)
    p.on_caught_up((6,))
    clock.advance(60)
    assert p.observe(LOW) == []  # at min_instances


def test_snapshot_round_trip_continues_the_same_way():
    p, clock = build("checkpointing")
    p.observe(ALARM)
    snap = pickle.loads(pickle.dumps(p.snapshot()))
    q = make_policy("checkpointing", thresholds=THR).build(snap, clock)
    assert q.observe(OUT) == p.observe(OUT)


def test_registry_and_config_errors():
    assert set(POLICIES) == {"checkpointing", "active-backup", "restart"}
    with pytest.raises(UnknownNameError, match="active-backup"):
        make_policy("storm")
    with pytest.raises(ConfigError, match="factor"):
        make_policy("restart", factor=1)
    with pytest.raises(ConfigError, match="bogus"):
        make_policy("active-backup", bogus=1)
    with pytest.raises(ConfigError, match="min_instances"):
        make_policy("checkpointing", start_instances=2, max_instances=1)


# ---------------------------------------------------------------- cool-down of active backup


def take_over_with_ready_secondaries(p, clock) -> list:
    """Alarm, secondaries ready, then an observation at scale_out."""
    p.observe(ALARM)
    p.on_ready(p.pending)
    return p.observe(OUT)


def test_active_backup_second_take_over_waits_for_the_cooldown():
    p, clock = build("active-backup", cooldown_s=60.0)
    first = take_over_with_ready_secondaries(p, clock)
    assert first == [SwitchRouting((0, 1), (2, 3, 4, 5)), StopInstances((0, 1))]
    # 1 s later the load is still at scale_out (dwell 1): secondaries may start, no take-over
    clock.advance(1)
    started = p.observe(OUT)
    assert started[0] == StartInstances((6, 7, 8, 9, 10, 11, 12, 13), Role.SECONDARY)
    assert p.on_ready((6, 7, 8, 9, 10, 11, 12, 13)) == []
    for _ in range(58):
        clock.advance(1)
        assert p.observe(OUT) == []
    assert p.active == (2, 3, 4, 5) and p.phase is Phase.ALARMED
    # 60 s after the first take-over the cool-down is over
    clock.advance(1)
    assert p.observe(OUT) == [
        SwitchRouting((2, 3, 4, 5), (6, 7, 8, 9, 10, 11, 12, 13)),
        StopInstances((2, 3, 4, 5)),
    ]
    assert len(p.active) == 8


def test_active_backup_late_secondaries_do_not_take_over_within_the_cooldown():
    p, clock = build("active-backup", cooldown_s=60.0)
    take_over_with_ready_secondaries(p, clock)
    clock.advance(1)
    p.observe(OUT)  # secondaries started, not ready
    assert p.phase is Phase.ALARMED  # not SCALING: on_ready must not switch now
    clock.advance(1)
    assert p.on_ready(p.pending) == []
    assert p.active == (2, 3, 4, 5)
    clock.advance(60)
    assert p.observe(OUT)[0] == SwitchRouting((2, 3, 4, 5), p.active)


def test_active_backup_cooldown_survives_a_snapshot():
    p, clock = build("active-backup", cooldown_s=60.0)
    take_over_with_ready_secondaries(p, clock)
    clock.advance(1)
    q = make_policy("active-backup", thresholds=THR, cooldown_s=60.0).build(p.snapshot(), clock)
    q.observe(OUT)
    q.on_ready(q.pending)
    assert q.observe(OUT) == []
    clock.advance(60)
    assert isinstance(q.observe(OUT)[0], SwitchRouting)


# ---------------------------------------------------------------- change_fraction


def test_change_fraction_checkpoints_before_the_interval_is_due():
    p, clock = build(
        "checkpointing", interval_s=100.0, change_fraction=0.2, checkpoint_at_scale_out=False
    )
    assert p.on_state_changed(0.9) == []  # NORMAL: no checkpointing before alarming
    assert p.observe(ALARM) == [TakeCheckpoint(0, (0, 1))]
    clock.advance(5)
    assert p.on_state_changed(0.19) == []
    assert p.on_state_changed(0.2) == [TakeCheckpoint(1, (0, 1))]
    clock.advance(5)
    assert p.observe(ALARM) == []  # interval not due: the change reset it
    # the newer checkpoint is the one a scale-out restores
    assert SplitState(1, (0, 1), (2, 3, 4, 5)) in p.observe(OUT)


def test_without_change_fraction_only_the_interval_checkpoints():
    p, clock = build("checkpointing", interval_s=100.0)
    p.observe(ALARM)
    clock.advance(5)
    assert p.on_state_changed(1.0) == []
    assert p.observe(ALARM, changed=1.0) == []
    clock.advance(95)
    assert p.observe(ALARM) == [TakeCheckpoint(1, (0, 1))]


def test_change_fraction_moves_the_restored_checkpoint_forward():
    """Same scores and clock; only the reported change differs -> a newer checkpoint restored."""

    def restored(changes: list[float]) -> int:
        p, clock = build(
            "checkpointing", interval_s=100.0, change_fraction=0.3, checkpoint_at_scale_out=False
        )
        p.observe(ALARM)
        for c in changes:
            clock.advance(2)
            p.on_state_changed(c)
        clock.advance(2)
        split = next(a for a in p.observe(OUT) if isinstance(a, SplitState))
        return split.checkpoint

    assert restored([0.1, 0.2, 0.25]) == 0
    assert restored([0.1, 0.35, 0.1, 0.4]) == 2


def test_state_change_fraction_is_validated_and_ignored_by_other_policies():
    for name in ("active-backup", "restart"):
        p, _clock = build(name)
        p.observe(ALARM)
        assert p.on_state_changed(1.0) == []
    p, _clock = build("checkpointing", change_fraction=0.5)
    with pytest.raises(ConfigError, match="changed fraction"):
        p.on_state_changed(1.5)
