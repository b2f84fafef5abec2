"""The autoscale seed reproductions: the experiments' shape at tiny scale, and every
claim of the paper computed at reduced scale and judged by its rule.

Claims that do not hold for us at any scale (see the report's reasons) are
``xfail(strict=True)``: the test still computes the value and applies the rule,
and turns red the day the claim starts to hold.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from skewlab.autoscale import MeasurementStream, run_stream
from skewlab.experiments import ExperimentArgs, ExperimentReport, get, registry
from skewlab.experiments.autoscale import offline_claims, offline_results, offline_size
from skewlab.experiments.autoscale_latency import C_BAR, PARTITIONS, STREAMS, kafka_deal
from skewlab.experiments.claims import Claim

pytestmark = pytest.mark.unit


def test_registered():
    names = set(registry())
    assert {"autoscale-offline", "autoscale-latency"} <= names


def test_offline_tiny(tmp_path):
    msgs: list[str] = []
    report = get("autoscale-offline")(
        ExperimentArgs(out=tmp_path, scale=0.01, progress=msgs.append)
    )
    assert len(report.rows) == 4 * 6 * 12
    assert all(math.isfinite(v) for v in report.metrics.values())
    assert all(p.exists() for p in report.plots)
    assert len(msgs) == 24
    zero = [r for r in report.rows if r["delta"] == 0 and r["start"] == "0%C"]
    assert all(r["cbs"] == 0.0 and r["avg_rscore"] == 0.0 for r in zero)
    assert len(report.claims) == 6 and report.setup
    assert {c.seed for c in report.claims} == {"autoscaling"}


def test_offline_size_keeps_the_papers_partitions_down_to_a_quarter():
    assert offline_size(1.0) == (200, 500)
    assert offline_size(0.25) == (200, 125)
    assert offline_size(0.1)[0] < 200


def _stream(partitions: int = 200, measurements: int = 20, seed: int = 3) -> np.ndarray:
    return MeasurementStream(
        partitions=partitions, measurements=measurements, delta=5.0, seed=seed
    ).generate()


def test_online_heuristics_shuffle_the_partitions_every_iteration():
    """NF in index order keeps partitions together; the authors' shuffle moves many (Sec. VI-E)."""
    stream = _stream()
    shuffled = run_stream("nf", stream, 100.0, order="random", seed=1)
    indexed = run_stream("nf", stream, 100.0, order="index")
    assert shuffled.rscores[1:].mean() > 2 * indexed.rscores[1:].mean()
    again = run_stream("nf", stream, 100.0, order="random", seed=1)
    other = run_stream("nf", stream, 100.0, order="random", seed=2)
    assert again.assignments == shuffled.assignments
    assert other.assignments != shuffled.assignments


def test_order_leaves_the_deterministic_algorithms_alone():
    stream = _stream(partitions=60)
    for name in ("bfd", "mwf", "kafka-rr:7"):
        a = run_stream(name, stream, 100.0, order="random", seed=1)
        b = run_stream(name, stream, 100.0, order="index")
        assert a.assignments == b.assignments, name


# -- offline claims (Fig. 9-11) at 200 partitions x 40 measurements, uniform start -----


@pytest.fixture(scope="module")
def offline_claims_small() -> dict[str, Claim]:
    res, _ = offline_results(200, 40, seed=1, starts=("uniform",))
    return {c.claim: c for c in offline_claims(res, "uniform")}


def test_claim_bfd_has_the_lowest_cbs(offline_claims_small):
    c = offline_claims_small["BFD has the lowest CBS (ties count)"]
    assert c.value is True and c.holds


def test_claim_mwf_has_the_lowest_average_rscore(offline_claims_small):
    c = offline_claims_small["MWF has the lowest average Rscore at every delta"]
    assert c.value is True and c.holds


def test_claim_mwf_over_bfd_rscore_rises_with_delta(offline_claims_small):
    c = offline_claims_small["MWF / BFD average Rscore rises with delta"]
    ratios = list(c.value.values())
    assert all(0 < r < 1 for r in ratios)  # MWF moves less than BFD at every delta
    assert c.holds


@pytest.mark.xfail(strict=True, reason="MWF/BFD at delta 5 is ~0.35 for us (published: 0.381)")
def test_claim_mwf_over_bfd_rscore_band(offline_claims_small):
    assert offline_claims_small["MWF / BFD average Rscore"].holds


