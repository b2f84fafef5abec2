"""The ``skewlab_sweep`` DAG's form: its params, their schemas and the settings they make."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from skewlab.errors import ConfigError
from skewlab.grouping import GROUPING_NAMES
from skewlab.orchestration.form_schema import check_params, form_param
from skewlab.orchestration.sweep_grid import MAX_CELLS, MODES, PRESETS, SweepSettings
from skewlab.services.datadir import resolve_home
from skewlab.workload.spec import WORKLOAD_NAMES

__all__ = ["CUSTOM", "param_schemas", "settings_from_params"]

CUSTOM = "custom"
"""The ``preset`` choice that runs the grid of the form (``""`` is accepted as a synonym)."""
GRID, SIZES = "Grid", "Cell size"
_WORKLOAD_PATTERN = (
    "^(" + "|".join(sorted(WORKLOAD_NAMES, key=len, reverse=True)) + ")(:.+)?$"
    "|^COUNTRY_(HALF_)?SKEW_R[0-9]+$"
)

_PARAM_DOCS: dict[str, tuple[Any, dict[str, Any], str, str, str]] = {
    "preset": (
        CUSTOM,
        {
            "type": "string",
            "enum": [CUSTOM, *PRESETS],
            "values_display": {
                CUSTOM: "custom: the grid below",
                **{p.name: f"{p.name}: {p.description}" for p in PRESETS.values()},
            },
        },
        "A seed reproduction that fixes strategies, workloads, workers and service time, "
        "or custom: the grid below.",
        "Preset",
        GRID,
    ),
    "mode": (
        "sim",
        {"type": "string", "enum": list(MODES)},
        "sim: the simulator, seconds per cell; live: one small live experiment per cell "
        f"(at most {MAX_CELLS['live']} cells).",
        "Mode",
        GRID,
    ),
    "strategies": (
        ["key", "shuffle", "pkg", "dkg"],
        {
            "type": "array",
            "items": {"type": "string", "enum": list(GROUPING_NAMES)},
            "examples": list(GROUPING_NAMES),
            "minItems": 1,
            "uniqueItems": True,
        },
        "Groupings to compare.",
        "Strategies",
        GRID,
    ),
    "workloads": (
        ["zipf:s=1.1,v=2.72"],
        {
            "type": "array",
            "items": {"type": "string", "pattern": _WORKLOAD_PATTERN},
            "minItems": 1,
            "maxItems": 20,
            "uniqueItems": True,
        },
        "Workload specs, one per line, e.g. zipf:s=1.1,v=2.72,keys=10000 or country:R80.",
        "Workloads",
        GRID,
    ),
    "workers": (
        [4],
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 64},
            "minItems": 1,
            "maxItems": 16,
            "uniqueItems": True,
        },
        "Worker counts W, a JSON list such as [4, 8, 16].",
        "Workers",
        GRID,
    ),
    "seeds": (
        [0],
        {
            "type": "array",
            "items": {"type": "integer", "minimum": 0, "maximum": 2**31 - 1},
            "minItems": 1,
            "maxItems": 20,
            "uniqueItems": True,
        },
        "Workload seeds, a JSON list such as [0, 1, 2] (each seed repeats every cell).",
        "Seeds",
        GRID,
    ),
    "events": (
        200_000,
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10_000_001},
        "sim: events per cell.",
        "Events",
        SIZES,
    ),
    "service_us": (
        1000.0,
        {"type": "number", "minimum": 0, "exclusiveMaximum": 1e6},
        "Service time per event, us (sim: > 0).",
        "Service time (us)",
        SIZES,
    ),
    "rate": (
        None,
        {"type": ["number", "null"], "exclusiveMinimum": 0},
        "Events/s (empty: sim 80% of the workers' capacity, live 2000).",
        "Rate (events/s)",
        SIZES,
    ),
    "duration": (
        5.0,
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 3600},
        "live: seconds of producing per cell.",
        "Duration (s)",
        SIZES,
    ),
    "partitions": (
        2,
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 65},
        "live: input partitions.",
        "Partitions",
        SIZES,
    ),
    "window": (
        5.0,
        {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 3600},
        "Metrics window, s.",
        "Window (s)",
        SIZES,
    ),
}
"""DAG param name -> (default, JSON schema, description, form title, form section).
Integer scalars use exclusive bounds so the form refuses a bad value instead of
clamping it (:mod:`skewlab.orchestration.form_schema`)."""

_PARAM_WORDS = {
    "workloads": "a list of 1..20 workload specs without repeats, each name[:args] with name "
    f"one of {', '.join(WORKLOAD_NAMES)} (lower case), or DKG's COUNTRY_SKEW_R<n>"
}
"""What a param allows, in words, where its schema says it badly (a pattern)."""
_PARAM_FIELDS = {"duration": "duration_s", "window": "window_s"}


def param_schemas() -> dict[str, dict[str, Any]]:
    """``{name: kwargs}`` for ``airflow.sdk.Param(**kwargs)`` of ``skewlab_sweep``: every
    default submittable, the allowed values in each description."""
    return {
        name: form_param(
            name, default, schema, doc, title=title, section=section, words=_PARAM_WORDS.get(name)
        )
        for name, (default, schema, doc, title, section) in _PARAM_DOCS.items()
    }


def settings_from_params(
    params: Mapping[str, Any], home: str | None = None, experiment: str | None = None
) -> SweepSettings:
    """Validate the DAG params and build the sweep settings (one-line ConfigError if bad).

    Each param is checked against its form schema first (:func:`form_schema.check_params`:
    one line naming the param, the bad value and what is allowed; unknown names are
    refused). A ``preset`` other than ``custom`` replaces ``strategies``, ``workloads``,
    ``workers`` and ``service_us``; the other params apply as given.
    """

    params = dict(params)
    if params.get("preset") == "":
        params["preset"] = CUSTOM
    check_params(params, {name: doc[1] for name, doc in _PARAM_DOCS.items()}, _PARAM_WORDS)
    values = {name: params.get(name, doc[0]) for name, doc in _PARAM_DOCS.items()}
    preset = values.pop("preset")
    preset = "" if preset == CUSTOM else preset
    kw: dict[str, Any] = {
        _PARAM_FIELDS.get(name, name): tuple(value) if isinstance(value, list | tuple) else value
        for name, value in values.items()
    }
    if preset:
        p = PRESETS[preset]
        kw.update(
            strategies=p.strategies,
            workloads=p.workloads,
            workers=p.workers,
            service_us=p.service_us,
        )
    name = experiment or f"skewlab-sweep-{preset or 'custom'}"
    try:
        return SweepSettings(**kw, preset=preset, experiment=name, home=str(resolve_home(home)))
    except ConfigError as exc:
        raise ConfigError(" ".join(str(exc).split())) from None
