"""Ranking rules on hand-made outcomes: the Pareto set, keeping up, cheapest first."""

from __future__ import annotations

import pytest

from skewlab.advise import Candidate, Outcome
from skewlab.advise.rank import COST_TIE, LATENCY_SLACK, pareto, random_feed_p99_ms, rank
from skewlab.errors import ConfigError

pytestmark = pytest.mark.unit

SERVICE_S = 1e-3


def _o(name: str, imb: float, p99: float, dc: float, moved: float = 0.0) -> Outcome:
    return Outcome(Candidate(name), imb, p99, dc, moved, moved * 100)


def test_pareto_drops_only_dominated_outcomes() -> None:
    a = _o("shuffle", 0.0, 1.0, 3.0)
    b = _o("pkg", 1.0, 2.0, 1.5)
    c = _o("dkg", 2.0, 3.0, 1.6)  # worse than b on every figure
    d = _o("key", 50.0, 900.0, 1.0)
    assert pareto([a, b, c, d]) == [True, True, False, True]


def test_equal_outcomes_do_not_dominate_each_other() -> None:
    a, b = _o("pkg", 1.0, 2.0, 1.5), _o("d-choices", 1.0, 2.0, 1.5)
    assert pareto([a, b]) == [True, True]


def test_the_cheapest_outcome_that_keeps_up_ranks_first() -> None:
    limit = (1.0 + SERVICE_S * 1e3) * (1 + LATENCY_SLACK) - SERVICE_S * 1e3
    shuffle = _o("shuffle", 0.0, 1.0, 3.0)
    pkg = _o("pkg", 1.0, limit * 0.99, 1.5)
    dkg = _o("dkg", 1.0, limit * 1.01, 1.2)  # cheaper, but does not keep up
    key = _o("key", 60.0, 5000.0, 1.0)
    ranked = rank([key, dkg, pkg, shuffle], SERVICE_S)
    assert [r.label for r in ranked] == ["pkg", "shuffle", "dkg", "key"]
    assert [r.acceptable for r in ranked] == [True, True, False, False]
    assert [r.rank for r in ranked] == [1, 2, 3, 4]


def test_random_feed_queueing_counts_as_keeping_up() -> None:
    bound = random_feed_p99_ms(0.8, SERVICE_S)
    shuffle = _o("shuffle", 0.0, 1.0, 3.0)
    key = _o("key", 3.0, bound * 0.99, 1.0)
    assert [r.label for r in rank([shuffle, key], SERVICE_S, load=0.8)] == ["key", "shuffle"]
    assert [r.label for r in rank([shuffle, key], SERVICE_S, load=0.0)] == ["shuffle", "key"]
    assert random_feed_p99_ms(1.2, SERVICE_S) == 0.0
    assert random_feed_p99_ms(0.5, SERVICE_S) < bound


def test_near_equal_costs_are_a_tie_broken_by_latency() -> None:
    pkg = _o("pkg", 0.2, 4.4, 1.12)
    wc = _o("w-choices", 0.0, 2.2, 1.12 + COST_TIE / 2)
    shuffle = _o("shuffle", 0.0, 2.0, 1.12 + 2 * COST_TIE)
    ranked = rank([pkg, shuffle, wc], SERVICE_S, load=0.8)
    assert [r.label for r in ranked] == ["w-choices", "pkg", "shuffle"]


def test_ties_on_cost_go_to_fewer_moves_first() -> None:
    moved = Outcome(Candidate("key", {}, "dlb-h", {"theta": 10.0}), 5.0, 1.0, 1.0, 30.0, 1.0)
    still = _o("key", 6.0, 1.0, 1.0)
    ranked = rank([moved, still], SERVICE_S)
    assert ranked[0].outcome is still


def test_rank_refuses_nothing_and_a_negative_slack() -> None:
    with pytest.raises(ConfigError):
        rank([], SERVICE_S)
    with pytest.raises(ConfigError):
        rank([_o("key", 0, 0, 1)], SERVICE_S, slack=-0.1)


def test_a_full_tie_goes_to_key_grouping() -> None:
    same = [_o(name, 0.0, 0.0, 1.0) for name in ("shuffle", "pkg", "key", "dkg")]
    assert rank(same, SERVICE_S)[0].label == "key"
