"""The settings of one grouping run, each declared once, and the run's spec as a tree.

:data:`SETTINGS` is the one declaration of every setting of a live grouping
run: its default, its type and bounds, its allowed values, its CLI flag and
its DAG param. The CLI's flags (:mod:`skewlab.commands.run`), the experiment
DAG's form (:mod:`skewlab.orchestration.params`) and the defaults of
:class:`~skewlab.runsettings.ExperimentSettings` are derived from it.
:class:`RunSpec` groups a run's settings into small frozen parts (grouping,
workload, runtime and one control part).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from skewlab.errors import SettingError
from skewlab.grouping import GROUPING_NAMES
from skewlab.rebalance import REBALANCER_NAMES
from skewlab.workload.ramp import parse_ramp, ramp_events
from skewlab.workload.spec import WORKLOAD_NAMES

__all__ = [
    "AUTOSCALE_DEFAULTS",
    "AUTOSCALE_SETTINGS",
    "CONTROL_KINDS",
    "DEFAULTS",
    "DKG_TIMINGS",
    "REBALANCE_POLICIES",
    "SCALE_OUT_LIBRARY",
    "SCALE_OUT_POLICIES",
    "SETTINGS",
    "AutoscaleControl",
    "ControlSpec",
    "GroupingSpec",
    "NoControl",
    "RebalanceControl",
    "RunSpec",
    "RuntimeSpec",
    "ScaleOutControl",
    "Setting",
    "WorkloadSpec",
    "default",
    "grouping_params",
    "n_events",
    "run_s",
    "scaled_grouping_params",
    "setting",
    "time_scale",
]

Kind = Literal["string", "integer", "number", "boolean", "object"]
Part = Literal["grouping", "workload", "runtime", "rebalance", "scale-out", "autoscale"]

REBALANCE_POLICIES: tuple[str, ...] = tuple(n for n in REBALANCER_NAMES if n != "none")
"""The rebalance policies a live run (and the scheduled control step) runs."""
SCALE_OUT_POLICIES: tuple[str, ...] = ("checkpoint", "active-backup", "restart")
"""The scale-out policies of a live run, as ``--scale-out`` names them."""
SCALE_OUT_LIBRARY: Mapping[str, str] = MappingProxyType(
    dict(zip(SCALE_OUT_POLICIES, ("checkpointing", "active-backup", "restart"), strict=True))
)
"""``--scale-out`` names -> :data:`skewlab.state.policies.POLICIES` names."""
CLIENTS: tuple[str, ...] = ("confluent", "kafka-python")


@dataclass(frozen=True)
class Setting:
    """One setting: the :class:`ExperimentSettings` field ``name`` and where it shows.

    ``flag`` is the CLI flag (``None``: not on the CLI), ``param`` the DAG param
    (``None``: not on the form). ``minimum`` / ``exclusive_minimum`` /
    ``maximum`` bound a number; ``choices`` lists the allowed strings (a switch
    is off with ``None``). ``repeat``: the flag is given as ``NAME=VALUE``
    once per key of an object setting.
    """

    name: str
    part: Part
    default: Any
    kind: Kind
    help: str
    flag: str | None = None
    param: str | None = None
    minimum: float | None = None
    exclusive_minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] | None = None
    nullable: bool = False
    repeat: bool = False

    def allowed(self) -> str:
        """The values allowed, in words: ``one of a, b``, ``in 1..64``, ``> 0``..."""
        if self.choices is not None:
            return "one of " + ", ".join(self.choices)
        low, excl, high = self.minimum, self.exclusive_minimum, self.maximum
        if excl is not None:
            return f"in ({excl:g}, {high:g}]" if high is not None else f"> {excl:g}"
        if low is not None:
            return f"in {low:g}..{high:g}" if high is not None else f">= {low:g}"
        return f"<= {high:g}" if high is not None else f"a {self.kind}"

    def check(self, value: Any) -> None:
        """Raise a one-line :class:`~skewlab.errors.SettingError` unless ``value`` is one
        of :attr:`choices` and within the bounds (``None``: only when :attr:`nullable`)."""
        if value is None and self.nullable:
            return
        ok = value is not None
        if ok and self.choices is not None:
            ok = value in self.choices
        elif ok and self.kind in ("integer", "number"):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and math.isfinite(value)
            ok = ok and (self.minimum is None or value >= self.minimum)
            ok = ok and (self.maximum is None or value <= self.maximum)
            ok = ok and (self.exclusive_minimum is None or value > self.exclusive_minimum)
        if not ok:
            raise SettingError(self.name, f"must be {self.allowed()}, got {value!r}", self.flag)


def _s(name: str, part: Part, default: Any, kind: Kind, help: str, **kw: Any) -> Setting:
    return Setting(name, part, default, kind, help, **kw)


SETTINGS: tuple[Setting, ...] = (
    _s("strategy", "grouping", "dkg", "string", f"grouping: {', '.join(GROUPING_NAMES)}",
       flag="--strategy", param="strategy"),
    _s("strategy_params", "grouping", {}, "object",
       "grouping parameter, e.g. warmup=5 or d_max=8 (repeatable; names checked)",
       flag="--strategy-param", param="strategy_params", repeat=True),
    _s("workers", "grouping", 4, "integer", "W, the number of workers", flag="--workers",
       param="workers", minimum=1, maximum=64),
    _s("partitions", "workload", 4, "integer", "partitions of events = splitters",
       flag="--partitions", param="partitions", minimum=1, maximum=64),
    _s("workload", "workload", "country:R80", "string",
       f"workload spec KIND[:ARGS], KIND one of {', '.join(WORKLOAD_NAMES)}; e.g. "
       "zipf:s=1.1,v=2.72, country:R80, trace:/path/events.csv",
       flag="--workload", param="workload"),
    _s("rate", "workload", 5_000.0, "number", "events/s", flag="--rate", param="rate",
       exclusive_minimum=0),
    _s("duration_s", "workload", 20.0, "number", "seconds", flag="--duration",
       param="duration", exclusive_minimum=0),
    _s("events", "workload", None, "integer", "event count (instead of rate x duration)",
       flag="--events", minimum=1, nullable=True),
    _s("payload_bytes", "workload", 100, "integer", "event size", flag="--payload-bytes"),
    _s("seed", "workload", 1, "integer", "workload seed", flag="--seed", param="seed",
       minimum=0),
    _s("load_ramp", "workload", None, "string",
       "rate ramp, e.g. 2x/500s (from --rate)", flag="--load-ramp",
       nullable=True),
    _s("service_us", "runtime", 0.0, "number", "per-event processing cost (busy us)",
       flag="--service-us", param="service_us", minimum=0),
    _s("window_s", "runtime", 5.0, "number", "window in s (the DKG tick)",
       flag="--window", param="window", exclusive_minimum=0),
    _s("client", "runtime", "confluent", "string", "Kafka client", flag="--client",
       choices=CLIENTS),
    _s("home", "runtime", ".skewlab", "string",
       "data directory (default: $SKEWLAB_HOME, else ./.skewlab)", flag="--home"),
    _s("bootstrap", "runtime", None, "string",
       "use this Kafka instead of the embedded broker", flag="--bootstrap", nullable=True),
    _s("trigger_s", "runtime", 0.5, "number",
       "micro-batch interval s (lower: less latency at moderate load; no effect on "
       "throughput once batches run back to back; docs/throughput.md)", flag="--trigger",
       exclusive_minimum=0),
    _s("max_events_per_trigger", "runtime", None, "integer",
       "cap per batch (none: largest batches, most throughput under a backlog)",
       flag="--max-events-per-trigger", minimum=1, nullable=True),
    _s("flush_interval_s", "runtime", 1.0, "number", "s between worker flushes",
       exclusive_minimum=0),
    _s("stall_s", "runtime", 15.0, "number",
       "s a ready worker may make no progress while records wait before it is killed and "
       "restarted as hung", flag="--stall-s", exclusive_minimum=0, maximum=3600),
    _s("mlflow", "runtime", True, "boolean", "do not log to MLflow", flag="--no-mlflow"),
    _s("experiment", "runtime", None, "string", "MLflow experiment", nullable=True),
    _s("keep_topics", "runtime", False, "boolean", "keep the run's topics"),
    _s("quality", "runtime", True, "boolean", "skip the Great Expectations suites",
       flag="--no-quality"),
    _s("rebalance", "rebalance", None, "string",
       "move hot keys with this policy (needs --strategy key)", flag="--rebalance",
       param="rebalance", choices=REBALANCE_POLICIES, nullable=True),
    _s("rebalance_interval_s", "rebalance", 10.0, "number", "s between decisions",
       flag="--rebalance-interval", param="rebalance_interval", exclusive_minimum=0),
    _s("rebalance_lead_s", "rebalance", 1.0, "number",
       "a new assignments version routes from its write time + this lead", minimum=0),
    _s("rebalance_params", "rebalance", {}, "object",
       "policy parameter, e.g. threshold=0.05 or theta=15 (repeatable)",
       flag="--rebalance-param", param="rebalance_params", repeat=True),
    _s("scale_out", "scale-out", None, "string",
       "scale overloaded workers out with this policy (needs --strategy key, --service-us)",
       flag="--scale-out", param="scale_out", choices=SCALE_OUT_POLICIES, nullable=True),
    _s("scale_out_interval_s", "scale-out", 1.0, "number", "s between scores",
       flag="--scale-out-interval", param="scale_out_interval", exclusive_minimum=0),
    _s("scale_out_lead_s", "scale-out", 0.5, "number",
       "a routing switch takes effect this long after its decision", minimum=0),
    _s("max_instances", "scale-out", 2, "integer", "instances per worker at most",
       flag="--max-instances", param="max_instances", minimum=2, maximum=16),
    _s("scale_out_params", "scale-out", {}, "object",
       "threshold / policy parameter, e.g. alarming=40 or cooldown_s=20 (repeatable)",
       flag="--scale-out-param", param="scale_out_params", repeat=True),
)  # fmt: skip
"""Every setting of a grouping run, in CLI order."""

_BY_NAME = {s.name: s for s in SETTINGS}

DEFAULTS: Mapping[str, Any] = MappingProxyType({s.name: s.default for s in SETTINGS})
"""Setting name -> default (the only place a default is written)."""


def setting(name: str) -> Setting:
    """The declared setting ``name`` (a KeyError names a typo in code, not user input)."""
    return _BY_NAME[name]


def default(name: str) -> Any:
    """A fresh copy of the default of setting ``name`` (dicts are not shared)."""
    value = _BY_NAME[name].default
    return dict(value) if isinstance(value, dict) else value


def _a(name: str, default: Any, kind: Kind, help: str, **kw: Any) -> Setting:
    return Setting(name, "autoscale", default, kind, help, **kw)


AUTOSCALE_SETTINGS: tuple[Setting, ...] = (
    _a("algorithm", "mwf", "string", "bin-packing algorithm", flag="--algorithm"),
    _a("partitions", 32, "integer", "P, partitions of the data topic", flag="--partitions",
       minimum=1, maximum=1024),
    _a("capacity", 120_000.0, "number", "C_bar, bytes/s one consumer processes at most",
       flag="--capacity", param="autoscale_capacity", exclusive_minimum=0),
    _a("bin_capacity", None, "number", "C, the bin size of the packing (default: 5/6 C_bar)",
       flag="--bin-capacity", exclusive_minimum=0, nullable=True),
    _a("workload", "stream:delta=5", "string",
       "stream:delta=D[,start=,seed=] | step:lo=,hi=,up=,down= | const:level=L "
       "(speeds in units of C)", flag="--workload", param="autoscale_workload"),
    _a("duration_s", 300.0, "number", "seconds of load", flag="--duration", exclusive_minimum=0),
    _a("iteration_s", 30.0, "number", "seconds per iteration (speed change, Sentinel timeout)",
       flag="--iteration", param="autoscale_iteration", exclusive_minimum=0),
    _a("window_s", 30.0, "number", "the monitor's sliding window in s, at most 2 iterations",
       flag="--window", exclusive_minimum=0),
    _a("min_span_s", 3.0, "number", "the monitor publishes once its window spans this", minimum=0),
    _a("sample_s", 1.0, "number", "s between the monitor's samples of the end offsets",
       exclusive_minimum=0),
    _a("publish_s", 5.0, "number", "s between the monitor's publications", exclusive_minimum=0),
    _a("record_bytes", 100, "integer", "bytes per record", flag="--record-bytes", minimum=8,
       maximum=1_000_000),
    _BY_NAME["client"],
    _BY_NAME["home"],
    _BY_NAME["bootstrap"],
    _a("drain_timeout_s", 120.0, "number", "s the group may take to commit every record",
       exclusive_minimum=0),
    _BY_NAME["mlflow"],
    _a("experiment", "skewlab-autoscale-live", "string", "MLflow experiment"),
    _BY_NAME["keep_topics"],
)  # fmt: skip
"""Every setting of a live autoscale run, in CLI order (shared rows: the grouping run's)."""

AUTOSCALE_DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {s.name: s.default for s in AUTOSCALE_SETTINGS}
)
"""Autoscale setting name -> default (the only place an autoscale default is written)."""


