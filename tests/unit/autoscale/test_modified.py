"""Algorithm 1 (MWF, MBF, MWFP, MBFP) step by step on hand-made groups."""

from __future__ import annotations

import pytest

from skewlab.autoscale import Assignment, ModifiedAnyFit, make_algorithm, moved_partitions, rscore
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit

# consumer 0: partitions 0 (50) and 1 (30) = 80; consumer 1: partitions 2 (60) and 3 (5) = 65
PREVIOUS = Assignment((0, 0, 1, 1))
SPEEDS = [50.0, 30.0, 60.0, 5.0]


def test_mwf_sorts_consumers_by_cumulative_speed_and_moves_the_small_partition():
    nxt = make_algorithm("mwf").assign(SPEEDS, PREVIOUS, 100.0)
    # consumer 0 first: N empty, so it is opened with 50 and 30; consumer 1: 5 fits
    # consumer 0 (85), 60 does not, so consumer 1 is opened with 60
    assert nxt.owner == (0, 0, 1, 0)
    assert list(moved_partitions(PREVIOUS, nxt)) == [3]
    assert rscore(PREVIOUS, nxt, SPEEDS, 100.0) == pytest.approx(0.05)


def test_mwfp_sorts_consumers_by_their_largest_partition():
    nxt = make_algorithm("mwfp").assign(SPEEDS, PREVIOUS, 100.0)
    # consumer 1 first (60 > 50): opened with 60 and 5; consumer 0: 30 fits consumer 1
    assert nxt.owner == (0, 1, 1, 1)
    assert rscore(PREVIOUS, nxt, SPEEDS, 100.0) == pytest.approx(0.3)


def test_worst_and_best_fit_choose_different_open_bins():
    # consumer 1 (60) is kept, consumer 2 keeps 50 and gives 10 to consumer 1 (70);
    # consumer 0's 30 then fits both: MWF picks the emptiest (2), MBF the fullest (1)
    previous = Assignment((0, 1, 2, 2))
    speeds = [30.0, 60.0, 50.0, 10.0]
    assert make_algorithm("mwf").assign(speeds, previous, 100.0).owner == (2, 1, 2, 1)
    assert make_algorithm("mbf").assign(speeds, previous, 100.0).owner == (1, 1, 2, 1)


def test_partitions_that_no_longer_fit_are_repacked_decreasing():
    # consumer 0 now holds 70 + 40 > C: 40 is left over and goes to f(k) = 1
    nxt = make_algorithm("mwf").assign([70.0, 40.0], Assignment((0, 0)), 100.0)
    assert nxt.owner == (0, 1)
    assert list(moved_partitions(Assignment((0, 0)), nxt)) == [1]


def test_unassigned_partitions_are_packed_last_and_are_not_moves():
    previous = Assignment((0, -1, -1))
    nxt = make_algorithm("mbf").assign([60.0, 30.0, 50.0], previous, 100.0)
    assert nxt.owner == (0, 0, 1)
    assert rscore(previous, nxt, [60.0, 30.0, 50.0], 100.0) == 0.0


def test_first_iteration_packs_everything_decreasing():
    assert make_algorithm("mwf").assign([10, 50, 40, 30], None, 100.0).owner == (1, 0, 0, 1)


def test_names_and_validation():
    assert [make_algorithm(n).name for n in ("mwf", "mbf", "mwfp", "mbfp")] == [
        "mwf", "mbf", "mwfp", "mbfp",
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="'worst' or 'best'"):
        ModifiedAnyFit("first")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sort must be"):
        ModifiedAnyFit("worst", "size")  # type: ignore[arg-type]
