"""The workload pattern of the trigger form against the parser it stands in for.

Whatever :func:`~skewlab.workload.spec.parse_workload` accepts (written in the
documented spelling: lower-case names, no spaces) the pattern accepts, so the
form never refuses a good spec; and the specs users get wrong (an unknown name,
an unknown parameter, a bare number for the country ratio) it refuses, so the
form refuses them before a run is created.
"""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError
from skewlab.orchestration.patterns import AUTOSCALE_WORKLOAD_PATTERN, workload_pattern
from skewlab.workload.spec import WORKLOADS, parse_workload

pytestmark = pytest.mark.unit

PATTERN = workload_pattern()
NAMES = [n for n in WORKLOADS if n != "trace"]
PARAM_NAMES = sorted({p for cls in WORKLOADS.values() for p in cls.PARAMS} | {"q", "ratio"})
VALUES = ["1", "1.5", "-2", "0", "80", "1e3", "abc", "US", "down", "up", "true"]


def _matches(spec: str) -> bool:
    return re.search(PATTERN, spec) is not None


def _parses(spec: str) -> bool:
    try:
        parse_workload(spec)
    except ConfigError:
        return False
    return True


def test_every_registered_workload_and_its_spec_match(tmp_path: Path) -> None:
    for name in NAMES:
        # the country workloads need their skew R; the others run on their defaults
        given = f"{name}:R80" if name.startswith("country") else name
        assert _parses(given) and not (given != name and _parses(name)), name
        spec = parse_workload(given).spec()
        assert _matches(given) and _matches(spec), spec
    trace = tmp_path / "events.csv"
    trace.write_text("key,ts\na,0\n")
    assert _matches(parse_workload(f"trace:{trace}").spec())
    for spec in ("COUNTRY_SKEW_R80", "COUNTRY_HALF_SKEW_R20", "country:R0,size=50", "zipf:"):
        assert _parses(spec) and _matches(spec), spec


@pytest.mark.parametrize(
    "spec",
    ["bogus", "zipf:q=1", "country:80", "zipf:s", "zipf:s=1=2", "trace:", "", "zipf s=1"],
)
def test_bad_specs_are_refused_by_both(spec: str) -> None:
    assert not _matches(spec)
    assert not _parses(spec)


_ARG = st.one_of(
    st.tuples(st.sampled_from(PARAM_NAMES), st.sampled_from(VALUES)).map("=".join),
    st.sampled_from(["R80", "r20", "R", "80", ""]),
)


@settings(max_examples=400, deadline=None)
@given(
    name=st.sampled_from([*NAMES, "zipfx", "countr"]),
    args=st.none() | st.lists(_ARG, max_size=4).map(",".join),
)
def test_the_pattern_accepts_every_spec_the_parser_accepts(name: str, args: str | None) -> None:
    spec = name if args is None else f"{name}:{args}"
    if _parses(spec):
        assert _matches(spec), spec
    else:
        assert not _matches(spec) or name in NAMES  # only bad values get past the pattern


def test_autoscale_workload_pattern_takes_the_documented_specs() -> None:
    schema = {"type": "string", "pattern": AUTOSCALE_WORKLOAD_PATTERN}
    for spec in ("stream:delta=5", "step:lo=0.1,hi=0.45,up=2,down=6", "const:level=0.5"):
        jsonschema.validate(spec, schema)
    for spec in ("steps:lo=1", "stream:5", "nope"):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(spec, schema)
