"""The key-granularity floor brackets the best whole-key assignment (checked by brute force)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.metrics import imb_score, key_floor, key_floor_assign, key_floor_lower

pytestmark = pytest.mark.unit


def _optimum(loads: np.ndarray, workers: int) -> float:
    return min(
        imb_score(np.bincount(np.array(a), weights=loads, minlength=workers))
        for a in itertools.product(range(workers), repeat=loads.size)
    )


@pytest.mark.parametrize("seed", range(40))
def test_lower_bound_and_assignment_bracket_the_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, w = int(rng.integers(2, 8)), int(rng.integers(2, 4))
    loads = rng.integers(0, 100, n) * (rng.random(n) < 0.9)
    best = _optimum(loads.astype(float), w)
    f = key_floor(loads, w)
    assert f.lower <= best + 1e-9
    assert f.achievable >= best - 1e-9
    placed = np.bincount(f.assignment, weights=loads, minlength=w)
    assert f.achievable == pytest.approx(imb_score(placed))
    assert f.assignment.min() >= 0 and f.assignment.max() < w


def test_a_dominant_key_sets_the_floor() -> None:
    # 60 alone on one engine, the four 10s on the other: loads 60 | 40, mean 50, std 10.
    loads = np.array([10, 60, 10, 10, 10])
    assert key_floor_lower(loads, 2) == pytest.approx(20.0)
    assert key_floor(loads, 2).achievable == pytest.approx(20.0)


def test_local_search_improves_on_lpt() -> None:
    # LPT gives {7, 4, 4} | {6, 5} = 15 | 11; the optimum is {7, 6} | {5, 4, 4} = 13 | 13.
    loads = np.array([7, 6, 5, 4, 4])
    a = key_floor_assign(loads, 2)
    assert imb_score(np.bincount(a, weights=loads, minlength=2)) == pytest.approx(0.0)


def test_divisible_load_has_a_zero_floor() -> None:
    assert key_floor(np.ones(100), 5).achievable == 0.0
    assert key_floor(np.zeros(3), 5).lower == 0.0


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_workers_must_be_positive_integers(bad: object) -> None:
    with pytest.raises(ConfigError):
        key_floor(np.ones(3), bad)  # type: ignore[arg-type]


def test_negative_loads_are_rejected() -> None:
    with pytest.raises(ConfigError):
        key_floor_lower(np.array([1.0, -1.0]), 2)
