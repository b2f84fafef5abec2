"""Scale-out policies as pure state machines: checkpointing, active backup, restart baseline.

Each policy reads one bottleneck score per measurement through its
:class:`~skewlab.state.score.ThresholdDetector` and returns :mod:`~skewlab.state.base` actions;
the executor reports back with ``on_ready`` and ``on_caught_up``. Registry: :data:`POLICIES`.
The steps of each policy (seed Algorithms 2 and 3, the restart baseline, scale-in):
docs/state.md, "Scale-out policies".
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from skewlab.clock import Clock, SystemClock
from skewlab.errors import ConfigError, StateError
from skewlab.registry import resolve
from skewlab.state.base import (
    Action,
    FeedInput,
    Phase,
    PolicySnapshot,
    Replay,
    Role,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
)
from skewlab.state.score import Level, ThresholdConfig

__all__ = [
    "POLICIES",
    "ActiveBackupConfig",
    "CheckpointingConfig",
    "PolicyConfig",
    "RestartConfig",
    "make_policy",
]

log = logging.getLogger(__name__)


def _elapsed(seconds: float, period: float) -> bool:
    """``seconds >= period``, forgiving float rounding of a clock stepped in fractions
    (20 steps of 0.05 s must count as 1 s, not 0.9999999999999999)."""
    return seconds >= period - 1e-9 * max(1.0, abs(period))


@dataclass(frozen=True)
class _Common:
    """Fields every policy shares."""

    thresholds: ThresholdConfig = field(default_factory=ThresholdConfig)
    start_instances: int = 2
    factor: int = 2
    """Instances multiply by this on scale-out (the seed doubles) and divide on scale-in."""
    min_instances: int = 1
    max_instances: int = 1024
    cooldown_s: float = 60.0
    """After a scale event: time for the new instances to drain the replay backlog."""
    scale_in: bool = True

    def _check(self) -> None:
        if not isinstance(self.thresholds, ThresholdConfig):
            raise ConfigError("thresholds must be a ThresholdConfig")
        if self.factor < 2:
            raise ConfigError(f"factor must be an int >= 2, got {self.factor!r}")
        if not 1 <= self.min_instances <= self.start_instances <= self.max_instances:
            raise ConfigError(
                "need 1 <= min_instances <= start_instances <= max_instances, got "
                f"{self.min_instances} / {self.start_instances} / {self.max_instances}"
            )
        if self.cooldown_s < 0:
            raise ConfigError(f"cooldown_s must be >= 0, got {self.cooldown_s}")


class _Policy:
    """Shared bookkeeping: instance ids, checkpoint ids, detector, replacement and take-over."""

    name: ClassVar[str] = ""

    def __init__(self, cfg: Any, clock: Clock, state: PolicySnapshot | None) -> None:
        self.cfg = cfg
        self.clock = clock
        self.detector = cfg.thresholds.build(None if state is None else state.detector)
        if state is None:
            n = cfg.start_instances
            self._phase = Phase.NORMAL
            self._active: tuple[int, ...] = tuple(range(n))
            self._pending: tuple[int, ...] = ()
            self._pending_ready = False
            self._next_instance = n
            self._next_cp = 0
            self._last_cp: int | None = None
            self._last_cp_at: float | None = None
            self._scaling_in = False
            self._last_event_at: float | None = None
        else:
            if not isinstance(state, PolicySnapshot):
                raise StateError(f"expected a PolicySnapshot, got {type(state).__name__}")
            self._phase, self._active = state.phase, state.active
            self._pending, self._pending_ready = state.pending, state.pending_ready
            self._next_instance, self._next_cp = state.next_instance, state.next_checkpoint
            self._last_cp, self._last_cp_at = state.last_checkpoint, state.last_checkpoint_at
            self._scaling_in = state.scaling_in
            self._last_event_at = state.last_event_at

    # ------------------------------------------------------------ read-only view

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def active(self) -> tuple[int, ...]:
        return self._active

    @property
    def pending(self) -> tuple[int, ...]:
        return self._pending

    def snapshot(self) -> PolicySnapshot:
        return PolicySnapshot(
            phase=self._phase,
            active=self._active,
            pending=self._pending,
            pending_ready=self._pending_ready,
            next_instance=self._next_instance,
            next_checkpoint=self._next_cp,
            last_checkpoint=self._last_cp,
            last_checkpoint_at=self._last_cp_at,
            detector=self.detector.snapshot(),
            scaling_in=self._scaling_in,
            last_event_at=self._last_event_at,
        )

    # ------------------------------------------------------------ helpers

    def _new_ids(self, n: int) -> tuple[int, ...]:
        ids = tuple(range(self._next_instance, self._next_instance + n))
        self._next_instance += n
        return ids

    def _target_count(self, out: bool) -> int:
        n = len(self._active)
        if out:
            return min(n * self.cfg.factor, self.cfg.max_instances)
        return max(math.ceil(n / self.cfg.factor), self.cfg.min_instances)

    def _cooling(self) -> bool:
        at = self._last_event_at
        return at is not None and not _elapsed(self.clock.now() - at, self.cfg.cooldown_s)

    def _checkpoint(self) -> TakeCheckpoint:
        cp = TakeCheckpoint(self._next_cp, self._active)
        self._last_cp, self._last_cp_at = self._next_cp, self.clock.now()
        self._next_cp += 1
        return cp

    def _replace(self, count: int, checkpoint: int | None, *, scaling_in: bool) -> list[Action]:
        """Start ``count`` replacements from ``checkpoint`` (or the live state) and feed them."""
        new = self._new_ids(count)
        self._pending, self._pending_ready, self._scaling_in = new, False, scaling_in
        self._phase = Phase.SCALING
        actions: list[Action] = [
            StartInstances(new, Role.REPLACEMENT),
            SplitState(checkpoint, self._active, new),
        ]
        if checkpoint is not None:
            actions.append(Replay(checkpoint, new))
        actions.append(FeedInput(new))
        log.info("%s: replacing %s with %s", self.name, self._active, new)
        return actions

    def _take_over(self) -> list[Action]:
        """Switch routing to the pending instances and stop the old ones; back to NORMAL."""
        old, new = self._active, self._pending
        self._active, self._pending, self._pending_ready = new, (), False
        self._phase, self._scaling_in = Phase.NORMAL, False
        self._last_event_at = self.clock.now()
        self.detector = self.cfg.thresholds.build()
        log.info("%s: %s took over from %s", self.name, new, old)
        return [SwitchRouting(old, new), StopInstances(old)]

    def _maybe_scale_in(self, level: Level) -> list[Action]:
        if (
            self.cfg.scale_in
            and level == Level.SCALE_IN
            and len(self._active) > self.cfg.min_instances
            and not self._cooling()
        ):
            return self._replace(self._target_count(out=False), None, scaling_in=True)
        return []

    def _check_ack(self, instances: tuple[int, ...]) -> bool:
        return bool(self._pending) and tuple(instances) == self._pending

    # ------------------------------------------------------------ events

    def observe(self, score: float, changed: float | None = None) -> list[Action]:
        """One measurement: the operator's score (max over its instances) and, optionally,
        the share of keys changed since the last checkpoint (as :meth:`on_state_changed`)."""
        actions = self._on_level(self.detector.observe(score))
        if changed is not None and not any(isinstance(a, TakeCheckpoint) for a in actions):
            actions += self.on_state_changed(changed)
        return actions

    def on_state_changed(self, fraction: float) -> list[Action]:
        """``fraction`` (0..1) of the operator's keys changed since the last checkpoint.

        The seed's "user-defined event" checkpoint trigger ("Checkpointing and
        scale out": "triggered at every checkpointing interval c, or after a
        user-defined event, for example, when the state has changed
        significantly"). Only the checkpointing policy acts on it, and only
        while alarmed and when ``change_fraction`` is set: a fraction at or above
        it takes a checkpoint now, before the interval is due. Compute the
        fraction with :func:`~skewlab.state.checkpoint.changed_share`.
        """
        if not 0.0 <= fraction <= 1.0:
            raise ConfigError(f"changed fraction must be in [0, 1], got {fraction!r}")
        return []

    def _on_level(self, level: Level) -> list[Action]:
        raise NotImplementedError

    def on_ready(self, instances: tuple[int, ...]) -> list[Action]:
        """The started ``instances`` hold their state (and, if replaying, have started)."""
        if self._check_ack(instances):
            self._pending_ready = True
        return []

    def on_caught_up(self, instances: tuple[int, ...]) -> list[Action]:
        """The outputs of ``instances`` agree with the primaries': replacements take over."""
        if self._check_ack(instances) and self._phase is Phase.SCALING:
            return self._take_over()
        return []

    def _ready_after_switch(self, instances: tuple[int, ...]) -> bool:
        """Instances routed to before they were up (restart; checkpointing with
        ``switch_at_start``) are ready: back to NORMAL, the cool-down and the
        detector start from here. False if ``instances`` are not such instances."""
        if not (
            self._check_ack(instances)
            and self._phase is Phase.SCALING
            and not self._scaling_in
            and self._active == self._pending
        ):
            return False
        self._pending, self._phase = (), Phase.NORMAL
        self._last_event_at = self.clock.now()
        self.detector = self.cfg.thresholds.build()
        return True