DKG_TIMINGS: Mapping[str, float] = MappingProxyType(
    {"warmup": 15.0, "check_interval": 60.0, "promotion_interval": 15.0, "gc_interval": 60.0}
)
"""DKG's durations (s) in the seed; a key reaches the old space after warm-up + cycles."""
DKG_REFERENCE_S = 300.0
"""Event time at which DKG's own timings act (warm-up, a few promotion cycles)."""


def scaled_grouping_params(
    strategy: str, params: Mapping[str, Any], run_s: float
) -> tuple[dict[str, Any], float]:
    """The grouping params a run of ``run_s`` seconds of event time uses, and the scale.

    DKG's timings (:data:`DKG_TIMINGS`) are multiplied by
    ``f = min(1, run_s / DKG_REFERENCE_S)`` unless the user set any of them, so a
    short run goes through warm-up and promotion cycles as a 300 s run does;
    other groupings (and runs of 300 s or more) keep ``params`` (``f = 1``).
    """
    out = dict(params)
    if strategy not in ("dkg", "dynamic-key") or set(DKG_TIMINGS) & set(out) or run_s <= 0:
        return out, 1.0
    f = min(1.0, run_s / DKG_REFERENCE_S)
    if f < 1.0:
        out.update({k: v * f for k, v in DKG_TIMINGS.items()})
    return out, f


