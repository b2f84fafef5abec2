"""Advice on streams whose answer is known: uniform keys, one hot key, and the reason's figures."""

from __future__ import annotations

import re

import numpy as np
import pytest

from skewlab.advise import advise, candidates, stream_of
from skewlab.advise.rank import random_feed_p99_ms
from skewlab.grouping import GROUPING_NAMES
from skewlab.rebalance import REBALANCER_NAMES

pytestmark = pytest.mark.unit

SERVICE_S = 1e-3
WORKERS = 4


def _stream(keys: list[str]):
    return stream_of("test", ((k, None, None) for k in keys))


def _by_label(advice):
    return {r.label: r for r in advice.ranked}


def test_every_grouping_and_policy_is_a_candidate() -> None:
    cs = candidates(WORKERS)
    assert {c.grouping for c in cs if c.rebalance is None} == set(GROUPING_NAMES)
    assert {c.rebalance for c in cs if c.rebalance} == set(REBALANCER_NAMES) - {"none"}
    assert len({c.label for c in cs}) == len(cs)
    assert not any(c.params.get("d", 0) >= WORKERS for c in cs)


def test_uniform_keys_shuffle_and_key_are_about_equal_and_key_is_advised() -> None:
    rng = np.random.default_rng(5)
    keys = [f"k{i}" for i in rng.integers(0, 50_000, 30_000)]
    rate = 0.5 * WORKERS / SERVICE_S
    a = advise(_stream(keys), WORKERS, SERVICE_S, rate=rate)
    rows = _by_label(a)
    key, shuffle = rows["key"].outcome, rows["shuffle"].outcome
    assert rows["key"].acceptable and rows["shuffle"].acceptable
    bound = random_feed_p99_ms(a.profile.offered_load, SERVICE_S)
    assert max(key.p99_ms, shuffle.p99_ms) <= bound
    assert abs(key.imbalance - shuffle.imbalance) < 5.0
    assert key.dist_cost == 1.0 < shuffle.dist_cost
    assert a.best.grouping == "key" and a.best.rebalance is None


def test_one_hot_key_makes_key_grouping_the_worst_grouping() -> None:
    rng = np.random.default_rng(6)
    keys = ["HOT" if x < 0.45 else f"k{int(x * 1e6)}" for x in rng.random(30_000)]
    a = advise(_stream(keys), WORKERS, SERVICE_S)
    groupings = [r for r in a.ranked if r.outcome.candidate.rebalance is None]
    key = _by_label(a)["key"]
    assert key.outcome.p99_ms == max(r.outcome.p99_ms for r in groupings)
    assert key.outcome.imbalance == max(r.outcome.imbalance for r in groupings)
    assert key.rank == max(r.rank for r in groupings)
    assert not key.acceptable
    assert a.best.grouping != "key" and a.recommendation.choice.outcome.dist_cost > 1.0
    assert a.profile.hot_keys == 1


def test_the_reason_quotes_the_figures_of_the_table() -> None:
    rng = np.random.default_rng(7)
    keys = ["HOT" if x < 0.4 else f"k{int(x * 1e6)}" for x in rng.random(20_000)]
    a = advise(_stream(keys), WORKERS, SERVICE_S)
    best = a.recommendation.choice.outcome
    reason = a.recommendation.reason
    assert f"{100 * a.profile.max_share:.1f} %" in reason
    assert f"DIST_COST {best.dist_cost:.2f}" in reason
    assert a.recommendation.choice.label in reason
    numbers = [float(x.replace(",", "")) for x in re.findall(r"[\d,]+\.?\d*", reason) if x != ","]
    assert numbers  # every clause carries a figure


def test_progress_covers_every_candidates_events() -> None:
    seen: list[tuple[int, int]] = []
    keys = [f"k{i % 50}" for i in range(2_000)]
    only = candidates(WORKERS)[:3]
    advise(_stream(keys), WORKERS, SERVICE_S, only=only, progress=lambda d, t: seen.append((d, t)))
    assert seen[-1] == (3 * len(keys), 3 * len(keys))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