class _Checkpointing(_Policy):
    name = "checkpointing"

    def on_state_changed(self, fraction: float) -> list[Action]:
        super().on_state_changed(fraction)
        limit = self.cfg.change_fraction
        if self._phase is Phase.ALARMED and limit is not None and fraction >= limit:
            log.debug("%s: %.0f%% of the keys changed, checkpointing", self.name, 100 * fraction)
            return [self._checkpoint()]
        return []

    def _on_level(self, level: Level) -> list[Action]:
        cfg: CheckpointingConfig = self.cfg
        if self._phase is Phase.SCALING:
            return []
        if level == Level.SCALE_OUT and not self._cooling():
            count = self._target_count(out=True)
            if count > len(self._active):
                actions: list[Action] = []
                if (
                    self._last_cp is None
                    or self._phase is not Phase.ALARMED
                    or cfg.checkpoint_at_scale_out
                ):
                    actions.append(self._checkpoint())
                assert self._last_cp is not None
                actions += self._replace(count, self._last_cp, scaling_in=False)
                if cfg.switch_at_start:
                    actions += self._take_over()
                    self._pending, self._phase = self._active, Phase.SCALING  # until ready
                return actions
        if level >= Level.ALARMING:
            if self._phase is Phase.NORMAL:
                self._phase = Phase.ALARMED
                return [self._checkpoint()]
            due = self._last_cp_at is None or _elapsed(
                self.clock.now() - self._last_cp_at, cfg.interval_s
            )
            return [self._checkpoint()] if due else []
        self._phase = Phase.NORMAL
        return self._maybe_scale_in(level)

    def on_ready(self, instances: tuple[int, ...]) -> list[Action]:
        if self._ready_after_switch(instances):
            return []
        return super().on_ready(instances)


