"""The adapted any-fit heuristics on hand-made cases, including h(j, k) (Eq. 12-14)."""

from __future__ import annotations

import pytest

from skewlab.autoscale import AnyFit, Assignment, make_algorithm, moved_partitions, rscore
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("name", "speeds", "owner"),
    [
        ("ff", [60, 30, 50, 20], (0, 0, 1, 1)),
        ("ff", [50, 40, 30, 10], (0, 0, 1, 0)),  # 10 goes to the first bin that fits
        ("bf", [50, 40, 30, 10], (0, 0, 1, 0)),  # ... and to the fullest one
        ("wf", [50, 40, 30, 10], (0, 0, 1, 1)),  # ... or to the emptiest one
        ("nf", [50, 40, 30, 10], (0, 0, 1, 1)),  # only the last bin is open
        ("nf", [50, 60, 40], (0, 1, 1)),
        ("ffd", [10, 50, 40, 30], (0, 0, 0, 1)),  # 50, 40 | 30 | then 10 fills bin 0
        ("bfd", [10, 50, 40, 30], (0, 0, 0, 1)),
        ("wfd", [10, 50, 40, 30], (1, 0, 0, 1)),  # 10 to the emptier bin (30)
        ("nfd", [10, 50, 40, 30], (1, 0, 0, 1)),
    ],
)
def test_heuristics_by_hand_from_an_empty_group(name, speeds, owner):
    assert make_algorithm(name).assign(speeds, None, 100.0).owner == owner


def test_h_reopens_the_previous_consumer_when_it_is_unused():
    previous = Assignment((5, 3))
    nxt = make_algorithm("ff").assign([80, 80], previous, 100.0)
    assert nxt.owner == (5, 3)  # without h it would be (0, 1): both partitions moved
    assert list(moved_partitions(previous, nxt)) == []
    assert rscore(previous, nxt, [80, 80], 100.0) == 0.0


def test_h_falls_back_to_the_lowest_unused_consumer():
    previous = Assignment((2, 2))
    nxt = make_algorithm("ff").assign([80, 80], previous, 100.0)
    assert nxt.owner == (2, 0)  # g(1) = 2 is already open, f = 0
    assert list(moved_partitions(previous, nxt)) == [1]
    assert rscore(previous, nxt, [80, 80], 100.0) == pytest.approx(0.8)


def test_h_does_not_change_the_number_of_bins():
    speeds = [70, 20, 45, 45, 10, 90]
    fresh = make_algorithm("bfd").assign(speeds, None, 100.0)
    previous = Assignment((4, 7, 1, 1, 9, 2))
    adapted = make_algorithm("bfd").assign(speeds, previous, 100.0)
    assert adapted.consumers == fresh.consumers
    assert sorted(fresh.loads(speeds).values()) == sorted(adapted.loads(speeds).values())


def test_an_item_larger_than_capacity_gets_a_bin_of_its_own():
    nxt = make_algorithm("ff").assign([150, 10], None, 100.0)
    assert nxt.owner == (0, 1)


def test_zero_speeds_still_assign_every_partition():
    nxt = make_algorithm("wfd").assign([0, 0, 0], None, 100.0)
    assert nxt.owner == (0, 0, 0)


def test_invalid_fit_and_speeds_raise():
    with pytest.raises(ConfigError, match="fit must be one of"):
        AnyFit("random")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=">= 0"):
        make_algorithm("ff").assign([-1.0], None, 100.0)
    with pytest.raises(ConfigError, match="capacity"):
        make_algorithm("ff").assign([1.0], None, 0.0)
    with pytest.raises(ConfigError, match="partitions"):
        make_algorithm("ff").assign([1.0, 2.0], Assignment((0,)), 10.0)
