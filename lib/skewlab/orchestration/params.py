"""DAG params -> experiment settings: the trigger form of ``skewlab_experiment``.

:data:`PARAMS` declares each DAG param once (:func:`param_schemas` makes the form);
:func:`settings_from_params` checks a params mapping again and builds the grouping or the
autoscale settings, failing with one :class:`~skewlab.errors.ConfigError` line. The later
tasks' helpers are in :mod:`skewlab.orchestration.runs`. The DAG imports this module at parse
time. More: docs/orchestration.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from skewlab.autoscale.algorithms import ALGORITHM_NAMES
from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES, GROUPINGS
from skewlab.live.autoscale.protocol import speed_plan
from skewlab.live.autoscale.settings import AutoscaleSettings, monitor_timing
from skewlab.live.driver.preflight import check_run_size
from skewlab.orchestration.paramspec import OFF, Kind, ParamSpec, one_line
from skewlab.orchestration.patterns import (
    AUTOSCALE_WORKLOAD_PATTERN,
    AUTOSCALE_WORKLOAD_WORDS,
)
from skewlab.rebalance import REBALANCERS, make_rebalancer
from skewlab.registry import resolve
from skewlab.runsettings import ExperimentSettings
from skewlab.services.datadir import resolve_home
from skewlab.spec import (
    AUTOSCALE_DEFAULTS,
    AUTOSCALE_SETTINGS,
    REBALANCE_POLICIES,
    SCALE_OUT_LIBRARY,
    Setting,
    setting,
)
from skewlab.state.policies import POLICIES
from skewlab.state.score import ThresholdConfig
from skewlab.workload.ramp import parse_ramp
from skewlab.workload.spec import WORKLOAD_NAMES, parse_workload

if TYPE_CHECKING:
    Settings: TypeAlias = ExperimentSettings | AutoscaleSettings

__all__ = [
    "PARAMS",
    "REBALANCE_KEYS",
    "SCALE_OUT_KEYS",
    "SCALE_OUT_POLICIES",
    "autoscale_timing",
    "check_size",
    "grouping_keys",
    "param_schemas",
    "rebalance_keys",
    "scale_out_keys",
    "settings_from_params",
    "workload_spec",
]

SCALE_OUT_POLICIES: dict[str, str] = dict(SCALE_OUT_LIBRARY)
"""``scale_out`` param values -> library policy names (as ``skewlab run --scale-out``)."""

MAX_KAFKA_CONSUMERS = 64
"""``kafka:N`` / ``kafka-rr:N`` start N consumer processes: at most this many from a form."""

_KAFKA_N = "([1-9]|[1-5][0-9]|6[0-4])"
AUTOSCALE_PATTERN = f"^({OFF}|{'|'.join(ALGORITHM_NAMES)}|kafka(-rr)?:{_KAFKA_N})$"


def _key(name: str, kind: Kind, description: str, **bounds: Any) -> ParamSpec:
    """A key of an object param (its default only documents the library's)."""
    return ParamSpec(name, name, None, kind, name, description, **bounds)


REBALANCE_KEYS: tuple[ParamSpec, ...] = (
    _key("threshold", "number", "smalops: heavy above this share (<= 1) or count (an integer)",
         exclusive_minimum=0),
    _key("epsilon", "number", "smalops: the lossy counter's error", exclusive_minimum=0),
    _key("t_msg", "number", "smalops Eq. 4: seconds per message", exclusive_minimum=0),
    _key("t_sm", "number", "smalops Eq. 4: fixed seconds per state migration", minimum=0),
    _key("t_sm_per_tuple", "number", "smalops Eq. 4: seconds per migrated tuple", minimum=0),
    _key("unit_rate", "number", "smalops Eq. 4: messages/s of one load unit",
         exclusive_minimum=0),
    _key("gate", "boolean", "smalops: move only when Eq. 4 holds (false: whenever it helps)"),
    _key("seed", "integer", "smalops: seed of the two random choices", minimum=0),
    _key("theta", "number", "dlb-h, dlb-l, lptf: imbScore threshold in % (15)", minimum=0),
    _key("tuple_bytes", "integer", "bytes of a moved tuple when loads carry no bytes", minimum=0),
)  # fmt: skip
"""Every key some rebalance policy takes; :func:`rebalance_keys` says which ones each takes."""

SCALE_OUT_KEYS: tuple[ParamSpec, ...] = (
    _key("scale_in", "number", "score at or below which a worker is idle (25)",
         minimum=0, maximum=100),
    _key("alarming", "number", "score at which checkpoints start / backups warm up (45)",
         minimum=0, maximum=100),
    _key("scale_out", "number", "score at which a worker is split onto more instances (70)",
         minimum=0, maximum=100),
    _key("hysteresis", "number", "points a score falls back to leave a level (5)", minimum=0),
    _key("dwell", "integer", "consecutive scores that agree before a level changes (2)",
         minimum=1),
    _key("cooldown_s", "number", "seconds after a scale event before the next (10)", minimum=0),
    _key("factor", "integer", "instances multiply by this on scale-out (2)", minimum=2),
    _key("interval_s", "number", "checkpoint, restart: seconds between checkpoints",
         exclusive_minimum=0),
    _key("change_fraction", "number", "checkpoint: also when this share of state changed",
         exclusive_minimum=0, maximum=1),
    _key("checkpoint_at_scale_out", "boolean",
         "checkpoint: one more checkpoint at the decision, restored (true)"),
    _key("switch_at_start", "boolean",
         "checkpoint: switch routing at the decision (true), or once the new are ready"),
)  # fmt: skip
"""The bottleneck-score thresholds and policy keys; :func:`scale_out_keys` per policy."""

_SCALE_OUT_FIXED = frozenset(
    {"thresholds", "start_instances", "min_instances", "max_instances", "scale_in"}
)
"""Policy fields the state manager sets itself (``scale_in`` here is the policy's bool)."""

_GROUPING = "Grouping experiment"
_REBALANCE = "Rebalance hot keys (on KEY grouping)"
_SCALE_OUT = "Scale out overloaded workers (on KEY grouping)"
_AUTOSCALE = "Autoscale a consumer group (instead of the grouping experiment)"
_AUTO = {s.name: s for s in AUTOSCALE_SETTINGS}
"""The autoscale run's setting rows by name (the form's autoscale params derive from them)."""


def _from(
    name: str | Setting, title: str, description: str, section: str, **extra: Any
) -> ParamSpec:
    """The DAG param of setting ``name`` (a :data:`~skewlab.spec.SETTINGS` name, or an
    :data:`~skewlab.spec.AUTOSCALE_SETTINGS` row): default, kind, bounds and choices
    from its row (a switch's ``None`` is :data:`OFF` here; ``default=`` overrides)."""
    s = setting(name) if isinstance(name, str) else name
    assert s.param is not None
    switch = s.choices is not None and s.nullable
    bounds: dict[str, Any] = {
        "minimum": s.minimum, "maximum": s.maximum, "exclusive_minimum": s.exclusive_minimum,
        "enum": (OFF, *s.choices) if switch and s.choices else s.choices,
        "nullable": s.nullable and not switch,
    }  # fmt: skip
    default = extra.pop("default", OFF if switch and s.default is None else s.default)
    bounds.update(extra)
    return ParamSpec(s.param, s.name, default, s.kind, title, description, section=section,
                     **bounds)  # fmt: skip


def grouping_keys(strategy: str) -> tuple[str, ...]:
    """The ``strategy_params`` keys grouping ``strategy`` takes (its config's fields)."""
    cls = resolve(GROUPINGS, strategy, "grouping")
    return tuple(f.name for f in dataclasses.fields(cls) if f.name != "workers")


def _grouping_key_specs() -> tuple[ParamSpec, ...]:
    out: dict[str, ParamSpec] = {}
    for name in GROUPING_NAMES:
        cls = GROUPINGS[name]
        for f in dataclasses.fields(cls):
            if f.name == "workers" or f.name in out:
                continue
            kind: Kind = "integer" if str(f.type).startswith("int") else "number"
            out[f.name] = _key(f.name, kind, f"{name}: {f.name} (default {f.default})",
                               minimum=0)  # fmt: skip
    return tuple(out.values())


GROUPING_KEYS: tuple[ParamSpec, ...] = _grouping_key_specs()
"""Every key some grouping takes; :func:`grouping_keys` says which ones each takes."""

STRATEGY_LABELS = (
    ("key", "key: hash of the key (KG; rebalance and scale-out run on it)"),
    ("shuffle", "shuffle: round robin, ignores the key"),
    ("pkg", "pkg: partial key, the less loaded of 2 hashed workers"),
    ("dkg", "dkg: dynamic key, hot keys get a growing pool of workers"),
    ("d-choices", "d-choices: hot keys spread over d workers"),
    ("w-choices", "w-choices: hot keys spread over all workers"),
)
"""What each grouping does, in the form's drop-down."""

WORKLOAD_LABELS = (
    ("zipf", "zipf: P(k) ~ (v + k)^-s over N keys (SMALOPS)"),
    ("country", "country: R% of events carry one hot country (DKG)"),
    ("country-half", "country-half: uniform, then R% hot from halfway (DKG)"),
    ("eps-switch", "eps-switch: Zipf exponent switching 0.2 <-> 1.5 (DLB)"),
    ("dynamic", "dynamic: Zipf whose hot keys change every minute (SMALOPS)"),
    ("trace", "trace: replay a CSV / JSON-lines file"),
)
"""What each workload is, in the form's drop-down (names: the workload registry's)."""

_WORKLOAD = parse_workload(setting("workload").default)
"""The default workload: where the form's workload fields take their defaults."""
_SKEWED = ("country", "country-half")
_ZIPF_S = ("zipf", "dynamic")
_KEYED = ("zipf", "eps-switch", "dynamic")


def _part(name: str, kind: Kind, title: str, description: str, default: Any,
          **kw: Any) -> ParamSpec:  # fmt: skip
    """A form field that is part of a setting (the workload, the load ramp), not one itself."""
    return ParamSpec(name, "", default, kind, title, description, section=_GROUPING, **kw)


PARAMS: tuple[ParamSpec, ...] = (
    _from("strategy", "Grouping",
          "Which worker processes each event. rebalance and scale_out need key.",
          _GROUPING, enum=GROUPING_NAMES, values_display=STRATEGY_LABELS),
    _from("strategy_params", "Grouping params",
          'The grouping\'s parameters, e.g. {"warmup": 5, "check_interval": 20} (dkg) or '
          '{"d": 4} (d-choices); names are checked against the chosen grouping.',
          _GROUPING, properties=GROUPING_KEYS),
    _from("workers", "Workers (W)", "Parallel worker processes.", _GROUPING),
    _from("partitions", "Input partitions",
          "Partitions of the input topic (grouping: splitters of the route job; autoscale: "
          "the partitions bin-packed onto consumers).", _GROUPING, scope="both"),
    _from("workload", "Workload",
          "Which keys the events carry; its own fields below (skew, Zipf s, keys, trace "
          "file). The autoscale experiment uses autoscale_workload instead.", _GROUPING,
          default=_WORKLOAD.name, enum=WORKLOAD_NAMES, values_display=WORKLOAD_LABELS),
    _part("skew", "integer", "Skew R (%)",
          "country, country-half: R% of the events carry the hot country, the rest are "
          "uniform over all countries (R0: uniform, R100: one key).",
          getattr(_WORKLOAD, "ratio", 80), minimum=0, maximum=100, applies=_SKEWED),
    _part("zipf_s", "number", "Zipf exponent s",
          "zipf, dynamic: P(k) ~ (v + k)^-s with v = 2.72; larger s, hotter head.",
          getattr(_WORKLOAD, "s", 1.1), minimum=0.05, maximum=5, applies=_ZIPF_S),
    _part("keys", "integer", "Distinct keys",
          "zipf, eps-switch, dynamic: how many keys the events draw from.",
          getattr(_WORKLOAD, "keys", 10_000), minimum=1, maximum=10_000_000, applies=_KEYED),
    _part("trace_file", "string", "Trace file",
          "trace: a CSV or JSON-lines file on the Airflow worker (key, ts, optional size).",
          None, nullable=True, applies=("trace",)),
    _from("rate", "Rate (events/s)", "Target produce rate.", _GROUPING,
          minimum=1, exclusive_minimum=None),
    _from("duration_s", "Duration (s)",
          "How long to produce (grouping: events = rate x duration; autoscale: iterations = "
          "duration / autoscale_iteration).", _GROUPING, scope="both",
          minimum=1, exclusive_minimum=None),
    _part("load_ramp_factor", "number", "Load ramp factor",
          "1: constant rate. Else the rate multiplies by this every load_ramp_every "
          "seconds (the scale-out seed's doubling load: 2).", 1.0, minimum=1, maximum=100),
    _part("load_ramp_every", "number", "Load ramp interval (s)",
          "Seconds between two steps of the load ramp (read when the factor is above 1).",
          500.0, minimum=1, maximum=86_400),
    _from("service_us", "Service time (us/event)",
          "Busy-work per event in each worker (0: none; scale_out needs > 0).", _GROUPING),
    _from("window_s", "Window (s)", "Tumbling window of the per-worker results and metrics.",
          _GROUPING, minimum=0.5, exclusive_minimum=None),
    _from("seed", "Seed", "Workload seed (same seed: same stream).", _GROUPING),
    _from("rebalance", "Rebalance policy",
          "Move hot keys live: smalops (heavy hitters, best fit, Eq. 4), dlb-h / dlb-l (DLB's "
          "heaviest / lightest key), lptf (re-pack all keys). none: off.", _REBALANCE,
          values_display=(("none", "none: off"), *((n, n) for n in REBALANCE_POLICIES))),
    _from("rebalance_interval_s", "Rebalance interval (s)",
          "Seconds between rebalance decisions.", _REBALANCE, needs="rebalance",
          minimum=0.5, exclusive_minimum=None),
    _from("rebalance_params", "Rebalance policy params",
          'The policy\'s parameters, e.g. {"threshold": 0.05, "gate": false} (smalops) or '
          '{"theta": 15} (dlb-h, dlb-l, lptf).',
          _REBALANCE, properties=REBALANCE_KEYS, needs="rebalance"),
    _from("scale_out", "Scale-out policy",
          "Split an overloaded worker's keys onto new instances: checkpoint (state saved from "
          "alarming), active-backup (secondaries warm from alarming), restart (baseline). "
          "none: off. Needs service_us > 0.", _SCALE_OUT,
          values_display=(("none", "none: off"), ("checkpoint", "checkpoint"),
                          ("active-backup", "active-backup"), ("restart", "restart"))),
    _from("max_instances", "Max instances per worker",
          "Instances one worker may be split onto.", _SCALE_OUT, needs="scale_out"),
    _from("scale_out_interval_s", "Score interval (s)", "Seconds between bottleneck scores.",
          _SCALE_OUT, needs="scale_out", minimum=0.1, exclusive_minimum=None),
    _from("scale_out_params", "Thresholds and policy params",
          'Bottleneck-score thresholds (0..100) and policy keys, e.g. {"alarming": 40, '
          '"scale_out": 70, "scale_in": 20, "cooldown_s": 10}.',
          _SCALE_OUT, properties=SCALE_OUT_KEYS, needs="scale_out"),
    ParamSpec(
        "autoscale", "algorithm", OFF, "string", "Autoscale algorithm",
        "none: the grouping experiment. Else run the live consumer-group autoscaler with this "
        "bin-packing algorithm (Landau et al.; mwf, bfd, ...) or Kafka's assignor over N "
        "consumers (kafka:N, kafka-rr:N).",
        pattern=AUTOSCALE_PATTERN, examples=(OFF, *ALGORITHM_NAMES, "kafka:4", "kafka-rr:4"),
        allowed_text=f"{OFF}, one of {', '.join(ALGORITHM_NAMES)}, or kafka:N / kafka-rr:N "
        f"(N in 1..{MAX_KAFKA_CONSUMERS})",
        section=_AUTOSCALE, scope="both",
    ),
    _from(_AUTO["workload"], "Autoscale workload",
          "Write speeds in units of the bin capacity C: stream:delta=D[,start,seed] (the "
          "seed's measurement streams), step:lo,hi,up,down, const:level.", _AUTOSCALE,
          pattern=AUTOSCALE_WORKLOAD_PATTERN, allowed_text=AUTOSCALE_WORKLOAD_WORDS,
          scope="autoscale", needs="autoscale"),
    _from(_AUTO["capacity"], "Consumer capacity (bytes/s)",
          "C_bar, bytes/s one consumer reads at most; the bin capacity C is 5/6 of it.",
          _AUTOSCALE, scope="autoscale", needs="autoscale", minimum=1, exclusive_minimum=None),
    _from(_AUTO["iteration_s"], "Autoscale iteration (s)",
          "Seconds per iteration: the speeds change and the controller decides once each "
          "(the form's default is shorter than the CLI's, so a default DAG run is short).",
          _AUTOSCALE, default=5.0, scope="autoscale", needs="autoscale", minimum=1,
          exclusive_minimum=None),
)  # fmt: skip
"""The DAG params, in form order."""

_BY_NAME = {p.name: p for p in PARAMS}


def param_schemas() -> dict[str, dict[str, Any]]:
    """``{name: kwargs}`` for ``airflow.sdk.Param(**kwargs)``: default, description, schema.

    The description ends with what is allowed (``Allowed: an integer in 1..64.``), which
    the form shows under the field; the schema is :meth:`ParamSpec.form_schema` (bounds
    that refuse a bad value instead of clamping it).
    """
    return {
        p.name: {
            "default": p.default,
            "description": f"{p.description} Allowed: {p.allowed()}.",
            **p.form_schema(),
        }
        for p in PARAMS
    }


def rebalance_keys(policy: str) -> tuple[str, ...]:
    """The ``rebalance_params`` keys rebalance ``policy`` takes (its config's fields)."""

    cls, fixed = REBALANCERS[policy]
    return tuple(
        f.name
        for f in dataclasses.fields(cls)
        if f.init and f.name != "workers" and f.name not in fixed
    )


def scale_out_keys(policy: str) -> tuple[str, ...]:
    """The ``scale_out_params`` keys scale-out ``policy`` takes: thresholds + its config."""

    cls = POLICIES[SCALE_OUT_POLICIES[policy]]
    names = [f.name for f in dataclasses.fields(ThresholdConfig)]
    names += [f.name for f in dataclasses.fields(cls) if f.init and f.name not in _SCALE_OUT_FIXED]
    return tuple(dict.fromkeys(names))


def _params(names: list[str]) -> str:
    return ("param " if len(names) == 1 else "params ") + ", ".join(names)


def _verb(names: list[str]) -> str:
    return "applies" if len(names) == 1 else "apply"


def _leave(names: list[str]) -> str:
    """``leave it at its default (x=1)`` / ``leave them at their defaults (x=1, y={})``."""
    shown = ", ".join(f"{n}={json.dumps(_BY_NAME[n].default)}" for n in names)
    if len(names) == 1:
        return f"leave it at its default ({shown})"
    return f"leave them at their defaults ({shown})"


def _check_scopes(values: Mapping[str, Any]) -> None:
    """Refuse a param that the chosen experiment or policy would silently ignore."""
    algorithm = values["autoscale"]
    changed = [s for s in PARAMS if s.differs(values[s.name])]
    if algorithm != OFF:
        extra = [s.name for s in changed if s.scope == "grouping"]
        if extra:
            own = ", ".join(s.name for s in PARAMS if s.scope != "grouping")
            raise ConfigError(
                f"{_params(extra)} {_verb(extra)} to the grouping experiment only, not to "
                f"autoscale={algorithm} (its params: {own}); {_leave(extra)} or set "
                f"autoscale to {OFF}"
            )
    for switch in ("rebalance", "scale_out", "autoscale"):
        if values[switch] != OFF:
            continue
        extra = [s.name for s in changed if s.needs == switch]
        if extra:
            choices = _BY_NAME[switch].enum or ("an algorithm such as mwf",)
            raise ConfigError(
                f"{_params(extra)} {_verb(extra)} only when {switch} is set (to "
                f"{', '.join(c for c in choices if c != OFF)}); set {switch} or {_leave(extra)}"
            )


def _check_policy_keys(
    param: str, policy: str, given: Mapping[str, Any], valid: tuple[str, ...]
) -> None:
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(
            f"param {param}: {policy} takes {', '.join(valid)}; got {', '.join(unknown)}"
        )


def _check_grouping(values: Mapping[str, Any]) -> None:
    """The combinations of the grouping experiment that JSON schema cannot express."""
    _check_parts(values)
    rebalance, scale_out, strategy = values["rebalance"], values["scale_out"], values["strategy"]
    if rebalance != OFF and scale_out != OFF:
        raise ConfigError(
            f"rebalance={rebalance} and scale_out={scale_out} both move keys (both write the "
            f"assignments); set one of them to {OFF}"
        )
    for switch, policy in (("rebalance", rebalance), ("scale_out", scale_out)):
        if policy != OFF and strategy != "key":
            raise ConfigError(
                f"{switch}={policy} runs on top of KEY grouping: set strategy to key, "
                f"got {strategy}"
            )
    _check_policy_keys(
        "strategy_params", strategy, values["strategy_params"], grouping_keys(strategy)
    )
    if rebalance != OFF:
        given = values["rebalance_params"]
        _check_policy_keys("rebalance_params", rebalance, given, rebalance_keys(rebalance))
        try:
            make_rebalancer(rebalance, workers=values["workers"], **given)
        except ConfigError as exc:
            raise ConfigError(f"param rebalance_params: {one_line(exc)}") from None
    if scale_out != OFF:
        if not values["service_us"] > 0:
            raise ConfigError(
                f"scale_out={scale_out} needs service_us > 0 (the per-event cost is what "
                f"overloads a worker), got {values['service_us']:g}"
            )

        given = values["scale_out_params"]
        _check_policy_keys("scale_out_params", scale_out, given, scale_out_keys(scale_out))
        names = {f.name for f in dataclasses.fields(ThresholdConfig)}
        try:
            ThresholdConfig(**{k: v for k, v in given.items() if k in names})
        except ConfigError as exc:
            raise ConfigError(f"param scale_out_params: {one_line(exc)}") from None


def settings_from_params(
    params: Mapping[str, Any], home: str | None = None, **overrides: Any
) -> Settings:
    """Validate DAG ``params`` and build the settings of the experiment they select.

    Missing params take their defaults; unknown names are refused (a typo in a
    run conf must not be silently ignored), and so is a param the selected
    experiment or policy would ignore (changed from its default while its
    switch is ``none``, or a grouping param with ``autoscale`` set). ``home`` is
    the data directory (default ``$SKEWLAB_HOME``, else ``./.skewlab``, made
    absolute: a task's working directory is not the user's). ``overrides`` are
    further settings fields (``mlflow=False``...).

    Returns :class:`ExperimentSettings` when ``autoscale`` is ``none``, else
    :class:`AutoscaleSettings`. Raises :class:`ConfigError` with a one-line message.
    """

    unknown = sorted(set(params) - set(_BY_NAME))
    if unknown:
        raise ConfigError(
            f"unknown param(s) {', '.join(unknown)}; valid: {', '.join(sorted(_BY_NAME))}"
        )
    values = {s.name: s.check(params.get(s.name, s.default)) for s in PARAMS}
    _check_scopes(values)
    base = {"home": str(resolve_home(home))}
    if values["autoscale"] != OFF:
        return _autoscale_settings(values, base, overrides)
    _check_grouping(values)

    fields = {s.field: values[s.name] for s in PARAMS if s.scope != "autoscale"}
    fields.pop("algorithm")
    fields.pop("")  # the parts of the workload and the ramp: composed below
    fields["workload"] = workload_spec(values)
    fields["load_ramp"] = load_ramp(values)
    for switch in ("rebalance", "scale_out"):
        fields[switch] = None if fields[switch] == OFF else fields[switch]
    return _build(ExperimentSettings, {**fields, **base}, overrides)


DAG_FIX = (
    "lower the params rate, duration or events (a DAG run has no override; "
    "skewlab run --allow-large runs it anyway)"
)
"""What a DAG run refused as too large can do about it."""


def check_size(
    settings: Settings, free_bytes: Callable[[Path], int] | None = None, cores: int | None = None
) -> list[str]:
    """:func:`~skewlab.live.driver.preflight.check_run_size` for a DAG run, before any
    service starts: a grouping run too large for its data dir's disk is refused
    (:class:`ConfigError`, one line naming the params to lower); returns the warnings
    (workers vs cores). An autoscale run (its own load plan) is not checked here."""
    if not isinstance(settings, ExperimentSettings):
        return []
    if free_bytes is None:
        return check_run_size(settings, cores=cores, fix=DAG_FIX)
    return check_run_size(settings, free_bytes=free_bytes, cores=cores, fix=DAG_FIX)


def _check_parts(values: Mapping[str, Any]) -> None:
    """Refuse a workload field the chosen workload does not read (changed from its default),
    and a ramp interval without a ramp, naming the field and what reads it."""
    kind = values["workload"]
    for s in PARAMS:
        if s.applies is not None and kind not in s.applies and s.differs(values[s.name]):
            raise ConfigError(
                f"param {s.name} is read by workload {', '.join(s.applies)} only, not "
                f"{kind}; {_leave([s.name])} or pick one of those workloads"
            )
    if kind == "trace" and not values["trace_file"]:
        raise ConfigError("param trace_file: workload trace needs the trace file's path")
    if values["load_ramp_factor"] == 1 and _BY_NAME["load_ramp_every"].differs(
        values["load_ramp_every"]
    ):
        raise ConfigError(
            "param load_ramp_every is read only when load_ramp_factor is above 1 (1: constant "
            f"rate); set the factor or {_leave(['load_ramp_every'])}"
        )


def workload_spec(values: Mapping[str, Any]) -> str:
    """The workload spec string of the form's workload fields (``country`` + skew 80 ->
    ``country:R80``), checked by the workload's parser (one line naming the workload)."""
    kind = values["workload"]
    if kind in _SKEWED:
        spec = f"{kind}:R{values['skew']}"
    elif kind in _ZIPF_S:
        spec = f"{kind}:s={values['zipf_s']:g},keys={values['keys']}"
    elif kind == "trace":
        spec = f"trace:{values['trace_file']}"
    elif kind in _KEYED:
        spec = f"{kind}:keys={values['keys']}"
    else:
        spec = kind
    try:
        parse_workload(spec, seed=int(values.get("seed", 0)))
    except ConfigError as exc:
        raise ConfigError(f"param workload: {one_line(exc)}") from None
    return spec


def load_ramp(values: Mapping[str, Any]) -> str | None:
    """The ``load_ramp`` setting of the form's ramp fields: None at factor 1 (constant)."""
    factor, every = values["load_ramp_factor"], values["load_ramp_every"]
    if factor == 1:
        return None
    ramp = f"{factor:g}x/{every:g}s"
    try:
        parse_ramp(ramp)
    except ConfigError as exc:
        raise ConfigError(f"param load_ramp_factor: {one_line(exc)}") from None
    return ramp


def autoscale_timing(
    iteration_s: float, window_s: float = AUTOSCALE_DEFAULTS["window_s"]
) -> dict[str, float]:
    """The monitor's timing for ``iteration_s``: :func:`monitor_timing`, as ``skewlab
    autoscale`` derives it."""
    return monitor_timing(iteration_s, window_s)


def _autoscale_settings(
    values: Mapping[str, Any], base: dict[str, Any], overrides: Mapping[str, Any]
) -> AutoscaleSettings:
    iteration, duration = values["autoscale_iteration"], values["duration"]
    if duration < iteration:
        raise ConfigError(
            f"param duration ({duration:g} s) must be >= autoscale_iteration ({iteration:g} s): "
            "the autoscaler decides once per iteration"
        )

    try:
        speed_plan(values["autoscale_workload"], values["partitions"], 1, 1.0)
    except ConfigError as exc:
        raise ConfigError(f"param autoscale_workload: {one_line(exc)}") from None
    fields = {s.field: values[s.name] for s in PARAMS if s.scope != "grouping"}
    return _build(AutoscaleSettings, {**fields, **autoscale_timing(iteration), **base}, overrides)


def _build(cls: Any, fields: dict[str, Any], overrides: Mapping[str, Any]) -> Any:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - names)
    if unknown:
        raise ConfigError(f"{cls.__name__} has no field {', '.join(unknown)}")
    try:
        return cls(**{**fields, **overrides})
    except ConfigError as exc:
        raise ConfigError(one_line(exc)) from None
