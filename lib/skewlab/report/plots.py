"""Plots of simulated runs, drawn with matplotlib's non-interactive Agg backend.

matplotlib is imported inside each function (never at module import) and
the Agg backend is selected before pyplot loads, so plotting works on
headless machines and costs nothing to code that never plots.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.sim.result import SimResult

__all__ = ["plot_latency_cdf", "plot_worker_loads"]

_MIN_DELAY_S = 1e-9
"""Log axes cannot show 0: zero delays are drawn at 1 ns (the histogram's floor)."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_worker_loads(results: Sequence[SimResult], path: str | Path) -> Path:
    """Per-worker load over time, one panel per run; returns the written path.

    Each window (``result.window_s`` of event time) shows every worker's share
    of that window's events in %, the quantity DKG's STD_DEV summarises; the
    dashed line is the ideal share ``100 / W``.
    """
    if not results:
        raise ValueError("no results to plot")
    plt = _pyplot()
    out = Path(path)
    fig, axes = plt.subplots(
        len(results), 1, figsize=(9, 2.6 * len(results)), sharex=True, squeeze=False
    )
    for ax, r in zip(axes[:, 0], results):
        loads = np.asarray(r.window_loads, dtype=np.float64)
        if loads.size:
            totals = loads.sum(axis=1, keepdims=True)
            share = 100.0 * loads / np.where(totals == 0, 1.0, totals)
            # one flat segment per window: repeat the last value at the last window's end
            t = np.arange(loads.shape[0] + 1) * r.window_s
            share = np.vstack([share, share[-1:]])
            for w in range(loads.shape[1]):
                ax.step(t, share[:, w], where="post", linewidth=1.0, label=f"w{w}")
            ax.axhline(100.0 / r.workers, color="black", linestyle="--", linewidth=0.8)
        ax.set_ylabel("load %")
        ax.set_title(f"{r.strategy}: STD_DEV {r.std_dev:.2f}%, DIST_COST {r.dist_cost:.2f}")
        ax.grid(alpha=0.3)
        if r.workers <= 12:
            ax.legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    axes[-1, 0].set_xlabel(f"event time (s), windows of {results[0].window_s:g} s")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_latency_cdf(results: Sequence[SimResult], path: str | Path) -> Path:
    """CDF of the queueing delay of each run on one log-x axis; returns the path.

    The curve points are the upper edges of the bounded histogram's bins
    (:meth:`skewlab.metrics.LatencyHistogram.cdf`).
    """
    if not results:
        raise ValueError("no results to plot")
    plt = _pyplot()
    out = Path(path)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in results:
        values, frac = r.delay_cdf
        if values.size == 0:
            continue
        x = np.maximum(values, _MIN_DELAY_S)
        ax.step(
            np.concatenate([[_MIN_DELAY_S], x]),
            np.concatenate([[0.0], frac]),
            where="post",
            label=f"{r.strategy} (p99 {r.queue_delay.p99 * 1e3:.3g} ms)",
        )
    ax.set_xscale("log")
    ax.set_xlabel("queueing delay (s)")
    ax.set_ylabel("fraction of events")
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    ax.set_title("queueing delay CDF")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
