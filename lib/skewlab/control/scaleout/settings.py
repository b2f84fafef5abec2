"""The state manager's configuration and what it is lent: settings, processes, groups.

:class:`StateManagerSettings` (frozen, validated once; ``policy_config()`` builds the
policy of :mod:`skewlab.state.policies`), :class:`Processes` (how the manager starts and
stops worker processes: lent by the run's driver), :class:`Group` (one operator: its
policy, logical -> physical instances, fairness).
Details: docs/control.md, section ``skewlab.control.scaleout.manager``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from skewlab.errors import ConfigError
from skewlab.spec import DEFAULTS, SCALE_OUT_LIBRARY
from skewlab.state.fairness import FairnessTracker
from skewlab.state.policies import make_policy
from skewlab.state.score import ThresholdConfig

POLICIES = dict(SCALE_OUT_LIBRARY)
"""``skewlab run --scale-out`` names -> library policy names."""


@dataclass(frozen=True)
class StateManagerSettings:
    """The loop's configuration (validated at the edge)."""

    run_id: str
    delta_root: str
    policy: str
    workers: int
    service_us: float
    max_instances: int = DEFAULTS["max_instances"]
    interval_s: float = DEFAULTS["scale_out_interval_s"]
    lead_s: float = DEFAULTS["scale_out_lead_s"]
    signal_window_s: float = 5.0
    """Input / processed rates are measured over this much time (step 1)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Threshold fields (alarming=45...), cooldown_s, checkpoint interval_s, startup_s."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(
                f"scale-out must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )
        if not self.service_us > 0:
            raise ConfigError(
                f"--scale-out needs --service-us > 0 (capacity), got {self.service_us}"
            )
        if not 2 <= self.max_instances <= 16:
            raise ConfigError(
                f"max instances per operator must be in 2..16, got {self.max_instances}"
            )
        if not self.interval_s > 0 or self.lead_s < 0:
            raise ConfigError(f"interval must be > 0 s and lead >= 0 s, got {self.interval_s}")
        if not self.startup_s >= 0:
            raise ConfigError(f"scale-out startup_s must be >= 0, got {self.startup_s}")
        _ = self.settle_s
        self.policy_config()

    @property
    def startup_s(self) -> float:
        """Longest start-up before the policies observe anyway (module doc)."""
        value = self.params.get("startup_s", 20.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"scale-out startup_s must be a number of seconds, got {value!r}")
        return float(value)

    @property
    def settle_s(self) -> float:
        """Longest the manager keeps deciding after the input is produced and ``routed``
        stopped growing (:meth:`run`)."""
        value = self.params.get("settle_s", 120.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"scale-out settle_s must be a number of seconds >= 0, got {value!r}")
        return float(value)

    @property
    def partitions(self) -> int:
        """Partitions of ``routed``: the W groups plus their spare instances."""
        return self.workers * self.max_instances

    def spares(self, group: int) -> list[int]:
        """The ``routed`` partitions of ``group``'s spare instances: ``max_instances - 1``
        of them, numbered after the W hash workers."""
        m = self.max_instances - 1
        return list(range(self.workers + group * m, self.workers + (group + 1) * m))

    def policy_config(self) -> Any:
        """The scale-out policy config of :attr:`policy` built from ``params`` (threshold
        fields to its ``ThresholdConfig``, the rest as policy keywords; one instance at
        start, up to ``max_instances``, no scale-in).
        Raises :class:`~skewlab.errors.ConfigError` on an unknown keyword."""
        th_names = set(ThresholdConfig.__dataclass_fields__)
        th = {k: v for k, v in self.params.items() if k in th_names}
        local = {"startup_s", "settle_s"}
        rest = {k: v for k, v in self.params.items() if k not in th_names | local}
        kw: dict[str, Any] = {"cooldown_s": 10.0, **rest}
        if self.policy == "active-backup":
            kw.pop("interval_s", None)
        return make_policy(
            POLICIES[self.policy],
            thresholds=ThresholdConfig(**th),
            start_instances=1,
            max_instances=self.max_instances,
            scale_in=False,
            **kw,
        )


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
