"""The validated settings of one live run and of its state manager, at the bottom.

:class:`ExperimentSettings` is the flat settings of one live run (the CLI, the DAG,
the benches and the tests build it), validated once, here: bounds and allowed values
(:data:`~skewlab.spec.SETTINGS`), the load ramp, scale-out / rebalance only on KEY, the
rebalancer, the grouping, the workload's length and the state manager's settings.
``s.spec`` is the same settings as a :class:`~skewlab.spec.RunSpec` tree, from which
every process's settings derive (:mod:`skewlab.live.driver.settings`).
:class:`StateManagerSettings` (built by :func:`state_manager_settings`) configures the
scale-out state manager (:mod:`skewlab.control.scaleout.manager`). A core module: it
imports only core modules, so commands and DAGs import it at module level. Running
a run: :func:`skewlab.live.driver.run.run_experiment`. Reference: docs/run-settings.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from skewlab.errors import ConfigError
from skewlab.grouping import make_grouping
from skewlab.rebalance import make_rebalancer
from skewlab.spec import (
    DEFAULTS,
    SCALE_OUT_LIBRARY,
    SETTINGS,
    ControlSpec,
    GroupingSpec,
    NoControl,
    RebalanceControl,
    RunSpec,
    RuntimeSpec,
    ScaleOutControl,
    WorkloadSpec,
    default,
    n_events,
)
from skewlab.state.policies import make_policy
from skewlab.state.score import ThresholdConfig
from skewlab.workload.ramp import parse_ramp
from skewlab.workload.spec import parse_workload
from skewlab.workload.trace import check_events

__all__ = ["POLICIES", "ExperimentSettings", "StateManagerSettings", "state_manager_settings"]

POLICIES = dict(SCALE_OUT_LIBRARY)
"""The state manager's ``--scale-out`` names -> library policy names."""


