"""What scale-out policies emit and what they are told: actions and acknowledgements as data.

A policy (:mod:`skewlab.state.policies`) is a pure state machine: it reads a
bottleneck score per measurement (:meth:`ScaleOutPolicy.observe`) and the
executor's acknowledgements (:meth:`ScaleOutPolicy.on_ready`,
:meth:`ScaleOutPolicy.on_caught_up`) and returns the actions below. The
simulator (:mod:`skewlab.sim.scaleout`) and a live state manager execute the
same actions: start / stop instances, checkpoint, split state, replay, feed
input, switch routing. Instance ids are small ints the policy allocates.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = [
    "Action",
    "FeedInput",
    "Phase",
    "PolicySnapshot",
    "Replay",
    "Role",
    "ScaleOutPolicy",
    "SplitState",
    "StartInstances",
    "StopInstances",
    "SwitchRouting",
    "TakeCheckpoint",
]


class Role(enum.Enum):
    """What a started instance is for; :class:`StartInstances` carries it."""

    PRIMARY = "primary"
    """Takes the operator's input and its outputs go downstream."""
    SECONDARY = "secondary"
    """Active backup: fed its part of the input, outputs not connected."""
    REPLACEMENT = "replacement"
    """Started to replace the current instances (checkpoint restore, scale-in)."""


class Phase(enum.Enum):
    """Where a policy is in its lifecycle (the same names for every policy)."""

    NORMAL = "normal"
    ALARMED = "alarmed"
    """Checkpointing from alarming, or secondaries running (active backup)."""
    SCALING = "scaling"
    """Replacement instances started; waiting for them to be ready / caught up."""


@dataclass(frozen=True)
class StartInstances:
    """Start ``instances`` (empty, not yet fed) in ``role``."""

    instances: tuple[int, ...]
    role: Role


@dataclass(frozen=True)
class StopInstances:
    """Stop ``instances`` and release their resources."""

    instances: tuple[int, ...]


@dataclass(frozen=True)
class TakeCheckpoint:
    """Save ``(theta, tau, beta)`` of every instance in ``instances`` as ``checkpoint``."""

    checkpoint: int
    instances: tuple[int, ...]


@dataclass(frozen=True)
class SplitState:
    """Give each target its hash part of the sources' state (compose, then decompose).

    ``checkpoint`` is the saved state to read (checkpointing, restart); ``None``
    means copy the sources' live state now (active backup, scale-in), at the
    ``tau`` of that moment.
    """

    checkpoint: int | None
    sources: tuple[int, ...]
    targets: tuple[int, ...]


@dataclass(frozen=True)
class Replay:
    """Send ``beta`` of ``checkpoint`` and the input after its ``tau`` to each key's owner."""

    checkpoint: int
    targets: tuple[int, ...]


@dataclass(frozen=True)
class FeedInput:
    """Route each live input tuple also to the target that owns its key (outputs held back)."""

    targets: tuple[int, ...]


@dataclass(frozen=True)
class SwitchRouting:
    """``old`` stop taking input and their outputs are cut; ``new`` become the primaries."""

    old: tuple[int, ...]
    new: tuple[int, ...]


Action = (
    StartInstances
    | StopInstances
    | TakeCheckpoint
    | SplitState
    | Replay
    | FeedInput
    | SwitchRouting
)


@dataclass(frozen=True)
class PolicySnapshot:
    """Everything a restarted state manager needs to continue a policy (immutable, picklable)."""

    phase: Phase
    active: tuple[int, ...]
    pending: tuple[int, ...]
    pending_ready: bool
    next_instance: int
    next_checkpoint: int
    last_checkpoint: int | None
    last_checkpoint_at: float | None
    detector: tuple[int, int, int]
    scaling_in: bool = False
    last_event_at: float | None = None
    """When the last scale event ended (start of the cool-down)."""


@runtime_checkable
class ScaleOutPolicy(Protocol):
    """A scale-out policy built from its config; see the module doc."""

    name: str

    @property
    def phase(self) -> Phase:
        """Where the policy is now: NORMAL, ALARMED or SCALING."""
        ...

    @property
    def active(self) -> tuple[int, ...]:
        """Ids of the instances that take the input now (the primaries)."""
        ...

    def observe(self, score: float, changed: float | None = None) -> list[Action]:
        """Feed one measurement: ``score`` is the operator's bottleneck score (max over its
        instances), ``changed`` optionally the share of keys changed since the last
        checkpoint (as :meth:`on_state_changed`). Returns the actions to execute, in order.
        """
        ...

    def on_state_changed(self, fraction: float) -> list[Action]:
        """``fraction`` (0..1) of the keys changed since the last checkpoint."""
        ...

    def on_ready(self, instances: tuple[int, ...]) -> list[Action]:
        """The started ``instances`` hold their state; an acknowledgement for any other
        set than the pending one is ignored. Returns the actions it unblocks (may be empty).
        """
        ...

    def on_caught_up(self, instances: tuple[int, ...]) -> list[Action]:
        """The outputs of ``instances`` agree with the primaries'; while SCALING the
        pending instances take over (:class:`SwitchRouting`, then :class:`StopInstances`).
        """
        ...

    def snapshot(self) -> PolicySnapshot:
        """An immutable copy of the policy's state; ``build(state=...)`` resumes from it."""
        ...
