"""Measurement streams (Sec. VI-B, Eq. 15)."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.autoscale import MeasurementStream
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit


def test_shape_seed_and_step_bound():
    a = MeasurementStream(partitions=7, measurements=50, delta=10, capacity=200.0, seed=4)
    s = a.generate()
    assert s.shape == (50, 7)
    assert np.array_equal(s, a.generate())
    assert not np.array_equal(s, MeasurementStream(7, 50, 10, capacity=200.0, seed=5).generate())
    assert np.all(np.abs(np.diff(s, axis=0)) <= 10 / 100 * 200.0 + 1e-9)
    assert s.min() >= 0 and s.max() <= 200.0
    assert np.all(s[0] <= 200.0)


def test_fixed_starts_and_delta_zero():
    for start, value in ((0.0, 0.0), (50.0, 50.0), (100.0, 100.0)):
        s = MeasurementStream(4, 5, delta=0, start=start).generate()
        assert np.all(s == value)


def test_unclipped_follows_eq_15_verbatim():
    s = MeasurementStream(50, 200, delta=25, start=100.0, clip=False, seed=2).generate()
    assert s.max() > 100.0 and s.min() >= 0.0


@pytest.mark.parametrize(
    "kwargs",
    [{"partitions": 0}, {"measurements": 0}, {"delta": -1}, {"start": "zipf"}, {"start": 150.0}],
)
def test_bad_parameters_raise(kwargs):
    with pytest.raises(ConfigError):
        MeasurementStream(**kwargs)
