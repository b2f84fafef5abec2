"""Rank the candidates' outcomes, mark the Pareto set, name one recommendation and why.

The rule, in order (docs/advise.md, "Ranking"):

1. **Pareto set**: an outcome is in it when no other is at least as good on all four
   figures (imbalance, p99 queueing delay, DIST_COST, keys moved per minute) and better
   on one.
2. **Keeping up**: an outcome keeps up with the stream when its p99 wait is at most
   the larger of two bounds: the best outcome's p99 sojourn (wait + one service time)
   times ``1 + slack`` (default 25 %), minus the service time; and the p99 wait of one
   worker at the offered load ``rho`` fed at random, ``ln(100 rho) / (mu (1 - rho))``
   (M/M/1, :func:`random_feed_p99_ms`: the queueing any key-affine strategy has on an
   even stream, not an overloaded worker; not used when ``rho >= 1``).
3. **Cheapest of the acceptable**: among those, the cheapest tier first: DIST_COST (partial
   results to merge, state split over workers) within :data:`COST_TIE` of the lowest;
   inside it the fewest keys moved, then the lowest p99, then the lowest imbalance (a full
   tie goes to plain KEY grouping: nothing to split, nothing to move); then
   the other acceptable ones by DIST_COST, keys moved, p99. The first is the
   recommendation.
4. The rest follow by p99, then DIST_COST.

So when keys are spread evenly KEY grouping (DIST_COST 1, nothing moved) wins, and
when a hot key overloads its worker the cheapest strategy that splits it wins.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from skewlab.advise.candidates import Outcome
from skewlab.advise.profile import StreamProfile
from skewlab.errors import ConfigError

__all__ = [
    "COST_TIE",
    "LATENCY_SLACK",
    "Ranked",
    "Recommendation",
    "pareto",
    "random_feed_p99_ms",
    "rank",
    "recommend",
]

LATENCY_SLACK = 0.25
"""How far (fraction) above the best p99 sojourn an outcome is still acceptable."""


def random_feed_p99_ms(load: float, service_s: float) -> float:
    """p99 wait (ms) of an M/M/1 worker at utilisation ``load``: ``ln(100 load) / (mu (1 -
    load))`` with ``mu = 1 / service_s`` (0 at ``load <= 0.01``; 0 at ``load >= 1``, where
    no bound holds)."""
    if not 0.01 < load < 1.0:
        return 0.0
    return 1e3 * math.log(100 * load) * service_s / (1.0 - load)


COST_TIE = 0.05
"""DIST_COST differences up to this count as equal cost (1.12 against 1.13 is no reason to
take twice the p99)."""

CRITERIA = ("imbalance", "p99_ms", "dist_cost", "keys_moved_min")
"""The figures the Pareto set is taken over (lower is better for each)."""


@dataclass(frozen=True)
class Ranked:
    """One outcome with its place: ``rank`` (1 = recommended), Pareto membership and
    whether its latency is acceptable (rule 2)."""

    outcome: Outcome
    rank: int
    pareto: bool
    acceptable: bool

    @property
    def label(self) -> str:
        """The candidate's label."""
        return self.outcome.label


def _dominates(a: Outcome, b: Outcome) -> bool:
    fa, fb = a.figures(), b.figures()
    le = all(fa[c] <= fb[c] for c in CRITERIA)
    return le and any(fa[c] < fb[c] for c in CRITERIA)


def pareto(outcomes: Sequence[Outcome]) -> list[bool]:
    """Whether each outcome is in the Pareto set (rule 1), in input order."""
    return [not any(_dominates(o, x) for o in outcomes if o is not x) for x in outcomes]


def rank(
    outcomes: Sequence[Outcome],
    service_s: float,
    slack: float = LATENCY_SLACK,
    load: float = 0.0,
) -> list[Ranked]:
    """The outcomes in rank order by rules 1-4 of the module doc (``load``: the offered
    load ``rho`` of rule 2)."""
    if not outcomes:
        raise ConfigError("nothing to rank: no outcome")
    if not slack >= 0:
        raise ConfigError(f"slack must be a fraction >= 0, got {slack!r}")
    service_ms = service_s * 1e3
    best = min(o.p99_ms for o in outcomes) + service_ms
    bound = max(best * (1.0 + slack) - service_ms, random_feed_p99_ms(load, service_s))
    ok = [o.p99_ms <= bound for o in outcomes]  # rule 2
    front = pareto(outcomes)  # rule 1

    cheapest = min((o.dist_cost for o, good in zip(outcomes, ok) if good), default=0.0)

    def key(i: int) -> tuple[float, ...]:
        o = outcomes[i]
        if ok[i] and o.dist_cost <= cheapest + COST_TIE:  # rule 3: the cheapest tier
            return (0, 0.0, o.keys_moved_min, o.p99_ms, o.imbalance, o.label != "key")
        if ok[i]:  # rule 3: the other acceptable ones
            return (1, o.dist_cost, o.keys_moved_min, o.p99_ms, o.imbalance)
        return (2, o.p99_ms, o.dist_cost, o.keys_moved_min, o.imbalance)  # rule 4

    order = sorted(range(len(outcomes)), key=key)
    return [Ranked(outcomes[i], r + 1, front[i], ok[i]) for r, i in enumerate(order)]


