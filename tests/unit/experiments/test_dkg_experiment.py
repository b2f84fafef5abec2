"""dkg-country at reduced scale: each DKG claim computed from the routed loads and judged.

The grid is the experiment's own (600 s of event time, so DKG's key spaces act)
with fewer events, streams and worker counts. Every value is recomputed here
from the measured per-worker loads and per-key worker counts, independently of
the claim code, then the claim's rule is applied.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from skewlab.experiments import ExperimentArgs
from skewlab.experiments.claims import Claim
from skewlab.experiments.dkg import (
    REF_DIST_COST,
    SHUFFLE_TIE,
    Case,
    Plan,
    claims_of,
    dkg_country,
    run_plan,
)
from skewlab.workload.country import DEFAULT_HOT

pytestmark = pytest.mark.unit

PLAN = Plan(ratios=(0, 80), half=80, workers=(5, 20, 100), events=20_000)


@pytest.fixture(scope="module")
def cases() -> dict[tuple[str, int, str], Case]:
    return {(c.stream, c.workers, c.grouping): c for c in run_plan(PLAN)}


def std(c: Case) -> float:
    """DKG STD_DEV recomputed from the loads: population std of the % shares."""
    loads = np.asarray(c.loads, dtype=float)
    return float(np.std(100.0 * loads / loads.sum()))


def claim(cs: dict[tuple[str, int, str], Case], start: str) -> Claim:
    (found,) = [c for c in claims_of(list(cs.values())) if c.claim.startswith(start)]
    return found


def test_every_event_is_routed_once(cases: dict[tuple[str, int, str], Case]) -> None:
    for c in cases.values():
        assert sum(c.loads) == PLAN.events
        assert len(c.loads) == c.workers


@pytest.mark.parametrize("stream", ["R80", "half-R80"])
def test_dkg_std_dev_at_most_pkg_at_every_w(
    cases: dict[tuple[str, int, str], Case], stream: str
) -> None:
    gaps = [std(cases[stream, w, "dkg"]) - std(cases[stream, w, "pkg"]) for w in PLAN.workers]
    c = claim(cases, f"DKG STD_DEV <= PKG's at every W ({stream};")
    assert c.value == pytest.approx(max(gaps))
    assert max(gaps) <= 0.0
    assert c.holds


def test_dkg_grows_the_hot_key_pool_under_r80(cases: dict[tuple[str, int, str], Case]) -> None:
    for w in PLAN.workers:
        d = cases["R80", w, "dkg"]
        # a key on more than 2 workers can only come from a grown pool
        assert max(d.key_workers) > 2
        assert dict(d.grown).get(DEFAULT_HOT, 2) > 2
    fewest = min(len(cases["R80", w, "dkg"].grown) for w in PLAN.workers)
    c = claim(cases, "DKG grows the hot key's pool")
    assert c.value == fewest >= 1
    assert c.holds


def test_dkg_keeps_pools_at_two_on_the_uniform_stream(
    cases: dict[tuple[str, int, str], Case],
) -> None:
    for w in PLAN.workers:
        d = cases["R0", w, "dkg"]
        assert max(d.key_workers) <= 2
        assert d.grown == ()
    assert claim(cases, "DKG keeps every pool at 2").holds


def test_shuffle_has_the_lowest_std_dev(cases: dict[tuple[str, int, str], Case]) -> None:
    gaps = []
    for (s, w, g), c in cases.items():
        if g == "shuffle":
            best_other = min(std(o) for (s2, w2, g2), o in cases.items() if (s2, w2) == (s, w))
            gaps.append(std(c) - best_other)
    c = claim(cases, "SHUFFLE has the lowest STD_DEV")
    assert c.value == pytest.approx(max(gaps))
    assert max(gaps) <= SHUFFLE_TIE
    assert c.holds


def test_key_has_the_highest_std_dev(cases: dict[tuple[str, int, str], Case]) -> None:
    gaps = []
    for (s, w, g), c in cases.items():
        if g == "key":
            worst_other = max(
                std(o) for (s2, w2, g2), o in cases.items() if (s2, w2) == (s, w) and g2 != "key"
            )
            gaps.append(worst_other - std(c))
    c = claim(cases, "KEY has the highest STD_DEV")
    assert c.value == pytest.approx(max(gaps))
    assert max(gaps) <= 0.0
    assert c.holds


def dist(c: Case) -> float:
    """DKG DIST_COST recomputed: mean distinct workers over the keys seen."""
    kw = np.asarray(c.key_workers)
    return float(kw[kw > 0].mean())


def test_dkg_dist_cost_against_pkg(cases: dict[tuple[str, int, str], Case]) -> None:
    """DKG >= PKG holds where integer-percent loads resolve the ideal load (W = 5).

    At W = 100 the ideal load is 1 % and every cold worker reads 0 %, so DKG's
    cold keys stay on their home worker: the claim's rule is applied as
    computed, whichever way it falls.
    """
    gaps = {w: dist(cases["R80", w, "dkg"]) - dist(cases["R80", w, "pkg"]) for w in PLAN.workers}
    assert gaps[5] >= 0.0
    c = claim(cases, "DKG's DIST_COST >= PKG's")
    assert c.value == pytest.approx(min(gaps.values()))
    assert c.holds == (min(gaps.values()) >= 0.0)


def test_pkg_dist_cost_beside_the_reference(cases: dict[tuple[str, int, str], Case]) -> None:
    """The value is computed as the rule needs it; the rule itself does not hold for us.

    Our PKG DIST_COST on R80 differs from the reference's sample results by up
    to ~0.2 (different key list and hash; the seed does not say which stream
    they came from), so only the computation and the claim's agreement with
    its rule are asserted, plus the mechanism behind the figures: under an
    80 % key, cold keys whose choices include a hot worker stay on one worker,
    so PKG's DIST_COST is below the 2 - 1/W that a uniform stream approaches.
    """
    errors = []
    for w in PLAN.workers:
        kw = np.asarray(cases["R80", w, "pkg"].key_workers)
        ours = kw[kw > 0].mean()
        errors.append(abs(ours - REF_DIST_COST["pkg"][w]))
        assert ours < 2.0 - 1.0 / w
    c = claim(cases, "PKG DIST_COST near the reference")
    assert c.value == pytest.approx(max(errors))
    assert c.holds == (max(errors) <= 0.15)


def test_report_states_setup_claims_and_plots(tmp_path: Path) -> None:
    plan = Plan(ratios=(80,), half=None, workers=(5, 10), groupings=("pkg", "dkg"), events=5000)
    report = dkg_country(ExperimentArgs(out=tmp_path, scale=0.001), plan=plan)
    assert [p.exists() for p in report.plots] == [True, True, True]
    assert report.setup and report.claims
    assert {r["grouping"] for r in report.rows} == {"pkg", "dkg"}
    assert all(c.holds for c in report.claims if c.claim.startswith("DKG"))
