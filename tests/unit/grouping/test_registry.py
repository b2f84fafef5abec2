"""The grouping registry and make_grouping."""

from __future__ import annotations

import pytest

from skewlab.errors import ConfigError, UnknownNameError
from skewlab.grouping import (
    GROUPING_NAMES,
    GROUPINGS,
    DKGConfig,
    PKGConfig,
    make_grouping,
)

pytestmark = pytest.mark.unit


def test_every_canonical_name_is_registered_under_its_own_name() -> None:
    for name in GROUPING_NAMES:
        assert GROUPINGS[name].name == name
    assert set(GROUPINGS.values()) == {GROUPINGS[n] for n in GROUPING_NAMES}


@pytest.mark.parametrize(
    ("alias", "cls"),
    [
        ("PARTIAL_KEY", PKGConfig),
        ("partial-key", PKGConfig),
        ("DYNAMIC_KEY", DKGConfig),
        (" Dkg ", DKGConfig),
    ],
)
def test_aliases_resolve(alias: str, cls: type) -> None:
    assert isinstance(make_grouping(alias, workers=3), cls)


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError) as err:
        make_grouping("fields", workers=3)
    for name in GROUPING_NAMES:
        assert name in str(err.value)


def test_parameters_are_passed_and_checked() -> None:
    cfg = make_grouping("dkg", workers=6, warmup=30.0, capacity=200)
    assert cfg == DKGConfig(workers=6, warmup=30.0, capacity=200)
    with pytest.raises(ConfigError, match="no parameter wrmup") as err:
        make_grouping("dkg", workers=6, wrmup=30.0)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="workers"):
        make_grouping("pkg")
    with pytest.raises(ConfigError, match="warmup"):
        make_grouping("dkg", workers=6, warmup=-1)


def test_a_config_passes_through_or_is_replaced() -> None:
    cfg = DKGConfig(workers=4)
    assert make_grouping(cfg) is cfg
    assert make_grouping(cfg, workers=8, warmup=1.0) == DKGConfig(workers=8, warmup=1.0)
