"""``form_schema``: the second check agrees with JSON schema; its words; defaults must fit."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from skewlab.errors import ConfigError
from skewlab.orchestration.form_schema import allowed, check, check_params, form_param
from skewlab.orchestration.sweep_form import param_schemas

SCHEMAS: dict[str, dict[str, Any]] = {
    "int": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 65},
    "num": {"type": ["number", "null"], "minimum": 0, "maximum": 10},
    "enum": {"type": "string", "enum": ["a", "b"]},
    "pat": {"type": "string", "pattern": "^(zipf|country)(:.+)?$", "minLength": 1},
    "ints": {
        "type": "array",
        "items": {"type": "integer", "minimum": 1, "maximum": 64},
        "minItems": 1,
        "maxItems": 3,
        "uniqueItems": True,
    },
}
VALUES: list[Any] = [
    None, True, 0, 1, 64, 65, -1, 1.5, 10.5, "", "a", "c", "zipf", "zipf:s=1",
    "ZIPF", "x:zipf", [], [1], [1, 1], [0], [1, 2, 3, 4], [1, "2"], [True], "1", {"a": 1},
]  # fmt: skip


def _json_ok(value: Any, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


@pytest.mark.unit
@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_check_accepts_exactly_what_json_schema_accepts(kind: str) -> None:
    schema = SCHEMAS[kind]
    for value in VALUES:
        try:
            check("p", value, schema)
            ours = True
        except ConfigError:
            ours = False
        assert ours == _json_ok(value, schema), (kind, value)


@pytest.mark.unit
def test_the_sweep_schemas_agree_with_json_schema_on_their_defaults_and_bad_values() -> None:
    for name, kw in param_schemas().items():
        schema = {k: v for k, v in kw.items() if k not in ("default", "description")}
        for value in [kw["default"], *VALUES]:
            try:
                check(name, value, schema)
                ours = True
            except ConfigError:
                ours = False
            assert ours == _json_ok(value, schema), (name, value)


@pytest.mark.unit
def test_an_integral_float_is_not_an_integer_here() -> None:
    """Stricter than JSON schema (which takes 10.0 as an integer): the settings need an int."""
    assert _json_ok(10.0, SCHEMAS["int"])
    with pytest.raises(ConfigError, match=r"param p: 10\.0 is not allowed"):
        check("p", 10.0, SCHEMAS["int"])


@pytest.mark.unit
def test_integer_exclusive_bounds_read_as_the_inclusive_range() -> None:
    assert allowed(SCHEMAS["int"]) == "an integer in 1..64"
    assert "each an integer in 1..64" in allowed(SCHEMAS["ints"])
    with pytest.raises(ConfigError) as info:
        check("workers", [4, 0], SCHEMAS["ints"])
    assert str(info.value).startswith("param workers: 0 (in [4, 0]) is not allowed; allowed: ")


@pytest.mark.unit
def test_form_param_refuses_a_default_outside_its_schema_and_unchecked_keywords() -> None:
    with pytest.raises(ConfigError, match="param events: 0"):
        form_param("events", 0, SCHEMAS["int"], "Events.")
    with pytest.raises(ConfigError, match="unsupported keyword"):
        form_param("x", "a", {"type": "string", "format": "email"}, "X.")
    kw = form_param("mode", "a", SCHEMAS["enum"], "Mode.", section="Grid")
    assert kw["default"] == "a" and kw["section"] == "Grid"
    with pytest.raises(ConfigError, match="unknown param"):
        check_params({"typo": 1}, {"mode": SCHEMAS["enum"]})
