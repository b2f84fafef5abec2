"""The stateful scale-out seed-reproduction experiments at tiny scale."""

from __future__ import annotations

import itertools
import math

import pytest

from skewlab.experiments import ExperimentArgs, get, registry

pytestmark = pytest.mark.unit


def test_registered():
    assert {"scaleout-ramp", "scaleout-threshold-sweep"} <= set(registry())


def test_ramp_tiny(tmp_path):
    msgs: list[str] = []
    report = get("scaleout-ramp")(ExperimentArgs(out=tmp_path, scale=0.01, progress=msgs.append))
    assert msgs == ["checkpointing", "active-backup", "restart"]
    assert [r["policy"] for r in report.rows] == msgs
    assert all(r["exact"] and r["scale_outs"] == 4 for r in report.rows)
    assert report.metrics["claim_active_backup_lowest_latency"] == 1.0
    assert report.metrics["claim_checkpointing_fewer_resources"] == 1.0
    assert "lowest latency" in report.table
    assert all(math.isfinite(v) for v in report.metrics.values())
    assert len(report.plots) == 3 and all(p.exists() for p in report.plots)


def test_threshold_sweep_tiny(tmp_path):
    report = get("scaleout-threshold-sweep")(ExperimentArgs(out=tmp_path, scale=0.01))
    shares = [r["backup_share"] for r in report.rows]
    assert report.rows[0]["alarming"] == 0.0 and shares[0] > 0.9
    assert all(b <= a + 1e-9 for a, b in itertools.pairwise(shares))
    assert shares[-1] < 0.2
    assert report.plots[0].exists()
