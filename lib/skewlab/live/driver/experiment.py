"""The settings of one live run: :class:`ExperimentSettings`, its error and its run ids.

The CLI, the DAG, the benches and the tests build an :class:`ExperimentSettings`; it is
validated once, here (bounds, allowed names, the grouping and policy it names, the
workload's length), and every process's settings derive from its
:class:`~skewlab.spec.RunSpec` (:mod:`skewlab.live.driver.settings`). Running it:
:func:`skewlab.live.driver.run.run_experiment`. Settings reference: docs/run-settings.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import make_grouping
from skewlab.live.driver.launch import Procs
from skewlab.live.driver.settings import state_manager_settings
from skewlab.rebalance import make_rebalancer
from skewlab.spec import (
    DEFAULTS,
    SETTINGS,
    RunSpec,
    default,
    grouping_params,
    n_events,
    run_s,
    time_scale,
)
from skewlab.workload.ramp import parse_ramp
from skewlab.workload.spec import parse_workload
from skewlab.workload.trace import check_events

__all__ = ["BOOTSTRAP_ENV", "ExperimentError", "ExperimentSettings", "Hook", "new_run_id"]

log = logging.getLogger(__name__)


class ExperimentError(SkewlabError):
    """A part of the live run failed; the message says which and where its log is."""


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
        check_events(parse_workload(self.workload, seed=self.seed), self.n_events)

    @cached_property
    def spec(self) -> RunSpec:
        """These settings as a :class:`~skewlab.spec.RunSpec` tree (what every process's
        settings are derived from: :mod:`skewlab.live.driver.settings`)."""
        return RunSpec.of({f: getattr(self, f) for f in self.__dataclass_fields__})

    @property
    def n_events(self) -> int:
        """:func:`skewlab.live.driver.settings.n_events` of the workload."""
        return n_events(self.spec.workload)

    @property
    def run_s(self) -> float:
        """Event time the run spans: its events at ``rate``."""
        return run_s(self.spec)

    @property
    def grouping_params(self) -> dict[str, Any]:
        """The grouping params the route job uses (DKG's timings scaled to :attr:`run_s`)."""
        return grouping_params(self.spec)

    @property
    def time_scale(self) -> float:
        """The factor DKG's timings were scaled by (1: as in the seed)."""
        return time_scale(self.spec)

    @property
    def message_sets(self) -> bool:
        """Whether keys move between workers by message sets (rebalance or scale-out)."""
        return self.spec.message_sets


Hook = Callable[[int, Procs], None]
"""Called with the number of events produced so far (after each produce chunk)."""


BOOTSTRAP_ENV = "SKEWLAB_KAFKA_BOOTSTRAP"
"""A Kafka to use instead of the embedded broker (``--bootstrap`` wins)."""


def new_run_id(strategy: str) -> str:
    """A new run id: ``<strategy>-<UTC time>-<6 hex>`` (unique, sorts by start)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{strategy}-{stamp}-{uuid.uuid4().hex[:6]}"
