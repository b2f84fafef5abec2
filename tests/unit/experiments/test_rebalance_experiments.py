"""Each rebalancing experiment runs at a tiny scale and returns its table and plots."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.experiments import ExperimentArgs, get, registry
from skewlab.experiments.dlb import EXPERIMENTS as DLB
from skewlab.experiments.smalops import EXPERIMENTS as SMALOPS

EXPERIMENTS = {**SMALOPS, **DLB}

pytestmark = pytest.mark.unit

EXPECTED_ROWS = {
    "smalops-latency": ["10", "20", "30", "40", "50"],
    "smalops-threshold": ["hash", "0.5%", "1.0%", "10.0%", "20.0%", "2.0% + Eq. 4"],
    "smalops-dynamic": ["hash", "smalops 10%", "smalops 2%"],
    "dlb-switch": ["kg", "pkg", "lptf", "dlb-h", "dlb-l"],
    "pkg-split-state": ["whole eps 1.5 phases", "whole eps 0.2 phases", "per "],
}


def test_registered() -> None:
    assert set(EXPECTED_ROWS) == set(EXPERIMENTS) and set(EXPERIMENTS) <= set(registry())


@pytest.mark.parametrize("name", sorted(EXPECTED_ROWS))
def test_runs_at_tiny_scale(name: str, tmp_path: Path) -> None:
    report = get(name)(ExperimentArgs(out=tmp_path, scale=0.005, seed=2))
    lines = report.table.splitlines()
    assert "paper" in lines[0]
    firsts = [line.split("  ")[0].strip() for line in lines[2:]]
    for label in EXPECTED_ROWS[name]:
        assert any(f.startswith(label) for f in firsts), (label, firsts)
    assert report.plots and all(p.exists() for p in report.plots)
    assert report.rows and report.metrics
    if name.startswith("smalops"):
        assert report.claims and report.setup
