"""The plots as a reader sees them: every worker in the legend and told apart, the fair
share named, the time axis as long as the run, latency ticks in plain seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab.report.plots import (
    CdfCurve,
    LoadPanel,
    plain_seconds,
    plot_cdf_curves,
    plot_load_panels,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The figures the plot functions save (kept open for the test to read)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    figures: list[Any] = []
    save = Figure.savefig

    def keep(self: Figure, *args: Any, **kwargs: Any) -> None:
        figures.append(self)
        save(self, *args, **kwargs)
        self.canvas.draw()

    monkeypatch.setattr(Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    return figures


def test_every_worker_and_the_fair_share_are_in_the_legend_and_told_apart(
    tmp_path: Path, drawn: list[Any]
) -> None:
    loads = np.array([[30, 30, 30, 10], [30, 30, 30, 10]])  # three workers on one line
    plot_load_panels([LoadPanel("run", 5.0, loads)], tmp_path / "loads.png", "t (s)")
    ax = drawn[-1].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:4] == ["w0", "w1", "w2", "w3"]
    assert any("fair share" in label and "25" in label for label in labels)
    steps = [line for line in ax.get_lines() if line.get_label() in ("w0", "w1", "w2")]
    looks = {(line.get_linestyle(), round(line.get_linewidth(), 2)) for line in steps}
    assert len(looks) == 3  # the overlapping workers differ in style and width
    assert ax.get_legend().get_texts()[0].get_fontsize() >= 8


def test_the_time_axis_ends_where_the_run_ended(tmp_path: Path, drawn: list[Any]) -> None:
    """A 12 s run whose first window began 2 s before its first event, in 5 s windows."""
    panel = LoadPanel("run", 5.0, np.ones((3, 2)), starts_s=np.array([-2.0, 3.0, 8.0]),
                      span_s=12.0)  # fmt: skip
    assert panel.edges().tolist() == [0.0, 3.0, 8.0, 12.0]
    plot_load_panels([panel], tmp_path / "loads.png", "t (s)")
    assert drawn[-1].axes[0].get_xlim() == (0.0, 12.0)


def test_latency_ticks_are_plain_seconds(tmp_path: Path, drawn: list[Any]) -> None:
    values = np.linspace(0.3, 2.5, 50)
    curve = CdfCurve("run", values, np.arange(1, 51) / 50)
    plot_cdf_curves([curve], tmp_path / "cdf.png", "latency (s)", "CDF")
    ax = drawn[-1].axes[0]
    shown = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True)]
    shown = [s for s in shown if s]
    assert "1" in shown and ("0.5" in shown or "2" in shown)
    assert not any("times" in s or "^" in s or "e-" in s for s in shown), shown


@pytest.mark.parametrize(("x", "text"), [(0.4, "0.4"), (2.0, "2"), (0.005, "0.005"),
                                         (1e-9, "0"), (1500.0, "1,500")])  # fmt: skip
def test_plain_seconds(x: float, text: str) -> None:
    assert plain_seconds(x) == text
