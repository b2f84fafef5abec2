"""Plots of simulated runs, drawn with matplotlib's non-interactive Agg backend.

matplotlib is imported inside each function (never at module import) and
the Agg backend is selected before pyplot loads, so plotting works on
headless machines and costs nothing to code that never plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.sim.result import SimResult

__all__ = [
    "CdfCurve",
    "LoadPanel",
    "cdf_xlim",
    "load_shares",
    "plain_seconds",
    "plot_cdf_curves",
    "plot_latency_cdf",
    "plot_load_panels",
    "plot_worker_loads",
    "share_ylim",
]

_MIN_DELAY_S = 1e-9
"""Log axes cannot show 0: zero delays are drawn at 1 ns (the histogram's floor)."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


@dataclass(frozen=True)
class LoadPanel:
    """One run's per-worker load: ``loads[t, w]`` events of worker ``w`` in window ``t``.

    ``starts_s[t]`` is where window ``t`` begins on the time axis (default ``t x window_s``)
    and ``span_s`` how long the run lasted: the axis ends there, not at the end of a last
    window the run filled only partly (None: at the last window's end).
    """

    title: str
    window_s: float
    loads: np.ndarray
    starts_s: np.ndarray | None = None
    span_s: float | None = None

    def edges(self) -> np.ndarray:
        """Window boundaries on the time axis (one more than windows), clipped to
        ``0 .. span_s``."""
        n = np.asarray(self.loads).shape[0]
        starts = (
            np.arange(n, dtype=np.float64) * self.window_s
            if self.starts_s is None
            else np.asarray(self.starts_s, dtype=np.float64)
        )
        edges = np.append(starts, starts[-1] + self.window_s) if n else np.zeros(1)
        high = edges[-1] if self.span_s is None else max(float(self.span_s), 0.0)
        return np.clip(edges, 0.0, high)


LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")


@dataclass(frozen=True)
class CdfCurve:
    """One CDF: ``frac[i]`` of the mass is at or below ``values[i]`` (both ascending)."""

    label: str
    values: np.ndarray
    frac: np.ndarray


def plot_load_panels(panels: Sequence[LoadPanel], path: str | Path, xlabel: str) -> Path:
    """Per-worker share of each window's events in %, one panel per run; returns the path.

    The quantity DKG's STD_DEV summarises. Every worker has its own colour, line style
    and marker, and lines are drawn from thick to thin, so workers with the same share
    stay visible one over the other; the dashed black line is the fair share ``100 / W``,
    named in the legend. Every panel has the same axes: time up to the run's length
    (:attr:`LoadPanel.span_s`), and 0 .. :func:`share_ylim` of all panels, so panels
    compare at a glance and a near-even run (49.96-50.04 %) looks flat.
    """
    if not panels:
        raise ValueError("nothing to plot")
    plt = _pyplot()
    out = Path(path)
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(10, 3.2 * len(panels)), sharex=True, sharey=True, squeeze=False
    )
    x_high = 0.0
    for ax, p in zip(axes[:, 0], panels):
        loads = np.asarray(p.loads, dtype=np.float64)
        workers = loads.shape[1] if loads.ndim == 2 else 0
        if loads.size:
            share = load_shares(loads)
            t = p.edges()
            x_high = max(x_high, float(t[-1]))
            share = np.vstack([share, share[-1:]])  # one flat step per window
            mid = (t[:-1] + t[1:]) / 2
            for w in range(workers):
                width = 1.2 + 2.4 * (workers - 1 - w) / max(workers - 1, 1)
                ax.step(t, share[:, w], where="post", linewidth=width,
                        linestyle=LINE_STYLES[w % len(LINE_STYLES)], alpha=0.85,
                        label=f"w{w}", zorder=2 + w)  # fmt: skip
                ax.plot(mid, share[:-1, w], linestyle="none",
                        marker=MARKERS[w % len(MARKERS)], markersize=5,
                        color=ax.lines[-1].get_color(), zorder=2 + w)  # fmt: skip
            fair = 100.0 / workers
            ax.axhline(fair, color="black", linestyle="--", linewidth=1.0, zorder=1,
                       label=f"fair share 100/W = {fair:.3g}%")  # fmt: skip
        ax.set_ylabel("share of events (%)")
        ax.set_title(p.title)
        ax.grid(alpha=0.3)
        if 0 < workers <= 16:
            ax.legend(fontsize=9, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    axes[0, 0].set_ylim(*share_ylim(panels))
    if x_high > 0:
        axes[0, 0].set_xlim(0.0, x_high)
    axes[-1, 0].set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def load_shares(loads: np.ndarray) -> np.ndarray:
    """``loads[t, w]`` as each worker's share of window ``t``'s events in % (0 for an empty
    window)."""
    arr = np.asarray(loads, dtype=np.float64)
    totals = arr.sum(axis=1, keepdims=True)
    return 100.0 * arr / np.where(totals == 0, 1.0, totals)


def share_ylim(panels: Sequence[LoadPanel]) -> tuple[float, float]:
    """The y-range every load panel shares: 0 .. 5 % above the highest share of any panel
    (at least the highest ideal share ``100 / W`` with the same margin)."""
    top = 0.0
    for p in panels:
        loads = np.asarray(p.loads, dtype=np.float64)
        if loads.ndim == 2 and loads.size:
            top = max(top, float(load_shares(loads).max()), 100.0 / loads.shape[1])
    return 0.0, (top or 100.0) * 1.05


def cdf_xlim(curves: Sequence[CdfCurve]) -> tuple[float, float]:
    """The x-range of log-x CDFs: from half the smallest positive value holding mass to
    twice the value where the last curve reaches 1 (so an axis does not span 1 ns .. 100 s
    when every curve lives in one decade). Zero values (the histogram's 1 ns floor) do not
    widen the range: they are the step at its left edge."""
    lows, highs = [], []
    for c in curves:
        values, frac = np.asarray(c.values, dtype=np.float64), np.asarray(c.frac)
        if values.size == 0:
            continue
        held = np.flatnonzero(np.diff(np.concatenate([[0.0], frac])) > 0)
        positive = held[values[held] > _MIN_DELAY_S * 1.5]
        lows.append(values[positive[0]] if positive.size else values[0])
        full = np.flatnonzero(frac >= 1.0 - 1e-12)
        highs.append(values[full[0]] if full.size else values[-1])
    if not lows:
        return _MIN_DELAY_S, 1.0
    low = max(float(min(lows)), _MIN_DELAY_S) / 2
    high = max(float(max(highs)), low * 4) * 2
    return low, high


def plot_cdf_curves(curves: Sequence[CdfCurve], path: str | Path, xlabel: str, title: str) -> Path:
    """CDFs on one log-x axis over :func:`cdf_xlim` (smaller values drawn at its left edge);
    returns the path."""
    if not curves:
        raise ValueError("nothing to plot")
    plt = _pyplot()
    out = Path(path)
    low, high = cdf_xlim(curves)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in curves:
        if c.values.size == 0:
            continue
        x = np.maximum(c.values, low)
        ax.step(
            np.concatenate([[low], x]),
            np.concatenate([[0.0], c.frac]),
            where="post",
            label=c.label,
        )
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    plain = plt.FuncFormatter(lambda x, _pos: plain_seconds(x))
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(  # 2 and 5 of each decade labelled too, in the same words
        plt.FuncFormatter(lambda x, _pos: plain_seconds(x) if _lead(x) in (2, 5) else "")
    )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of events")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plain_seconds(x: float) -> str:
    """A tick of a log axis in seconds as plain decimals: ``0.4``, ``2``, ``0.005`` (not
    ``4x10^-1``); below a microsecond, ``0``."""
    if x < 1e-6:
        return "0"
    text = f"{x:.6f}".rstrip("0").rstrip(".")
    return text if x < 1000 else f"{x:,.0f}"


def _lead(x: float) -> int:
    """The leading digit of ``x`` > 0 (``0.2`` -> 2)."""
    if x <= 0:
        return 0
    return round(x / 10 ** np.floor(np.log10(x)))


def plot_worker_loads(results: Sequence[SimResult], path: str | Path) -> Path:
    """Per-worker load over time of simulated runs, one panel per run."""
    if not results:
        raise ValueError("no results to plot")
    panels = [
        LoadPanel(
            f"{r.strategy}: STD_DEV {r.std_dev:.2f}%, DIST_COST {r.dist_cost:.2f}",
            r.window_s,
            np.asarray(r.window_loads, dtype=np.float64),
        )
        for r in results
    ]
    return plot_load_panels(panels, path, f"event time (s), windows of {results[0].window_s:g} s")


def plot_latency_cdf(results: Sequence[SimResult], path: str | Path) -> Path:
    """CDF of the queueing delay of each simulated run.

    The curve points are the upper edges of the bounded histogram's bins
    (:meth:`skewlab.metrics.LatencyHistogram.cdf`).
    """
    if not results:
        raise ValueError("no results to plot")
    curves = [
        CdfCurve(f"{r.strategy} (p99 {r.queue_delay.p99 * 1e3:.3g} ms)", *r.delay_cdf)
        for r in results
    ]
    return plot_cdf_curves(curves, path, "queueing delay (s)", "queueing delay CDF")
