"""One DAG param described once: its default, its JSON schema and its re-validation.

A :class:`ParamSpec` is what the Airflow trigger form enforces (``schema()``,
passed to ``airflow.sdk.Param``) and what :func:`ParamSpec.check` enforces a
second time in plain Python, for runs that skip the form (the REST API,
``dag.test(run_conf=...)``). Both sides read the same fields, so the form and
the re-validation cannot drift apart. Every error is a one-line
:class:`~skewlab.errors.ConfigError` naming the param and what it allows.

Kinds: ``string``, ``integer``, ``number``, ``boolean`` and ``object``. An
object param (a JSON dict, e.g. a policy's thresholds) lists its keys as nested
specs in ``properties``; other keys are refused, and each value is checked by
its key's spec (numbers keep their JSON type there: ``5`` stays an int, since a
policy may read an int and a float differently).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from skewlab.errors import ConfigError

__all__ = ["OFF", "Kind", "ParamSpec", "Scope", "one_line"]

Kind = Literal["string", "integer", "number", "boolean", "object"]

Scope = Literal["both", "grouping", "autoscale"]
"""Which experiment a param belongs to: the grouping run, the autoscale run, or both."""

OFF = "none"
"""The value of a switch param (``rebalance``, ``scale_out``, ``autoscale``) that is off."""

_WHAT = {
    "string": "a non-empty string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "object": "an object",
}


@dataclass(frozen=True)
class ParamSpec:
    """One DAG param: name, settings field, default and JSON-schema constraints.

    Invariants: ``default`` satisfies the constraints (checked by the unit tests
    through ``jsonschema`` and through :meth:`check`); ``properties`` is empty
    unless ``kind == "object"``. ``needs`` names a switch param (``rebalance``,
    ``scale_out``, ``autoscale``) that must not be ``"none"`` for this param to
    differ from its default; ``scope`` says which experiment reads it.
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
    nullable: bool = False
    """``null`` is allowed too (the form's way to leave an optional field empty)."""
    pattern: str | None = None
    """A regular expression the string must contain a match of (JSON schema semantics)."""
    examples: tuple[str, ...] | None = None
    """Proposals the form shows in a drop-down (free text stays possible)."""
    properties: tuple[ParamSpec, ...] = ()
    section: str | None = None
    scope: Scope = "grouping"
    needs: str | None = None
    allowed_text: str | None = None
    """What is allowed, in words, when the constraints alone say it badly (a pattern)."""
    values_display: tuple[tuple[str, str], ...] | None = None
    """Labels the form's drop-down shows for the values of :attr:`enum` (value, label)."""
    applies: tuple[str, ...] | None = None
    """The values of the ``workload`` param this param is read for (None: every one)."""

    def schema(self) -> dict[str, Any]:
        """The JSON-schema keywords of this param (what Airflow's form validates)."""
        kind: Any = [self.kind, "null"] if self.nullable else self.kind
        out: dict[str, Any] = {"type": kind, "title": self.title}
        if self.section is not None:
            out["section"] = self.section
        if self.enum is not None:
            out["enum"] = list(self.enum)
        if self.minimum is not None:
            out["minimum"] = self.minimum
        if self.maximum is not None:
            out["maximum"] = self.maximum
        if self.exclusive_minimum is not None:
            out["exclusiveMinimum"] = self.exclusive_minimum
        if self.pattern is not None:
            out["pattern"] = self.pattern
        elif self.kind == "string" and self.enum is None:
            out["minLength"] = 1
        if self.examples is not None:
            out["examples"] = list(self.examples)
        if self.values_display is not None:
            out["values_display"] = dict(self.values_display)
        if self.kind == "object":
            out["properties"] = {p.name: p.schema() for p in self.properties}
            out["additionalProperties"] = False
        return out

    def form_schema(self) -> dict[str, Any]:
        """:meth:`schema` for a field of Airflow's trigger form: widgets that cannot hold a
        bad value.

        An :attr:`enum` is a drop-down (labelled by :attr:`values_display`); a bounded
        number is a number input that brings a value outside ``minimum`` .. ``maximum``
        back into range as it loses focus (the description says the range), so the
        bounds are inclusive: a number param that must be ``> 0`` carries a positive
        ``minimum`` instead. An ``exclusiveMinimum`` left over is kept for the API's check
        (the form's input cannot show it).
        """
        return self.schema()

    def allowed(self) -> str:
        """What values are allowed, in words (for error messages)."""
        if self.allowed_text is not None:
            return self.allowed_text
        if self.enum is not None:
            return "one of " + ", ".join(self.enum)
        if self.kind == "object":
            return "an object with keys among " + ", ".join(p.name for p in self.properties)
        parts = [_WHAT[self.kind]]
        low, excl, high = self.minimum, self.exclusive_minimum, self.maximum
        if excl is not None:
            parts.append(f"in ({excl:g}, {_n(high)}]" if high is not None else f"> {excl:g}")
        elif low is not None:
            parts.append(f"in {_n(low)}..{_n(high)}" if high is not None else f">= {_n(low)}")
        elif high is not None:
            parts.append(f"<= {_n(high)}")
        if self.nullable:
            parts.append("or null")
        return " ".join(parts)

    def check(self, value: Any, *, coerce: bool = True, label: str | None = None) -> Any:
        """``value`` if it satisfies this spec, else a one-line ConfigError.

        With ``coerce`` a number comes back as a float (ints are accepted for
        numbers); an object comes back as a new dict with each key checked.
        ``label`` names the value in the error (default ``param <name>``).
        """
        label = label or f"param {self.name}"
        if value is None and self.nullable:
            return None
        if not self._value_ok(value):
            raise ConfigError(f"{label} must be {self.allowed()}, got {value!r}")
        if self.kind == "object":
            return self._check_object(value, label)
        return float(value) if self.kind == "number" and coerce else value

    def differs(self, value: Any) -> bool:
        """Whether a checked ``value`` is not this param's default."""
        return bool(value != self.default)

    def _value_ok(self, value: Any) -> bool:
        if not self._type_ok(value):
            return False
        if self.kind in ("integer", "number"):
            v = float(value)
            if not (
                math.isfinite(v)
                and (self.minimum is None or v >= self.minimum)
                and (self.maximum is None or v <= self.maximum)
                and (self.exclusive_minimum is None or v > self.exclusive_minimum)
            ):
                return False
        if self.enum is not None and value not in self.enum:
            return False
        return self.pattern is None or re.search(self.pattern, value) is not None

    def _type_ok(self, value: Any) -> bool:
        if self.kind == "string":
            return isinstance(value, str) and (self.pattern is not None or bool(value.strip()))
        if self.kind == "boolean":
            return isinstance(value, bool)
        if self.kind == "object":
            return isinstance(value, Mapping) and all(isinstance(k, str) for k in value)
        if isinstance(value, bool):
            return False
        if self.kind == "integer":
            return isinstance(value, int)
        return isinstance(value, int | float)

    def _check_object(self, value: Mapping[str, Any], label: str) -> dict[str, Any]:
        keys = {p.name: p for p in self.properties}
        unknown = sorted(set(value) - set(keys))
        if unknown:
            raise ConfigError(
                f"{label} has no key {', '.join(unknown)}; valid: {', '.join(keys) or 'none'}"
            )
        return {k: keys[k].check(v, coerce=False, label=f"{label}.{k}") for k, v in value.items()}


def _n(x: float) -> str:
    """A bound as a reader writes it: ``64``, ``0.05``, ``10,000,000`` (not ``1e+07``)."""
    return f"{int(x):,}" if float(x).is_integer() and abs(x) >= 10_000 else f"{x:g}"


def one_line(text: object) -> str:
    """``text`` with all whitespace runs (newlines included) collapsed to one space."""
    return " ".join(str(text).split())
