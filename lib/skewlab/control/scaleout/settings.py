"""What the live state manager is lent and what it keeps per operator: processes, groups.

:class:`Processes` (how the manager starts and stops worker processes: lent by the run's
driver), :class:`Group` (one operator: its policy, logical -> physical instances,
fairness). The manager's settings are core: :class:`skewlab.runsettings.StateManagerSettings`.
Details: docs/control.md, section ``skewlab.control.scaleout.manager``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skewlab.state.fairness import FairnessTracker


@dataclass(frozen=True)
class Processes:
    """What the experiment lends the manager: start / stop / readiness of instance ``j``."""

    start: Callable[[int], None]
    stop: Callable[[int], None]
    ready: Callable[[int], float | None]
    """Wall time instance ``j`` became ready to read (restored its state), or None."""


@dataclass
class Group:
    """One scaled operator: the policy and its logical -> physical instance map."""

    g: int
    policy: Any
    phys: dict[int, int]
    active: list[int]
    """Partitions holding the group's keys, in hash-part order."""
    spare: list[int]
    fair: FairnessTracker = field(default_factory=FairnessTracker)
    caught_up_at: float | None = None
    """When the instance first caught up with its input (start-up, module doc)."""
    started: bool = False
    """Past start-up: the policy observes."""
    bottlenecked: bool = False
    event: dict[str, Any] | None = None
