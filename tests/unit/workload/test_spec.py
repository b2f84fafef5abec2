"""Workload spec strings: parsing, aliases, round trips and one-line errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.workload import (
    WORKLOAD_NAMES,
    WORKLOADS,
    CountryHalfWorkload,
    CountryWorkload,
    DynamicWorkload,
    EpsSwitchWorkload,
    ZipfWorkload,
    parse_workload,
)

pytestmark = pytest.mark.unit


def test_registry_names():
    assert tuple(WORKLOADS) == WORKLOAD_NAMES
    assert set(WORKLOAD_NAMES) == {
        "zipf",
        "country",
        "country-half",
        "eps-switch",
        "dynamic",
        "trace",
    }
    assert all(cls.name == name for name, cls in WORKLOADS.items())


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("zipf:s=1.1,v=2.72,keys=1000", ZipfWorkload(seed=7, keys=1_000)),
        ("zipf", ZipfWorkload(seed=7)),
        ("ZIPF: s = 1.5 ", ZipfWorkload(seed=7, s=1.5)),
        ("country:R80", CountryWorkload(seed=7, ratio=80)),
        ("country:r=0,hot=United Kingdom", CountryWorkload(seed=7, ratio=0, hot="United Kingdom")),
        ("COUNTRY_SKEW_R100", CountryWorkload(seed=7, ratio=100)),
        ("country-half:R80", CountryHalfWorkload(seed=7, ratio=80)),
        ("COUNTRY_HALF_SKEW_R80", CountryHalfWorkload(seed=7, ratio=80)),
        ("eps-switch", EpsSwitchWorkload(seed=7)),
        ("eps_switch:low=0.5,high_s=60", EpsSwitchWorkload(seed=7, low=0.5, high_s=60.0)),
        ("dynamic", DynamicWorkload(seed=7)),
        ("dynamic:shift=5,direction=UP", DynamicWorkload(seed=7, shift=5, direction="up")),
    ],
)
def test_parse(spec, expected):
    assert parse_workload(spec, seed=7) == expected


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("poisson", "valid: country, country-half, dynamic, eps-switch, trace, zipf"),
        ("", "non-empty"),
        ("zipf:q=1", "allowed: s, v, keys, size"),
        ("zipf:keys=many", "keys must be int"),
        ("zipf:s=1,s=2", "twice"),
        ("zipf:1.1", "use name=value"),
        ("zipf:keys=0", "keys must be an integer"),
        ("country:80", "R<percent>"),
        ("country:R80,R90", "R<percent>"),
        ("country:R120", "0..100"),
        ("dynamic:direction=left", "down, up"),
        ("trace:", "give the file"),
        ("trace:/no/such/file.csv", "not found"),
    ],
)
def test_bad_specs_say_what_is_allowed(spec, match):
    with pytest.raises(ConfigError, match=match) as info:
        parse_workload(spec)
    assert "\n" not in str(info.value)


def test_unknown_name_is_an_unknown_name_error():
    with pytest.raises(UnknownNameError) as info:
        parse_workload("nope:a=1")
    assert info.value.valid == sorted(WORKLOAD_NAMES)


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(min_value=0, max_value=2**32),
    s=st.floats(min_value=0.05, max_value=5.0, allow_nan=False),
    v=st.floats(min_value=0.01, max_value=100.0, allow_nan=False),
    keys=st.integers(min_value=1, max_value=10**6),
    ratio=st.integers(min_value=0, max_value=100),
    size=st.integers(min_value=0, max_value=10**6),
    shift=st.integers(min_value=0, max_value=1),
    direction=st.sampled_from(["up", "down"]),
)
def test_spec_round_trips_for_any_valid_config(seed, s, v, keys, ratio, size, shift, direction):
    configs = [
        ZipfWorkload(seed=seed, s=s, v=v, keys=keys, size=size),
        CountryWorkload(seed=seed, ratio=ratio, size=size),
        CountryHalfWorkload(seed=seed, ratio=ratio, at=keys, hot="Peru"),
        EpsSwitchWorkload(seed=seed, low=s, high=s + 1, low_s=v, keys=keys, v=v),
        DynamicWorkload(seed=seed, s=s, v=v, keys=keys, shift=shift, direction=direction),
    ]
    for w in configs:
        assert parse_workload(w.spec(), seed=seed) == w


@pytest.mark.parametrize(
    "spec",
    ["country", "country:", "country:hot=Peru", "country-half", "country-half:size=50", "Country"],
)
def test_a_country_workload_without_its_skew_is_refused_in_one_line(spec):
    """R is the point of a country workload: none given is refused, not run at a default."""
    with pytest.raises(ConfigError) as info:
        parse_workload(spec)
    text = str(info.value)
    assert "\n" not in text
    assert "needs its skew R" in text and ":R80" in text


@pytest.mark.parametrize(
    ("spec", "ratio"),
    [("country:R0", 0), ("country:r=60", 60), ("COUNTRY_SKEW_R50", 50), ("country-half:R80", 80)],
)
def test_a_country_workload_with_its_skew_parses(spec, ratio):
    assert parse_workload(spec).ratio == ratio


@pytest.mark.parametrize(
    ("spec", "meant"),
    [("cuntry:R80", "country"), ("country_hlf:R80", "country-half"), ("zipff", "zipf")],
)
def test_a_misspelt_workload_says_which_one_it_meant(spec, meant):
    with pytest.raises(UnknownNameError) as info:
        parse_workload(spec)
    assert info.value.suggestion == meant
    assert f"(did you mean {meant!r}?)" in str(info.value) and "\n" not in str(info.value)