# ---------------------------------------------------------------- the run as a tree


@dataclass(frozen=True)
class GroupingSpec:
    """Which grouping routes the events, over how many workers, with which parameters."""

    strategy: str
    workers: int
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WorkloadSpec:
    """What is produced: the workload spec, its seed, rate, length and input partitions."""

    workload: str
    partitions: int
    rate: float
    duration_s: float
    events: int | None
    payload_bytes: int
    seed: int
    load_ramp: str | None


@dataclass(frozen=True)
class RuntimeSpec:
    """Where and how the run's processes run (broker, client, windows, tracking)."""

    service_us: float
    window_s: float
    client: str
    home: str
    bootstrap: str | None
    trigger_s: float
    max_events_per_trigger: int | None
    flush_interval_s: float
    stall_s: float
    mlflow: bool
    experiment: str | None
    keep_topics: bool
    quality: bool


@dataclass(frozen=True)
class NoControl:
    """No control loop: the grouping alone decides."""

    kind: Literal["none"] = "none"


@dataclass(frozen=True)
class RebalanceControl:
    """A rebalancer loop moving hot keys (on KEY grouping) every ``interval_s``."""

    policy: str
    interval_s: float
    lead_s: float
    params: Mapping[str, Any]
    kind: Literal["rebalance"] = "rebalance"