@dataclass(frozen=True)
class ExperimentSettings:
    """The parameters of one live run (the CLI and the DAG build this)."""

    strategy: str = DEFAULTS["strategy"]
    workers: int = DEFAULTS["workers"]
    partitions: int = DEFAULTS["partitions"]
    workload: str = DEFAULTS["workload"]
    rate: float = DEFAULTS["rate"]
    duration_s: float = DEFAULTS["duration_s"]
    events: int | None = DEFAULTS["events"]
    service_us: float = DEFAULTS["service_us"]
    window_s: float = DEFAULTS["window_s"]
    payload_bytes: int = DEFAULTS["payload_bytes"]
    seed: int = DEFAULTS["seed"]
    client: str = DEFAULTS["client"]
    home: str = DEFAULTS["home"]
    bootstrap: str | None = DEFAULTS["bootstrap"]
    trigger_s: float = DEFAULTS["trigger_s"]
    max_events_per_trigger: int | None = DEFAULTS["max_events_per_trigger"]
    flush_interval_s: float = DEFAULTS["flush_interval_s"]
    stall_s: float = DEFAULTS["stall_s"]
    """A ready worker without progress this long while records wait is hung (restarted)."""
    strategy_params: dict[str, Any] = field(default_factory=lambda: default("strategy_params"))
    mlflow: bool = DEFAULTS["mlflow"]
    experiment: str | None = DEFAULTS["experiment"]
    keep_topics: bool = DEFAULTS["keep_topics"]
    quality: bool = DEFAULTS["quality"]
    """Run the Great Expectations suites on the run's tables (skewlab.quality)."""
    rebalance: str | None = DEFAULTS["rebalance"]
    rebalance_interval_s: float = DEFAULTS["rebalance_interval_s"]
    rebalance_lead_s: float = DEFAULTS["rebalance_lead_s"]
    rebalance_params: dict[str, Any] = field(default_factory=lambda: default("rebalance_params"))
    scale_out: str | None = DEFAULTS["scale_out"]
    """Scale-out policy of the state manager: checkpoint | active-backup | restart."""
    scale_out_interval_s: float = DEFAULTS["scale_out_interval_s"]
    scale_out_lead_s: float = DEFAULTS["scale_out_lead_s"]
    max_instances: int = DEFAULTS["max_instances"]
    """Instances per scaled worker at most (spare partitions of routed: W x (this - 1))."""
    scale_out_params: dict[str, Any] = field(default_factory=lambda: default("scale_out_params"))
    load_ramp: str | None = DEFAULTS["load_ramp"]
    """``FACTORx/INTERVALs``: the rate multiplies by FACTOR every INTERVAL seconds."""

    def __post_init__(self) -> None:
        for setting in SETTINGS:  # bounds and allowed values, as declared
            setting.check(getattr(self, setting.name))
        if self.load_ramp is not None:
            parse_ramp(self.load_ramp)
        if self.scale_out is not None:
            if self.rebalance is not None:
                raise ConfigError("--scale-out and --rebalance both write assignments; pick one")
            if self.strategy != "key":
                raise ConfigError(
                    f"--scale-out runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            state_manager_settings(self.spec, "check", "")
        if self.rebalance is not None:
            if self.strategy != "key":
                raise ConfigError(
                    f"--rebalance runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            make_rebalancer(self.rebalance, workers=self.workers, **self.rebalance_params)
        if "workers" in self.strategy_params:  # one value, one place: the workers setting
            raise ConfigError("strategy_params may not hold workers; set workers instead")
        make_grouping(self.strategy, workers=self.workers, **self.strategy_params)
        check_events(parse_workload(self.workload, seed=self.seed), n_events(self.spec.workload))

    @cached_property
    def spec(self) -> RunSpec:
        """These settings as a :class:`~skewlab.spec.RunSpec` tree (what every process's
        settings are derived from: :mod:`skewlab.live.driver.settings`); the one way a
        ``RunSpec`` is built."""
        return _tree(self)


def _tree(s: ExperimentSettings) -> RunSpec:
    """The :class:`~skewlab.spec.RunSpec` of validated settings ``s``: each setting goes
    to the part :data:`~skewlab.spec.SETTINGS` names, the switches to one control part."""
    control: ControlSpec = NoControl()
    if s.rebalance is not None:
        control = RebalanceControl(
            s.rebalance, s.rebalance_interval_s, s.rebalance_lead_s, dict(s.rebalance_params)
        )
    elif s.scale_out is not None:
        control = ScaleOutControl(
            s.scale_out, s.scale_out_interval_s, s.scale_out_lead_s, s.max_instances,
            dict(s.scale_out_params),
        )  # fmt: skip

    def part(kind: type, p: str) -> Any:
        return kind(**{x.name: getattr(s, x.name) for x in SETTINGS if x.part == p})

    return RunSpec(
        GroupingSpec(s.strategy, s.workers, dict(s.strategy_params)),
        part(WorkloadSpec, "workload"),
        part(RuntimeSpec, "runtime"),
        control,
    )


@dataclass(frozen=True)
class StateManagerSettings:
    """The live state manager's configuration (:mod:`skewlab.control.scaleout.manager`),
    validated once: its ``policy_config()`` builds the policy of :mod:`skewlab.state.policies`."""

    run_id: str
    delta_root: str
    policy: str
    workers: int
    service_us: float
    max_instances: int = DEFAULTS["max_instances"]
    interval_s: float = DEFAULTS["scale_out_interval_s"]
    lead_s: float = DEFAULTS["scale_out_lead_s"]
    signal_window_s: float = 5.0
    """Input / processed rates are measured over this much time (the state manager's step 1,
    :mod:`skewlab.control.scaleout.manager`)."""
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
        """Longest start-up before the policies observe anyway
        (:mod:`skewlab.control.scaleout.manager`)."""
        value = self.params.get("startup_s", 20.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"scale-out startup_s must be a number of seconds, got {value!r}")
        return float(value)

    @property
    def settle_s(self) -> float:
        """Longest the manager keeps deciding after the input is produced and ``routed``
        stopped growing (the manager's run loop)."""
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


def state_manager_settings(
    spec: RunSpec, run_id: str, delta_root: str
) -> StateManagerSettings | None:
    """The state manager's settings of a scale-out run (None: the run does not scale out)."""
    c = spec.control
    if not isinstance(c, ScaleOutControl):
        return None
    return StateManagerSettings(
        run_id=run_id,
        delta_root=delta_root,
        policy=c.policy,
        workers=spec.grouping.workers,
        service_us=spec.runtime.service_us,
        max_instances=c.max_instances,
        interval_s=c.interval_s,
        lead_s=c.lead_s,
        params=dict(c.params),
    )
