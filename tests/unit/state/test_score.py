"""Bottleneck score: range, monotone in load; thresholds with hysteresis do not flap."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from skewlab.errors import ConfigError, StateError
from skewlab.state import Level, ScoreConfig, Signals, ThresholdConfig, bottleneck_score

pytestmark = pytest.mark.unit


def load_signals(rate: float, mu: float = 100.0, backlog_s: float = 0.0) -> Signals:
    """What an instance reports at offered ``rate``: a fluid queue's busy time and delay."""
    rho = rate / mu
    return Signals(rate, mu, backlog_s * mu, min(rho, 1.0), backlog_s + 1 / mu)


def test_score_is_monotone_in_load_and_bounded():
    rates = np.linspace(0, 300, 301)
    scores = [bottleneck_score(load_signals(r, backlog_s=max(0.0, r / 100 - 1) * 5)) for r in rates]
    assert all(b >= a for a, b in itertools.pairwise(scores))
    assert scores[0] == pytest.approx(100 * 0.15 * 0.01 / 2.0)  # only the service time
    assert scores[-1] <= 100.0
    assert bottleneck_score(Signals(1e9, 1, 1e12, 5.0, 1e9)) == pytest.approx(100.0, abs=1e-3)


def test_default_thresholds_sit_where_the_module_doc_says():
    assert bottleneck_score(load_signals(50)) < 45 < bottleneck_score(load_signals(85))
    assert bottleneck_score(load_signals(99)) < 70
    assert bottleneck_score(load_signals(110, backlog_s=2.0)) > 70
    assert bottleneck_score(load_signals(40)) < 25


def test_each_signal_raises_the_score():
    base = Signals(50, 100, 10, 0.5, 0.2)
    s0 = bottleneck_score(base)
    for bumped in (
        Signals(60, 100, 10, 0.5, 0.2),
        Signals(50, 100, 20, 0.5, 0.2),
        Signals(50, 100, 10, 0.6, 0.2),
        Signals(50, 100, 10, 0.5, 0.3),
    ):
        assert bottleneck_score(bumped) > s0


def test_noisy_signal_near_a_threshold_does_not_flap():
    rng = np.random.default_rng(3)
    det = ThresholdConfig().build()
    levels = [det.observe(45.0 + 4.0 * rng.uniform(-1, 1)) for _ in range(500)]
    changes = sum(a != b for a, b in itertools.pairwise(levels))
    assert changes <= 1
    # without hysteresis and dwell the same signal flaps many times
    raw = ThresholdConfig(hysteresis=0.0, dwell=1).build()
    rng = np.random.default_rng(3)
    raw_levels = [raw.observe(45.0 + 4.0 * rng.uniform(-1, 1)) for _ in range(500)]
    assert sum(a != b for a, b in itertools.pairwise(raw_levels)) > 50


def test_levels_enter_at_the_threshold_and_leave_with_margin():
    det = ThresholdConfig(dwell=1).build()
    assert det.observe(44.9) == Level.NORMAL
    assert det.observe(45.0) == Level.ALARMING
    assert det.observe(41.0) == Level.ALARMING  # within hysteresis
    assert det.observe(70.0) == Level.SCALE_OUT
    assert det.observe(66.0) == Level.SCALE_OUT
    assert det.observe(64.9) == Level.ALARMING
    assert det.observe(39.9) == Level.NORMAL
    assert det.observe(24.9) == Level.SCALE_IN
    assert det.observe(29.0) == Level.SCALE_IN
    assert det.observe(30.0) == Level.NORMAL


def test_dwell_needs_consecutive_observations():
    det = ThresholdConfig(dwell=3).build()
    assert [det.observe(s) for s in (50, 50, 10, 50, 50, 50)][-1] == Level.ALARMING
    assert det.snapshot()[0] == int(Level.ALARMING)
    again = ThresholdConfig(dwell=3).build(det.snapshot())
    assert again.level == Level.ALARMING


def test_bad_configs_say_what_is_allowed():
    with pytest.raises(ConfigError, match="scale_in <= alarming < scale_out"):
        ThresholdConfig(alarming=80)
    with pytest.raises(ConfigError, match="hysteresis"):
        ThresholdConfig(hysteresis=30)
    with pytest.raises(ConfigError, match="sum to 1"):
        ScoreConfig(w_rho=0.9)
    with pytest.raises(StateError):
        ThresholdConfig().build((9, 0, 0))


def test_alarming_zero_alarms_always():
    det = ThresholdConfig(scale_in=0, alarming=0, dwell=1).build()
    assert det.observe(0.0) == Level.ALARMING
