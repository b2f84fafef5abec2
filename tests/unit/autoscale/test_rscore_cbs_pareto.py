"""Rscore (Eq. 11), CBS (Eq. 28), average Rscore (Eq. 29) and the Pareto front by hand."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.autoscale import (
    Assignment,
    average_rscore,
    cbs,
    moved_partitions,
    pareto_front,
    rscore,
)
from skewlab.autoscale.base import Capacity
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit


def test_rscore_of_the_seeds_example():
    # three partitions of 100 bytes/s each rebalanced, C = 100 bytes/s -> Rscore = 3
    prev = Assignment((0, 0, 1, 2))
    cur = Assignment((1, 2, 0, 2))
    assert rscore(prev, cur, [100, 100, 100, 7], 100.0) == pytest.approx(3.0)


def test_arrivals_and_departures_are_not_moves():
    prev = Assignment((-1, 0, 1))
    cur = Assignment((0, -1, 1))
    assert list(moved_partitions(prev, cur)) == []
    assert rscore(None, cur, [5, 5, 5], 10.0) == 0.0


def test_cbs_by_hand():
    # algorithm 0 always has the fewest; algorithm 1 has 3 instead of 2 once
    assert cbs([[2, 3], [3, 3]]) == pytest.approx([0.0, 0.25])
    with pytest.raises(ConfigError):
        cbs([[0, 1]])


def test_average_rscore_by_hand():
    assert average_rscore([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]]) == pytest.approx([1.0, 1.0])
    assert float(average_rscore([0.5, 1.5])) == pytest.approx(1.0)


def test_pareto_front_by_hand():
    pts = [(0.0, 3.0), (1.0, 1.0), (2.0, 2.0), (0.5, 0.5), (0.5, 0.5)]
    assert pareto_front(pts) == [0, 3, 4]
    assert pareto_front(np.array([[1.0, 1.0]])) == [0]


def test_capacity_rule():
    cap = Capacity(consumer=6.0)
    assert cap.c == pytest.approx(5.0)
    assert Capacity.from_bin(100.0).consumer == pytest.approx(120.0)
    with pytest.raises(ConfigError):
        Capacity(consumer=1.0, bin=2.0)
    with pytest.raises(ConfigError):
        Capacity(consumer=0.0)
