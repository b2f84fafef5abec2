"""``skewlab compare``'s sections (params that differ, metric ratios) and its shared load axis."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.commands.compare import metric_rows, split_params
from skewlab.report.plots import CdfCurve, LoadPanel, cdf_xlim, load_shares, share_ylim

pytestmark = pytest.mark.unit

ROWS = [
    {
        "run_id": "a",
        "params.strategy": "key",
        "params.workers": "4",
        "params.seed": "1",
        "metrics.std_dev": 30.0,
        "metrics.events": 100.0,
        "metrics.p99_ms": 0.0,
        "metrics.load_w0": 5.0,
    },
    {
        "run_id": "b",
        "params.strategy": "dkg",
        "params.workers": "4",
        "params.seed": "2",
        "metrics.std_dev": 3.0,
        "metrics.events": 100.0,
        "metrics.p99_ms": 2.0,
        "metrics.load_w0": 6.0,
    },
]


def test_params_split_into_differing_and_equal() -> None:
    differ, equal = split_params(ROWS)
    assert differ == ["params.strategy", "params.seed"]
    assert equal == ["params.workers"]


def test_metrics_are_marked_where_they_differ_with_the_ratio_to_the_first_run() -> None:
    rows = {r[0].removesuffix(" *"): r for r in metric_rows(ROWS)}
    assert set(rows) == {"std_dev", "events", "p99_ms"}  # series (load_w<i>) left out
    assert rows["std_dev"][0].endswith(" *") and float(rows["std_dev"][-1]) == pytest.approx(0.1)
    assert not rows["events"][0].endswith(" *") and rows["events"][-1] == "1"
    assert rows["p99_ms"][-1] == "-"  # ratio to a zero is undefined


def test_load_panels_share_one_y_range_from_zero() -> None:
    even = LoadPanel("even", 1.0, np.array([[4996, 5004], [5004, 4996]]))
    skewed = LoadPanel("skewed", 1.0, np.array([[75, 25], [70, 30]]))
    low, high = share_ylim([even, skewed])
    assert low == 0.0
    assert high >= load_shares(skewed.loads).max()
    # the near-even run's 49.96..50.04 % wiggle spans ~0.1 % of the shared axis (not all of it)
    shares = load_shares(even.loads)
    assert (shares.max() - shares.min()) / (high - low) < 0.01
    assert share_ylim([even])[1] >= 50.04


def test_cdf_axis_spans_the_data_not_the_histogram() -> None:
    # histogram bin edges from 1 ns to 100 s; all mass between 10 and 100 ms, some at zero
    edges = np.logspace(-9, 2, 111)
    frac = np.clip((np.log10(edges) + 2) / 1.0, 0.0, 1.0)
    frac[0] = 0.1  # 10 % of the events had no delay (the 1 ns floor bin)
    frac = np.maximum.accumulate(frac)
    low, high = cdf_xlim([CdfCurve("run", edges, frac)])
    first_mass = edges[np.flatnonzero(np.diff(frac) > 0)[0] + 1]
    assert first_mass / 2 == pytest.approx(low)
    assert 0.1 <= high <= 0.2 + 1e-12  # reaches 1 at 100 ms: at most one doubling beyond
    assert high / low < 1e3  # about two decades, not eleven