def test_claim_mwf_cbs_band(offline_claims_small):
    c = offline_claims_small["MWF's CBS"]
    assert len(c.value) == 5 and c.holds


def test_claim_nf_cbs_band(offline_claims_small):
    c = offline_claims_small["NF's CBS (the worst)"]
    assert len(c.value) == 5 and c.holds
    mwf = offline_claims_small["MWF's CBS"].value
    assert all(c.value[d] > mwf[d] for d in mwf)


# -- latency claims (Sec. VI-C, Fig. 7-8): the experiment itself (30 streams x 100) -----


@pytest.fixture(scope="module")
def latency_report(tmp_path_factory: pytest.TempPathFactory) -> ExperimentReport:
    out = tmp_path_factory.mktemp("latency")
    return get("autoscale-latency")(ExperimentArgs(out=out, scale=1.0))


@pytest.fixture(scope="module")
def latency_claims_small(latency_report: ExperimentReport) -> dict[str, Claim]:
    return {c.claim: c for c in latency_report.claims}


def test_latency_report(latency_report):
    report = latency_report
    assert [r["algorithm"] for r in report.rows][:2] == ["mwf", "kafka:1"]
    assert len(report.rows) == 33 and len(report.claims) == 5
    by = {r["algorithm"]: r for r in report.rows}
    assert by["kafka:32"]["p99_s"] == 0.0  # one partition per consumer, all below C_bar
    assert by["kafka:1"]["p90_s"] > by["kafka:16"]["p90_s"]
    # Kafka's groups never resize: N consumers throughout
    assert all(by[f"kafka:{n}"]["mean_consumers"] == n for n in range(1, PARTITIONS + 1))
    assert report.params["consumer_capacity"] == C_BAR
    assert report.params["streams"] == STREAMS
    assert all(p.exists() for p in report.plots)


@pytest.mark.parametrize(
    ("n", "sizes"), [(15, {3: 2, 2: 13}), (20, {2: 12, 1: 8}), (27, {2: 5, 1: 22})]
)
def test_kafka_deal_gives_equal_counts_whatever_the_deal(n, sizes):
    """Sec. VI-C: 32 partitions over 20 consumers -> 12 with two, 8 with one (kd_27: 5 pairs)."""
    for seed in range(5):
        groups = kafka_deal(n, np.random.default_rng(seed)).groups()
        assert len(groups) == n
        assert sorted(j for g in groups.values() for j in g) == list(range(PARTITIONS))
        counts = [len(g) for g in groups.values()]
        assert {k: counts.count(k) for k in set(counts)} == sizes


def test_kafka_deal_is_round_robin_over_a_random_arrival_order():
    """Topic by topic, each topic's 16 in random order: 16 consumers get one of each topic."""
    deals = [kafka_deal(16, np.random.default_rng(seed)).groups() for seed in range(4)]
    for groups in deals:
        assert all(len(g) == 2 and min(g) < 16 <= max(g) for g in groups.values())
    pairs = [sorted(tuple(g) for g in groups.values()) for groups in deals]
    assert len({tuple(p) for p in pairs}) == 4  # "the partition-consumer assignment is random"
    again = kafka_deal(16, np.random.default_rng(0)).groups()
    assert again == deals[0]


def test_claim_mwf_p90_latency(latency_claims_small):
    c = latency_claims_small["MWF's p90 latency (bytes > 0)"]
    assert 0 < c.value <= 5.0  # rebalanced bytes wait at most the 5 s rebalance
    assert c.holds


def test_claim_kafka_needs_60_percent_more_consumers(latency_claims_small):
    c = latency_claims_small["extra consumers Kafka needs to match MWF's p90"]
    assert c.holds


@pytest.mark.xfail(
    strict=True, reason="a median stream carries ~16 C (32 x 50% C); MWF packs it in ~18.6"
)
def test_claim_mwf_uses_about_15_consumers(latency_claims_small):
    assert latency_claims_small["MWF's average consumers"].holds


@pytest.mark.xfail(strict=True, reason="Kafka-15 p90: median ~800 s over our streams (paper 217 s)")
def test_claim_kafka15_p90(latency_claims_small):
    assert latency_claims_small["Kafka with 15 consumers: p90 (bytes > 0)"].holds


@pytest.mark.xfail(
    strict=True, reason="Kafka-15 p99: median ~1170 s over our streams (paper 365 s)"
)
def test_claim_kafka15_p99(latency_claims_small):
    assert latency_claims_small["Kafka with 15 consumers: p99 (bytes > 0)"].holds
