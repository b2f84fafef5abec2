"""The ``skewlab_control`` DAG's params, schedule and data interval, validated once.

* :data:`COMMON` (``run_id``, ``delta_root``) plus every registered step's
  ``form()`` (:data:`~skewlab.control.STEPS`) are the DAG params;
  :func:`param_schemas` turns them into ``Param(**kwargs)`` arguments.
* :func:`settings_from_params` validates a run's params a second time (the REST
  API and ``dag.test(run_conf=...)`` skip the form) and builds the frozen
  :class:`ControlSettings`: the run to act on, the Delta root and one
  :class:`StepPlan` per step that is not ``none``. Scheduled runs take their
  configuration from the Airflow Variable :data:`VARIABLE` (a JSON object of
  the same params) laid over the defaults; manual runs from their params.
  Every error is one line saying what is wrong and what is allowed.
* :func:`control_schedule` reads the schedule from ``$SKEWLAB_CONTROL_SCHEDULE``
  (a cron expression, default every minute; ``off``: manual runs only).
* :func:`interval_ms` turns the run's data interval into epoch milliseconds.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from skewlab.control import STEPS
from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.orchestration.control.forms import FORMS
from skewlab.orchestration.paramspec import OFF, ParamSpec, one_line
from skewlab.rundir import delta_root_of
from skewlab.services.datadir import resolve_home

__all__ = [
    "COMMON",
    "DEFAULT_SCHEDULE",
    "SCHEDULE_ENV",
    "VARIABLE",
    "ControlSettings",
    "StepPlan",
    "control_schedule",
    "interval_ms",
    "param_schemas",
    "param_specs",
    "settings_from_params",
    "uses_variable",
]

SCHEDULE_ENV = "SKEWLAB_CONTROL_SCHEDULE"
DEFAULT_SCHEDULE = "* * * * *"
"""Every minute: one data interval of one minute per DAG run."""
OFF_SCHEDULES = ("off", "none", "manual")
VARIABLE = "skewlab_control"
"""The Airflow Variable holding scheduled runs' params, e.g. ``{"run_id": "key-...",
"rebalance": "dlb-h"}``."""

COMMON: tuple[ParamSpec, ...] = (
    ParamSpec(
        "run_id", "run_id", "", "string", "Run id",
        "The live run whose Delta tables to act on (skewlab run prints it). Empty: scheduled "
        f"runs read it from the Airflow Variable {VARIABLE}.",
        pattern=r"^\S*$", allowed_text="a run id without spaces", section="Run",
    ),
    ParamSpec(
        "delta_root", "delta_root", "", "string", "Delta root",
        "Where the run's tables live (a path or s3://...). Empty: $SKEWLAB_DELTA_ROOT, else "
        "<data dir>/delta.",
        pattern=r"^.*$", allowed_text="a path or URI", section="Run",
    ),
)  # fmt: skip


def param_specs() -> tuple[ParamSpec, ...]:
    """Every DAG param: :data:`COMMON`, then each step's form (a shared name once)."""
    out = list(COMMON)
    seen = {p.name: p for p in out}
    for step in STEPS.values():
        for spec in FORMS[step.name].form():
            if spec.name in seen:
                if seen[spec.name] != spec:
                    raise ConfigError(f"control steps declare param {spec.name} differently")
                continue
            seen[spec.name] = spec
            out.append(spec)
    return tuple(out)


def param_schemas() -> dict[str, dict[str, Any]]:
    """``{name: kwargs}`` for ``airflow.sdk.Param(**kwargs)``: default, description, schema."""
    return {
        p.name: {"default": p.default, "description": p.description, **p.schema()}
        for p in param_specs()
    }


