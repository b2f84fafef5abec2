"""The one registry lookup: a known name resolves (case and ``_``/``-`` insensitive), an
unknown one is a one-line :class:`UnknownNameError` listing the valid names, with the
closest one as a "did you mean" when the name looks like a misspelling of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from skewlab.autoscale.algorithms import ALGORITHMS
from skewlab.control import STEPS
from skewlab.errors import ConfigError, UnknownNameError
from skewlab.experiments import registry as experiments
from skewlab.grouping import GROUPINGS
from skewlab.hashing import PARTITIONERS
from skewlab.rebalance import REBALANCERS
from skewlab.registry import closest, known, normalize, resolve
from skewlab.sketch import SKETCHES
from skewlab.state.policies import POLICIES
from skewlab.workload.spec import WORKLOADS

pytestmark = pytest.mark.unit

REGISTRIES: dict[str, Mapping[str, Any]] = {
    "grouping": GROUPINGS,
    "workload": WORKLOADS,
    "rebalancer": REBALANCERS,
    "sketch": SKETCHES,
    "scale-out policy": POLICIES,
    "autoscale algorithm": ALGORITHMS,
    "partitioner": PARTITIONERS,
    "experiment": experiments(),
    "control step": STEPS,
}
"""Every registry :func:`resolve` serves, by the kind its errors name."""


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_every_registered_name_resolves_in_any_case(kind: str) -> None:
    reg = REGISTRIES[kind]
    for name in reg:
        assert resolve(reg, name, kind) is reg[name]
        assert resolve(reg, name.upper().replace("-", "_"), kind) is reg[name]


@pytest.mark.parametrize("kind", sorted(REGISTRIES))
def test_a_misspelt_name_is_one_line_naming_the_meant_one(kind: str) -> None:
    """A name with one letter too many suggests the name it misspells, in every registry."""
    reg = REGISTRIES[kind]
    for name in reg:
        with pytest.raises(UnknownNameError) as info:
            resolve(reg, f"{name}x", kind)
        err = info.value
        assert err.suggestion == name
        text = str(err)
        assert "\n" not in text
        assert text.startswith(f"unknown {kind} '{name}x' (did you mean '{name}'?); valid: ")
        assert text.endswith(", ".join(sorted(reg)))
        assert isinstance(err, ConfigError)


@pytest.mark.parametrize(
    ("kind", "typed", "meant"),
    [
        ("grouping", "dgk", "dkg"),
        ("grouping", "PARTIAL_KYE", "partial-key"),
        ("workload", "cuntry", "country"),
        ("workload", "Zipff", "zipf"),
        ("rebalancer", "smalop", "smalops"),
        ("scale-out policy", "activ-backup", "active-backup"),
        ("experiment", "dkg-contry", "dkg-country"),
    ],
)
def test_the_suggestion_for_typical_typos(kind: str, typed: str, meant: str) -> None:
    assert closest(typed, REGISTRIES[kind]) == meant


@pytest.mark.parametrize("typed", ["bogus", "", "zzzzzz"])
def test_a_name_like_no_registered_one_gets_no_suggestion(typed: str) -> None:
    with pytest.raises(UnknownNameError) as info:
        resolve(GROUPINGS, typed, "grouping")
    assert info.value.suggestion is None
    assert "did you mean" not in str(info.value)
    assert info.value.valid == sorted(GROUPINGS)


def test_normalize_is_lower_case_with_dashes() -> None:
    assert normalize("  PARTIAL_KEY ") == "partial-key"
    assert normalize("d-Choices") == "d-choices"


def test_known_gives_the_registered_spelling_or_a_did_you_mean() -> None:
    names = ("checkpoint", "active-backup", "restart")
    assert known("ACTIVE_BACKUP", names, "scale-out policy") == "active-backup"
    with pytest.raises(UnknownNameError) as info:
        known("activ-backup", names, "scale-out policy")
    assert str(info.value) == (
        "unknown scale-out policy 'activ-backup' (did you mean 'active-backup'?); "
        "valid: active-backup, checkpoint, restart"
    )