@dataclass(frozen=True)
class ScaleOutControl:
    """A state manager splitting overloaded workers onto up to ``max_instances``."""

    policy: str
    interval_s: float
    lead_s: float
    max_instances: int
    params: Mapping[str, Any]
    kind: Literal["scale-out"] = "scale-out"


@dataclass(frozen=True)
class AutoscaleControl:
    """A consumer-group autoscaler (the autoscale run's settings: :data:`AUTOSCALE_SETTINGS`)."""

    algorithm: str
    kind: Literal["autoscale"] = "autoscale"


ControlSpec = NoControl | RebalanceControl | ScaleOutControl | AutoscaleControl
CONTROL_KINDS: tuple[str, ...] = ("none", "rebalance", "scale-out", "autoscale")


@dataclass(frozen=True)
class RunSpec:
    """One run as a tree of small frozen parts; built only from validated settings
    (:attr:`skewlab.runsettings.ExperimentSettings.spec`)."""

    grouping: GroupingSpec
    workload: WorkloadSpec
    runtime: RuntimeSpec
    control: ControlSpec

    @property
    def message_sets(self) -> bool:
        """Whether keys move between workers by message sets (a rebalance or scale-out run)."""
        return isinstance(self.control, (RebalanceControl, ScaleOutControl))


def n_events(w: WorkloadSpec) -> int:
    """Events the run produces: ``events`` if set, else ``rate x duration`` (ramped by
    ``load_ramp`` when set), at least 1."""
    if w.events is not None:
        return w.events
    if w.load_ramp is not None:
        return ramp_events(w.rate, w.duration_s, *parse_ramp(w.load_ramp))
    return max(1, round(w.rate * w.duration_s))


def run_s(spec: RunSpec) -> float:
    """Event time the run spans: its events at the (first) rate."""
    return n_events(spec.workload) / spec.workload.rate


def grouping_params(spec: RunSpec) -> dict[str, object]:
    """The grouping params the route job uses (DKG's timings scaled to :func:`run_s`)."""
    g = spec.grouping
    return scaled_grouping_params(g.strategy, g.params, run_s(spec))[0]


def time_scale(spec: RunSpec) -> float:
    """The factor DKG's timings were scaled by (1: as in the seed)."""
    g = spec.grouping
    return scaled_grouping_params(g.strategy, g.params, run_s(spec))[1]
