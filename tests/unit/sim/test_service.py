"""Service-time models and their microsecond spec."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.sim.service import ConstantService, UniformService, parse_service_us

pytestmark = pytest.mark.unit


def test_constant() -> None:
    svc = ConstantService(1e-3)
    assert svc.mean == 1e-3
    assert np.all(svc.sample(5, np.random.default_rng(0)) == 1e-3)


def test_uniform_range_and_seed() -> None:
    svc = UniformService(10e-6, 50e-6)
    a = svc.sample(10_000, np.random.default_rng(3))
    b = svc.sample(10_000, np.random.default_rng(3))
    assert np.array_equal(a, b)
    assert a.min() >= 10e-6 and a.max() <= 50e-6
    assert a.mean() == pytest.approx(svc.mean, rel=0.02)


def test_parse() -> None:
    assert parse_service_us("50") == ConstantService(50e-6)
    assert parse_service_us(" 10..50 ") == UniformService(10e-6, 50e-6)
    assert parse_service_us(1000) == ConstantService(1e-3)


@pytest.mark.parametrize("bad", ["", "abc", "0", "-5", "50..10", "1..x"])
def test_parse_rejects(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_service_us(bad)
