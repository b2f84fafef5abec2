"""Fairness degree (seed Eq. 5) and application average (Eq. 6), checked by hand."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.state import FairnessTracker, app_fairness, fairness_degree

pytestmark = pytest.mark.unit


def test_fd_by_hand():
    # 10 s needing 2 with 2 given, then 10 s needing 4 with 2 given, then 10 s 4 of 4
    fd = fairness_degree([10, 10, 10], [2, 2, 4], [2, 4, 4])
    assert fd == pytest.approx([20 / 20, 40 / 60, 80 / 100])


def test_surplus_does_not_count_and_zero_need_reads_one():
    assert fairness_degree([1, 1], [5, 8], [0, 4]).tolist() == [1.0, 1.0]


def test_tracker_matches_the_array_form():
    tr = FairnessTracker()
    for dt, c, n in [(0.5, 1, 2), (1.5, 3, 3), (2.0, 1, 4)]:
        tr.add(dt, c, n)
    assert tr.fd == pytest.approx(fairness_degree([0.5, 1.5, 2.0], [1, 3, 1], [2, 3, 4])[-1])


def test_app_average_over_bottlenecked_operators():
    assert app_fairness([1.0, 0.5, 0.0]) == pytest.approx(0.5)
    assert app_fairness([1.0, 0.5, 0.0], [False, True, True]) == pytest.approx(0.25)
    assert app_fairness([0.3], [False]) == 1.0
    with pytest.raises(ConfigError):
        app_fairness([1.5])
    with pytest.raises(ConfigError):
        fairness_degree(np.ones(2), np.ones(3), np.ones(2))