class _ActiveBackup(_Policy):
    name = "active-backup"

    def _on_level(self, level: Level) -> list[Action]:
        if self._phase is Phase.SCALING:
            return []
        if self._phase is Phase.NORMAL:
            if level >= Level.ALARMING:
                count = self._target_count(out=True)
                if count > len(self._active):
                    return self._start_secondaries(count) + self._on_level(level)
            return self._maybe_scale_in(level)
        # ALARMED: secondaries are running
        if level == Level.SCALE_OUT:
            if self._cooling():
                return []  # a take-over is a scale event: it waits for the cool-down
            if self._pending_ready:
                return self._take_over()
            self._phase = Phase.SCALING
            return []
        if level < Level.ALARMING:
            stopped = self._pending
            self._pending, self._pending_ready, self._phase = (), False, Phase.NORMAL
            log.info("%s: load fell below alarming, stopping secondaries %s", self.name, stopped)
            return [StopInstances(stopped)]
        return []

    def _start_secondaries(self, count: int) -> list[Action]:
        new = self._new_ids(count)
        self._pending, self._pending_ready, self._phase = new, False, Phase.ALARMED
        log.info("%s: alarming, starting secondaries %s", self.name, new)
        return [
            StartInstances(new, Role.SECONDARY),
            SplitState(None, self._active, new),
            FeedInput(new),
        ]

    def on_ready(self, instances: tuple[int, ...]) -> list[Action]:
        if not self._check_ack(instances):
            return []
        self._pending_ready = True
        if self._phase is Phase.SCALING and not self._scaling_in:
            return self._take_over()
        return []


class _Restart(_Policy):
    name = "restart"

    def _on_level(self, level: Level) -> list[Action]:
        cfg: RestartConfig = self.cfg
        actions: list[Action] = []
        if self._phase is not Phase.SCALING and (
            self._last_cp_at is None
            or _elapsed(self.clock.now() - self._last_cp_at, cfg.interval_s)
        ):
            actions.append(self._checkpoint())
        if self._phase is Phase.SCALING:
            return actions
        if level == Level.SCALE_OUT and not self._cooling():
            count = self._target_count(out=True)
            if count > len(self._active):
                assert self._last_cp is not None
                return actions + self._restart(count, self._last_cp)
        return actions + self._maybe_scale_in(level)

    def _restart(self, count: int, checkpoint: int) -> list[Action]:
        """Storm-like: stop everything, start more instances from the checkpoint, replay, route."""
        old, new = self._active, self._new_ids(count)
        self._active, self._pending, self._pending_ready = new, new, False
        self._phase = Phase.SCALING
        self._last_event_at = self.clock.now()
        log.info("%s: restarting %s as %s from checkpoint %d", self.name, old, new, checkpoint)
        return [
            StopInstances(old),
            StartInstances(new, Role.PRIMARY),
            SplitState(checkpoint, old, new),
            Replay(checkpoint, new),
            SwitchRouting(old, new),
        ]

    def on_ready(self, instances: tuple[int, ...]) -> list[Action]:
        if self._ready_after_switch(instances):
            return []
        return super().on_ready(instances)


