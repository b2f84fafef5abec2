"""The fixed / rebalanced queue latency model (Sec. VI-C, Eq. 16-27)."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.autoscale import Assignment, LatencyModel, LatencySegments
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit


def test_the_seeds_example_two_partitions_of_8_on_a_consumer_of_10():
    model = LatencyModel(consumer_capacity=10.0)
    seg = model.segments([Assignment((0, 0))], [[8.0, 8.0]])
    assert seg.slope == pytest.approx([0.1 - 0.0625])  # l = (0.1 - 0.0625) x
    assert seg.nbytes == pytest.approx([480.0])  # 30 s x 16 bytes/s
    st = seg.stats()
    assert st.summary.max == pytest.approx(18.0)
    assert st.summary.p50 == pytest.approx(9.0, rel=1e-6)
    assert st.summary.p90 == pytest.approx(16.2, rel=1e-6)
    assert st.summary.mean == pytest.approx(9.0)
    assert st.positive_share == pytest.approx(1.0)


def test_backlog_carries_over_to_the_next_iteration():
    model = LatencyModel(consumer_capacity=10.0)
    seg = model.segments([Assignment((0, 0))] * 2, [[8.0, 8.0]] * 2)
    assert seg.intercept == pytest.approx([0.0, 18.0])
    assert seg.max() == pytest.approx(36.0)


def test_rebalanced_queue_waits_5_s_then_catches_up():
    model = LatencyModel(consumer_capacity=120.0)
    # partition 1 (50) moves to consumer 0, which keeps partition 0 (30)
    seg = model.segments([Assignment((0, 1)), Assignment((0, 0))], [[30.0, 50.0]] * 2)
    # R_F = min(120, 30) = 30 (slope 0); R_R = 90 > 50, so latency falls from 5 s to 0
    m_r = 1 / 90 - 1 / 50
    assert seg.slope[-1] == pytest.approx(m_r)
    assert seg.intercept[-1] == 5.0
    assert seg.total == pytest.approx(30 * 30 + 30 * 50 + 30 * 30 + 30 * 50)
    positive = 5.0 / -m_r  # bytes until the rebalanced queue is drained
    assert seg.stats().positive_share == pytest.approx(positive / seg.total)
    assert seg.max() == pytest.approx(5.0)
    # over the bytes with latency > 0 (5 s down to 0 uniformly) p90 is 4.5 s
    assert seg.stats().positive_p90 == pytest.approx(4.5, rel=1e-6)
    assert seg.stats().summary.p90 == pytest.approx(
        (0.9 * seg.total - (seg.total - positive)) * -m_r
    )


def test_a_consumer_with_spare_capacity_has_no_latency():
    seg = LatencyModel(consumer_capacity=120.0).segments([Assignment((0,))] * 3, [[100.0]] * 3)
    assert seg.stats().summary.p99 == 0.0


def test_segments_count_and_quantile_edge_cases():
    seg = LatencySegments([1.0, -1.0, 0.0], [0.0, 10.0, 3.0], [10.0, 10.0, 10.0])
    # increasing 0..10, decreasing 10..0, constant 3
    assert seg.count_le(3.0) == pytest.approx(3.0 + 3.0 + 10.0)
    assert seg.quantile(0.0) == 0.0
    assert seg.quantile(1.0) == pytest.approx(10.0)
    assert LatencySegments([], [], []).stats().summary.n == 0
    with pytest.raises(ConfigError):
        seg.quantile(2.0)
    with pytest.raises(ConfigError):
        LatencyModel(consumer_capacity=1.0, rebalance_s=40.0)
    with pytest.raises(ConfigError):
        LatencyModel(1.0).segments([Assignment((0,))], np.zeros((2, 1)))