@dataclass(frozen=True)
class StepPlan:
    """One step to run: its name, policy and params (validated by the step's ``check``)."""

    name: str
    policy: str
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ControlSettings:
    """What one ``skewlab_control`` run does: which run, where, which steps."""

    run_id: str
    delta_root: str
    steps: tuple[StepPlan, ...]

    def step(self, name: str) -> StepPlan | None:
        """The plan of step ``name``; ``None`` when that step is off."""
        return next((s for s in self.steps if s.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe dict (round-trips through :meth:`from_dict`)."""
        return {
            "run_id": self.run_id,
            "delta_root": self.delta_root,
            "steps": [{"name": s.name, "policy": s.policy, "params": dict(s.params)}
                      for s in self.steps],
        }  # fmt: skip

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ControlSettings:
        """The inverse of :meth:`to_dict`; the steps are not validated again, and a missing
        key raises :class:`KeyError`."""
        return cls(
            run_id=str(data["run_id"]),
            delta_root=str(data["delta_root"]),
            steps=tuple(StepPlan(s["name"], s["policy"], dict(s["params"])) for s in data["steps"]),
        )


def _variable(value: str | Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            raise ConfigError(f"Airflow Variable {VARIABLE} is not JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f"Airflow Variable {VARIABLE} must be a JSON object of params")
    return dict(value)


def _default_delta_root() -> str:
    return delta_root_of(resolve_home())


def settings_from_params(
    params: Mapping[str, Any], *, variable: str | Mapping[str, Any] | None = None
) -> ControlSettings:
    """Validate the params (and, for a scheduled run, ``variable`` laid over them).

    Missing params take their defaults; unknown names are refused. The run id
    must be set; at least one step must be on. Raises :class:`ConfigError`
    with a one-line message.
    """
    specs = {p.name: p for p in param_specs()}
    given = {**params, **_variable(variable)}
    unknown = sorted(set(given) - set(specs))
    if unknown:
        raise ConfigError(
            f"unknown param(s) {', '.join(unknown)}; valid: {', '.join(sorted(specs))}"
        )
    values = {name: spec.check(given.get(name, spec.default)) for name, spec in specs.items()}
    run_id = values["run_id"]
    if not run_id:
        raise ConfigError(
            "param run_id is empty: trigger with the run id of a live run, or set the Airflow "
            f'Variable {VARIABLE} to {{"run_id": "...", ...}} for scheduled runs'
        )
    plans = []
    for step in STEPS.values():
        policy = values[step.switch]
        if policy == OFF:
            continue
        step_params = FORMS[step.name].params_of(values)
        try:
            step.check(policy, step_params)
        except ConfigError as exc:
            raise ConfigError(f"{step.name}: {one_line(exc)}") from None
        plans.append(StepPlan(step.name, policy, step_params))
    if not plans:
        switches = "; ".join(f"{s.switch} (one of {', '.join(s.policies)})" for s in STEPS.values())
        raise ConfigError(f"nothing to control: every step is {OFF}; set {switches}")
    delta_root = values["delta_root"].strip() or _default_delta_root()
    return ControlSettings(run_id, delta_root, tuple(plans))


def uses_variable(run_type: object) -> bool:
    """Whether a DAG run of ``run_type`` reads :data:`VARIABLE` (scheduled runs only)."""
    return str(getattr(run_type, "value", run_type)) == "scheduled"


def control_schedule(env: Mapping[str, str] | None = None) -> str | None:
    """The cron schedule from ``$SKEWLAB_CONTROL_SCHEDULE`` (``None``: manual runs only)."""
    raw = env_settings(env).control_schedule or ""
    if not raw:
        return DEFAULT_SCHEDULE
    if raw.lower() in OFF_SCHEDULES:
        return None
    from croniter import croniter

    if not croniter.is_valid(raw):
        raise ConfigError(
            f"{SCHEDULE_ENV} must be a cron expression such as '* * * * *' or '*/5 * * * *', "
            f"or one of {', '.join(OFF_SCHEDULES)}; got {raw!r}"
        )
    return raw


def interval_ms(start: datetime | None, end: datetime | None) -> tuple[int, int]:
    """The data interval ``[start, end)`` in epoch milliseconds; one-line error if unusable."""
    if start is None or end is None:
        raise ConfigError("this DAG run has no data interval (trigger it with a logical date)")
    lo, hi = round(start.timestamp() * 1000), round(end.timestamp() * 1000)
    if not 0 <= lo < hi:
        raise ConfigError(
            f"data interval [{start.isoformat()}, {end.isoformat()}) is empty; the control "
            "DAG needs a schedule with data intervals (a cron expression)"
        )
    return lo, hi