@dataclass(frozen=True)
class CheckpointingConfig(_Common):
    """Checkpoint from alarming every ``interval_s`` (seed's ``c``) or on ``change_fraction``.

    ``change_fraction``: when set, a share of changed keys at or above it
    (reported through ``on_state_changed``) takes a checkpoint before the
    interval is due; ``None`` checkpoints on the interval only.
    """

    name: ClassVar[str] = "checkpointing"
    interval_s: float = 10.0
    change_fraction: float | None = None
    checkpoint_at_scale_out: bool = True
    """Take one more checkpoint at the scale-out decision and restore the
    replacements from it (the seed's "user-defined event" trigger, the decision
    being the event; a rescale from a fresh savepoint, as Flink does): the
    replay after tau is then only what the operator processed since the decision.
    False: restore from the newest interval checkpoint, up to ``interval_s`` old."""
    switch_at_start: bool = False
    """True: switch routing at the decision, with the start of the replacements (the
    seed's Figure 8: "At the same time, also partition input streams and route the
    partitioned streams to new nodes"): the old instance stops the moved keys at
    once and the replacements replay from tau only up to there, so the take-over is
    sooner but the moved keys wait for the replacements' start and restore.
    False (default: Algorithm 3's order, and the seed's Fig. 14 claim that
    throughput holds during scale-out): switch once the replacements are ready
    (``on_ready``, ``on_caught_up``) while the old instance processes on."""

    def __post_init__(self) -> None:
        self._check()
        if not self.interval_s > 0:
            raise ConfigError(f"interval_s must be > 0, got {self.interval_s}")
        if self.change_fraction is not None and not 0 < self.change_fraction <= 1:
            raise ConfigError(f"change_fraction must be in (0, 1], got {self.change_fraction}")
        for name in ("checkpoint_at_scale_out", "switch_at_start"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")

    def build(self, state: PolicySnapshot | None = None, clock: Clock | None = None) -> _Policy:
        """The checkpointing policy (seed Algorithm 3) of this config, resumed from ``state``
        if given (else fresh at NORMAL), on ``clock`` (default: the system clock)."""
        return _Checkpointing(self, clock or SystemClock(), state)


@dataclass(frozen=True)
class ActiveBackupConfig(_Common):
    """Secondaries from alarming, take-over at scale_out."""

    name: ClassVar[str] = "active-backup"

    def __post_init__(self) -> None:
        self._check()

    def build(self, state: PolicySnapshot | None = None, clock: Clock | None = None) -> _Policy:
        """The active-backup policy (seed Algorithm 2) of this config, resumed from ``state``
        if given (else fresh at NORMAL), on ``clock`` (default: the system clock)."""
        return _ActiveBackup(self, clock or SystemClock(), state)


@dataclass(frozen=True)
class RestartConfig(_Common):
    """Storm-like baseline: checkpoint every ``interval_s``; stop, restore, restart at scale_out."""

    name: ClassVar[str] = "restart"
    interval_s: float = 1.0

    def __post_init__(self) -> None:
        self._check()
        if not self.interval_s > 0:
            raise ConfigError(f"interval_s must be > 0, got {self.interval_s}")

    def build(self, state: PolicySnapshot | None = None, clock: Clock | None = None) -> _Policy:
        """The restart-baseline policy of this config, resumed from ``state`` if given (else
        fresh at NORMAL), on ``clock`` (default: the system clock)."""
        return _Restart(self, clock or SystemClock(), state)


PolicyConfig = CheckpointingConfig | ActiveBackupConfig | RestartConfig

POLICIES: dict[str, type[CheckpointingConfig] | type[ActiveBackupConfig] | type[RestartConfig]] = {
    "checkpointing": CheckpointingConfig,
    "active-backup": ActiveBackupConfig,
    "restart": RestartConfig,
}


def make_policy(name: str, **params: Any) -> PolicyConfig:
    """The config of policy ``name`` with ``params``; an unknown name lists the valid ones."""
    cls = resolve(POLICIES, name, "scale-out policy")
    try:
        return cls(**params)
    except TypeError as exc:
        raise ConfigError(f"scale-out policy {name!r}: {exc}") from None
