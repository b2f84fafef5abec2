"""The autoscale seed-reproduction experiments at tiny scale."""

from __future__ import annotations

import math

import pytest

from skewlab.experiments import ExperimentArgs, get, registry

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
    assert "MWF vs BFD at delta 25" in report.table and "-23%" in report.table
    assert all(math.isfinite(v) for v in report.metrics.values())
    assert all(p.exists() for p in report.plots)
    assert len(msgs) == 24
    zero = [r for r in report.rows if r["delta"] == 0 and r["start"] == "0%C"]
    assert all(r["cbs"] == 0.0 and r["avg_rscore"] == 0.0 for r in zero)


def test_latency_tiny(tmp_path):
    report = get("autoscale-latency")(ExperimentArgs(out=tmp_path, scale=0.05))
    assert [r["algorithm"] for r in report.rows][:2] == ["mwf", "kafka:1"]
    assert len(report.rows) == 33
    by = {r["algorithm"]: r for r in report.rows}
    assert by["kafka:32"]["p99_s"] == 0.0  # one partition per consumer, all below C_bar
    assert by["kafka:1"]["p50_s"] > by["kafka:16"]["p50_s"]
    assert "217 s" in report.table
