"""JSON-schema params for Airflow trigger forms: the words the form shows, a second check.

:func:`form_param` writes a param's bounds and patterns into its description (the form does
not show them) and uses exclusive integer bounds (the form clamps to inclusive ones);
:func:`check_params` checks the values again for runs that skip the form, with one
:class:`~skewlab.errors.ConfigError` line. Only :data:`CHECKED` keywords are checked. Why:
docs/orchestration.md, "Form schemas", and docs/airflow.md, "The trigger forms".
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from skewlab.errors import ConfigError

__all__ = ["CHECKED", "FORM_ONLY", "allowed", "check", "check_params", "form_param"]

CHECKED = frozenset(
    {
        "type",
        "enum",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "pattern",
        "minLength",
        "items",
        "minItems",
        "maxItems",
        "uniqueItems",
    }
)
"""The JSON-schema keywords :func:`check` implements, with JSON schema's meaning except that
an integer must be an ``int`` (JSON schema also takes ``10.0``; the settings need an int)."""
FORM_ONLY = frozenset({"title", "description", "section", "examples", "values_display"})
"""Keywords that only steer Airflow's form."""

_TYPES: dict[str, str] = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "null": "empty (null)",
}


def _fmt(x: float) -> str:
    return f"{x:g}" if isinstance(x, float) else str(x)


def _bounds(schema: Mapping[str, Any], integer: bool) -> str:
    """The bounds in words; integer exclusive bounds as inclusive ones (``> 0`` is ``1..``)."""
    low, high = schema.get("minimum"), schema.get("maximum")
    xlow, xhigh = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if integer:
        low = xlow + 1 if xlow is not None and low is None else low
        high = xhigh - 1 if xhigh is not None and high is None else high
        xlow = xhigh = None
    lo = f">= {_fmt(low)}" if low is not None else f"> {_fmt(xlow)}" if xlow is not None else ""
    hi = f"<= {_fmt(high)}" if high is not None else f"< {_fmt(xhigh)}" if xhigh is not None else ""
    if low is not None and high is not None:
        return f"in {_fmt(low)}..{_fmt(high)}"
    return " and ".join(p for p in (lo, hi) if p)


def allowed(schema: Mapping[str, Any]) -> str:
    """What ``schema`` allows, in words: ``one of sim, live``, ``an integer in 1..64``..."""
    types = schema.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    if "enum" in schema:
        text = "one of " + ", ".join("null" if v is None else str(v) for v in schema["enum"])
        return text
    main = [t for t in types if t != "null"]
    if main == ["array"]:
        low, high = schema.get("minItems"), schema.get("maxItems")
        size = (
            f"{low}..{high} "
            if low is not None and high is not None
            else f"at least {low} "
            if low is not None
            else ""
        )
        text = f"a list of {size}value(s)"
        if schema.get("uniqueItems"):
            text += " without repeats"
        if "items" in schema:
            text += ", each " + allowed(schema["items"])
    else:
        text = " or ".join(_TYPES.get(t, t) for t in main) or "any value"
        bounds = _bounds(schema, integer=main == ["integer"])
        if bounds:
            text += f" {bounds}"
        if "pattern" in schema:
            text += f" matching {schema['pattern']}"
    if "null" in types:
        text += " (or empty)"
    return text


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list | tuple)
    raise ConfigError(f"form schema: unsupported type {kind!r}")


def _fits(value: Any, schema: Mapping[str, Any]) -> Any:
    """``None`` if ``value`` satisfies ``schema``, else the offending (sub-)value in a 1-tuple."""
    types = schema.get("type")
    if types is not None:
        kinds = [types] if isinstance(types, str) else list(types)
        if not any(_type_ok(value, k) for k in kinds):
            return (value,)
    if "enum" in schema and value not in schema["enum"]:
        return (value,)
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return (value,)
        if "maximum" in schema and value > schema["maximum"]:
            return (value,)
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return (value,)
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return (value,)
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return (value,)
        if "pattern" in schema and re.search(schema["pattern"], value) is None:
            return (value,)
    if isinstance(value, list | tuple):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get(
            "maxItems", len(value)
        ):
            return (value,)
        if schema.get("uniqueItems") and len({repr(v) for v in value}) != len(value):
            return (value,)
        for item in value:
            if "items" in schema and _fits(item, schema["items"]) is not None:
                return (item,)
    return None


def check(name: str, value: Any, schema: Mapping[str, Any], words: str | None = None) -> Any:
    """``value`` if it satisfies ``schema``, else ConfigError ``param <name>: <bad> is not
    allowed ...; allowed: <words>`` (the element too, when one item of a list is bad).
    ``words`` replaces :func:`allowed`'s text where the schema says it badly (a pattern)."""
    bad = _fits(value, schema)
    if bad is None:
        return value
    where = "" if bad[0] is value else f" (in {value!r})"
    what = words or allowed(schema)
    raise ConfigError(f"param {name}: {bad[0]!r}{where} is not allowed; allowed: {what}")


def check_params(
    params: Mapping[str, Any],
    schemas: Mapping[str, Mapping[str, Any]],
    words: Mapping[str, str] | None = None,
) -> None:
    """Check every param of ``params`` against its schema (``words``: :func:`check`'s, by
    name); unknown names are refused too."""
    unknown = sorted(set(params) - set(schemas))
    if unknown:
        raise ConfigError(
            f"unknown param(s) {', '.join(unknown)}; valid: {', '.join(sorted(schemas))}"
        )
    for name, value in params.items():
        check(name, value, schemas[name], (words or {}).get(name))


def form_param(
    name: str,
    default: Any,
    schema: Mapping[str, Any],
    description: str,
    *,
    title: str | None = None,
    section: str | None = None,
    words: str | None = None,
) -> dict[str, Any]:
    """``airflow.sdk.Param(**kwargs)`` arguments: ``schema`` plus a description that ends
    with ``Allowed: ...`` (the form shows it under the field) and an optional section.

    The default must satisfy the schema (a form whose defaults are refused cannot be
    submitted); unsupported keywords are refused, so :func:`check` checks every one.
    """
    extra = sorted(set(schema) - CHECKED - FORM_ONLY)
    if extra:
        raise ConfigError(f"form schema: unsupported keyword(s) {', '.join(extra)}")
    kwargs: dict[str, Any] = {
        "default": check(name, default, schema, words),
        **schema,
        "description": f"{description} Allowed: {words or allowed(schema)}.",
    }
    if title is not None:
        kwargs["title"] = title
    if section is not None:
        kwargs["section"] = section
    return kwargs
