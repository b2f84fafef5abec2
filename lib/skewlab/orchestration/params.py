"""DAG params <-> :class:`~skewlab.live.experiment.ExperimentSettings`, and the XCom summary.

The Airflow DAG ``skewlab_experiment`` stays thin (ARCHITECTURE.md, Orchestration):
everything it decides lives here, as pure functions tested without Airflow.

* :data:`PARAMS` describes each DAG param once: its default, JSON-schema type
  and bounds (what the trigger form enforces) and the settings field it fills.
  :func:`param_schemas` turns them into ``Param(**kwargs)`` arguments.
* :func:`settings_from_params` validates a params mapping a second time (a run
  triggered through the REST API or ``dag.test(run_conf=...)`` may skip the
  form, and a workload spec cannot be checked by JSON schema) and builds the
  frozen settings; every error is a :class:`~skewlab.errors.ConfigError` whose
  message is ONE line saying what is wrong and what is allowed.
* :func:`settings_to_xcom` / :func:`settings_from_xcom` carry the validated
  settings from the first task to the experiment task as a JSON-safe dict.
* :func:`result_for_xcom` shrinks a :class:`~skewlab.live.summary.RunSummary`
  to its scalar row (no per-window series), with non-finite numbers as ``None``.

This module imports nothing heavy at import time (the DAG file imports it at
parse time); :class:`ExperimentSettings` is imported inside the functions.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES

if TYPE_CHECKING:
    from skewlab.live.experiment import ExperimentSettings
    from skewlab.live.summary import RunSummary

__all__ = [
    "PARAMS",
    "ParamSpec",
    "one_line",
    "param_schemas",
    "progress_logger",
    "result_for_xcom",
    "settings_from_params",
    "settings_from_xcom",
    "settings_to_xcom",
    "verdict",
]

Kind = Literal["string", "integer", "number"]


@dataclass(frozen=True)
class ParamSpec:
    """One DAG param: name, settings field, default and JSON-schema constraints.

    Invariant: ``default`` satisfies the constraints (checked by the unit tests
    through ``jsonschema`` and through :func:`settings_from_params`).
    """

    name: str
    field: str
    default: Any
    kind: Kind
    title: str
    description: str
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: float | None = None
    enum: tuple[str, ...] | None = None

    def schema(self) -> dict[str, Any]:
        """The JSON-schema keywords of this param (what Airflow's form validates)."""
        out: dict[str, Any] = {"type": self.kind, "title": self.title}
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.exclusive_minimum is not None:
            out["exclusiveMinimum"] = self.exclusive_minimum
        if self.kind == "string" and self.enum is None:
            out["minLength"] = 1
        return out

    def allowed(self) -> str:
        """What values are allowed, in words (for error messages)."""
        if self.enum is not None:
            return "one of " + ", ".join(self.enum)
        what = {"string": "a non-empty string", "integer": "an integer", "number": "a number"}
        parts = [what[self.kind]]
        if self.exclusive_minimum is not None:
            parts.append(f"> {self.exclusive_minimum:g}")
        if self.minimum is not None and self.maximum is not None:
            parts.append(f"in {self.minimum:g}..{self.maximum:g}")
        elif self.minimum is not None:
            parts.append(f">= {self.minimum:g}")
        elif self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        return " ".join(parts)

    def check(self, value: Any) -> Any:
        """``value`` if it satisfies this spec (ints accepted for numbers), else ConfigError."""
        ok = self._type_ok(value)
        if ok and self.kind != "string":
            v = float(value)
            ok = (
                math.isfinite(v)
                and (self.minimum is None or v >= self.minimum)
                and (self.maximum is None or v <= self.maximum)
                and (self.exclusive_minimum is None or v > self.exclusive_minimum)
            )
        if ok and self.enum is not None:
            ok = value in self.enum
        if not ok:
            raise ConfigError(f"param {self.name} must be {self.allowed()}, got {value!r}")
        return float(value) if self.kind == "number" else value

    def _type_ok(self, value: Any) -> bool:
        if self.kind == "string":
            return isinstance(value, str) and bool(value.strip())
        if isinstance(value, bool):
            return False
        if self.kind == "integer":
            return isinstance(value, int)
        return isinstance(value, int | float)


PARAMS: tuple[ParamSpec, ...] = (
    ParamSpec(
        "strategy",
        "strategy",
        "dkg",
        "string",
        "Grouping",
        "Which worker processes each event: key (hash), shuffle, pkg (partial key), "
        "dkg (dynamic key), d-choices, w-choices.",
        enum=GROUPING_NAMES,
    ),
    ParamSpec(
        "workers", "workers", 4, "integer", "Workers (W)", "Parallel worker processes.", 1, 64
    ),
    ParamSpec(
        "partitions",
        "partitions",
        4,
        "integer",
        "Input partitions",
        "Partitions of the events topic (= splitters of the route job).",
        1,
        64,
    ),
    ParamSpec(
        "workload",
        "workload",
        "zipf:s=1.1,v=2.72",
        "string",
        "Workload",
        "Workload spec, e.g. zipf:s=1.1,v=2.72 or country:R80 (see skewlab simulate --help).",
    ),
    ParamSpec(
        "rate",
        "rate",
        5000.0,
        "number",
        "Rate (events/s)",
        "Target produce rate.",
        exclusive_minimum=0,
    ),
    ParamSpec(
        "duration",
        "duration_s",
        20.0,
        "number",
        "Duration (s)",
        "How long to produce; events = rate x duration.",
        exclusive_minimum=0,
    ),
    ParamSpec(
        "service_us",
        "service_us",
        0.0,
        "number",
        "Service time (us/event)",
        "Busy-work per event in each worker (0: none).",
        minimum=0,
    ),
    ParamSpec(
        "window",
        "window_s",
        15.0,
        "number",
        "Window (s)",
        "Tumbling window of the per-worker results and metrics.",
        exclusive_minimum=0,
    ),
    ParamSpec("seed", "seed", 1, "integer", "Seed", "Workload seed (same seed: same stream).", 0),
)
"""The DAG params, in form order."""

_BY_NAME = {p.name: p for p in PARAMS}


def param_schemas() -> dict[str, dict[str, Any]]:
    """``{name: kwargs}`` for ``airflow.sdk.Param(**kwargs)``: default, description, schema."""
    return {
        p.name: {"default": p.default, "description": p.description, **p.schema()} for p in PARAMS
    }


def one_line(text: object) -> str:
    """``text`` with all whitespace runs (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def settings_from_params(
    params: Mapping[str, Any], home: str | None = None, **overrides: Any
) -> ExperimentSettings:
    """Validate DAG ``params`` and build the experiment settings.

    Missing params take their defaults; unknown names are refused (a typo in a
    run conf must not be silently ignored). ``home`` is the data directory
    (default ``$SKEWLAB_HOME``, else ``./.skewlab``, made absolute: a task's
    working directory is not the user's). ``overrides`` are further
    :class:`ExperimentSettings` fields (``mlflow=False``...).

    Raises :class:`ConfigError` with a one-line message.
    """
    from skewlab.live.experiment import ExperimentSettings
    from skewlab.services.datadir import resolve_home

    unknown = sorted(set(params) - set(_BY_NAME))
    if unknown:
        raise ConfigError(
            f"unknown param(s) {', '.join(unknown)}; valid: {', '.join(sorted(_BY_NAME))}"
        )
    fields = {spec.field: spec.check(params.get(spec.name, spec.default)) for spec in PARAMS}
    try:
        return ExperimentSettings(**{**fields, "home": str(resolve_home(home)), **overrides})
    except ConfigError as exc:
        raise ConfigError(one_line(exc)) from None


def settings_to_xcom(settings: ExperimentSettings) -> dict[str, Any]:
    """The settings as a JSON-safe dict (round-trips through :func:`settings_from_xcom`)."""
    return dataclasses.asdict(settings)


def settings_from_xcom(data: Mapping[str, Any]) -> ExperimentSettings:
    """Rebuild (and re-validate) settings from :func:`settings_to_xcom`'s dict."""
    from skewlab.live.experiment import ExperimentSettings

    names = {f.name for f in dataclasses.fields(ExperimentSettings)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"unknown settings field(s) {', '.join(unknown)} in the XCom")
    return ExperimentSettings(**data)


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value


def result_for_xcom(summary: RunSummary) -> dict[str, Any]:
    """The run's scalar summary row (run id, MLflow run id, verdict, metrics, plot paths).

    Per-window series stay in Delta and MLflow; NaN / inf (e.g. latency of a
    run without samples) become ``None`` so the dict is strict JSON.
    """
    return {k: _json_safe(v) for k, v in summary.row().items()}


def verdict(result: Mapping[str, Any]) -> str | None:
    """``None`` if the run was exact, else one line saying why the run is not trusted."""
    if result.get("exact") is True:
        return None
    return one_line(
        f"run {result.get('run_id')} is not exact: {result.get('exactness') or 'no verdict'}"
    )


def progress_logger(
    logger: logging.Logger, every_s: float = 10.0, clock: Callable[[], float] = time.monotonic
) -> Callable[[dict[str, float]], None]:
    """A ``run_experiment`` progress callback that logs one line at most every ``every_s``."""
    last = [-math.inf]

    def show(p: dict[str, float]) -> None:
        now = clock()
        if now - last[0] < every_s:
            return
        last[0] = now
        logger.info(
            "produced %d/%d routed %d processed %d imbScore %.1f%%",
            p.get("produced", 0),
            p.get("total", 0),
            p.get("routed", 0),
            p.get("processed", 0),
            p.get("imbalance", 0.0),
        )

    return show