@dataclass(frozen=True)
class Recommendation:
    """The first-ranked outcome and the reason, one sentence grounded in the figures."""

    choice: Ranked
    reason: str


def _pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def _ms(x: float) -> str:
    return f"{x:,.0f} ms" if x >= 100 else f"{x:.2g} ms" if x >= 0.01 else "0 ms"


def _stream_clause(p: StreamProfile) -> str:
    fair = f"a worker's fair share is 1/{p.workers} = {_pct(p.fair_share)}"
    if p.hot_keys == 1:
        return f"one key carries {_pct(p.max_share)} of the events and {fair}"
    if p.hot_keys > 1:
        k = max(t for t in p.top_shares if t <= p.hot_keys)
        return (
            f"{p.hot_keys} keys each carry more than the fair share 1/{p.workers} "
            f"(the top {k}: {_pct(p.top_shares[k])} of the events)"
        )
    return f"the hottest key carries {_pct(p.max_share)} of the events ({fair})"


def recommend(profile: StreamProfile, ranked: Sequence[Ranked]) -> Recommendation:
    """The first of ``ranked`` and one sentence: what the stream's skew does (the hottest
    key against the fair share), what KEY grouping gives, what the choice gives and at
    which cost, and what the best-balanced alternative costs."""
    if not ranked:
        raise ConfigError("nothing to recommend: no ranked outcome")
    top = ranked[0]
    o = top.outcome
    by_label = {r.label: r for r in ranked}
    key = by_label.get("key")
    parts = [_stream_clause(profile)]
    if key is not None and key is not top:
        k = key.outcome
        if not key.acceptable:
            loads = k.worker_loads
            busiest = max(loads) / sum(loads) if loads and sum(loads) else 0.0
            parts.append(
                f"key grouping overloads a worker (the busiest gets {_pct(busiest)} of the "
                f"events; imbalance {k.imbalance:.0f} %, p99 wait {_ms(k.p99_ms)})"
            )
        else:
            parts.append(f"key grouping keeps up (p99 wait {_ms(k.p99_ms)})")
    if o.candidate.rebalance is None and o.candidate.grouping == "key":
        parts.append(
            f"key grouping keeps up with the best p99 (wait {_ms(o.p99_ms)}) "
            f"and keeps each key on one worker (DIST_COST 1.00, nothing moved)"
        )
    else:
        cost = f"DIST_COST {o.dist_cost:.2f}"
        if o.keys_moved_min > 0:
            cost += f", {o.keys_moved_min:.1f} keys moved per minute"
        gain = ""
        if key is not None and key is not top and key.outcome.p99_ms > 0:
            ratio = key.outcome.p99_ms / max(o.p99_ms, 1e-6)
            shown = f"{float(f'{ratio:.2g}'):,.0f}"  # two significant digits
            gain = f", {shown}x lower than key grouping's," if ratio >= 2 else ""
        parts.append(
            f"{top.label} keeps the p99 wait at {_ms(o.p99_ms)}{gain} at {cost}, "
            f"the cheapest of the strategies that keep up with the best p99"
        )
    balanced = min(ranked, key=lambda r: (r.outcome.imbalance, r.outcome.dist_cost))
    gap = o.imbalance - balanced.outcome.imbalance
    if balanced is not top and balanced.outcome.dist_cost > o.dist_cost and gap >= 1.0:
        b = balanced.outcome
        parts.append(
            f"{balanced.label} balances best (imbalance {b.imbalance:.1f} % vs "
            f"{o.imbalance:.1f} %) but at DIST_COST {b.dist_cost:.2f}"
        )
    return Recommendation(top, "; ".join(parts) + ".")
