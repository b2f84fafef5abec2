"""The plots of a live run's summary: loads per worker, latency CDF, instances over time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from skewlab.report.plots import CdfCurve, LoadPanel, plot_cdf_curves, plot_load_panels

if TYPE_CHECKING:
    from skewlab.live.report.summary import RunSummary

__all__ = ["PLOT_NAMES", "draw"]

PLOT_NAMES = ("worker_loads.png", "latency_cdf.png", "instances.png")
"""The plots' file names, the same in every run (and in ``skewlab simulate``'s runs), so
MLflow's compare view sets them side by side."""


def draw(summary: RunSummary, out_dir: Path) -> list[str]:
    """Load per worker over time and the latency CDF of one run, as PNG files."""

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    if summary.window_loads:
        starts, span, since = _time_axis(summary)
        paths.append(
            plot_load_panels(
                [
                    LoadPanel(
                        f"{summary.strategy}: STD_DEV {summary.std_dev:.2f}%, "
                        f"DIST_COST {summary.dist_cost:.2f}, imbScore {summary.imb_score:.1f}%",
                        summary.window_s,
                        np.asarray(summary.window_loads, dtype=np.float64),
                        starts_s=starts,
                        span_s=span,
                    )
                ],
                out_dir / PLOT_NAMES[0],
                f"time since the {since} (s), windows of {summary.window_s:g} s",
            )
        )
    if summary.instances_t:
        paths.append(_plot_instances(summary, out_dir / PLOT_NAMES[2]))
    if summary.latency_values_ms:
        paths.append(
            plot_cdf_curves(
                [
                    CdfCurve(
                        f"{summary.strategy} (p50 {_duration(summary.p50_ms)}, "
                        f"p99 {_duration(summary.p99_ms)})",
                        np.asarray(summary.latency_values_ms) / 1e3,
                        np.asarray(summary.latency_frac),
                    )
                ],
                out_dir / PLOT_NAMES[1],
                "end-to-end latency (s)",
                "steady-state end-to-end latency CDF",
            )
        )
    return [str(p) for p in paths]


def _time_axis(summary: RunSummary) -> tuple[np.ndarray | None, float | None, str]:
    """Where each window starts on the load plot's axis, how long the run produced, and
    what the axis counts from: the first event when the run knows it (a window that began
    before it starts at 0), else the first window."""
    span = summary.events / summary.produce_rate if summary.produce_rate > 0 else None
    if not summary.window_starts_ms or not np.isfinite(summary.t_first_s):
        return None, span, "first window"
    starts = np.asarray(summary.window_starts_ms, dtype=np.float64) / 1e3 - summary.t_first_s
    return starts, span, "first event"


def _duration(ms: float) -> str:
    """``850 ms``, ``1.16 s``: a latency for a plot label."""
    return f"{ms:.3g} ms" if ms < 1000 else f"{ms / 1000:.3g} s"


def _plot_instances(summary: RunSummary, path: Path) -> Path:
    """Instances running / holding keys over time, scale events marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    ax.step(summary.instances_t, summary.instances_running, where="post", label="running")
    ax.step(summary.instances_t, summary.instances_active, where="post", label="holding keys")
    t0 = summary.instances_t[0] if summary.instances_t else 0.0
    for e in summary.scale_log:
        ax.axvline(e.get("t_rel", t0), color="grey", lw=0.8, ls="--")
    ax.set_xlabel("time since the state manager started (s)")
    ax.set_ylabel("instances")
    ax.set_title(f"scale-out {summary.scale_out}: {summary.scale_events} events")
    ax.legend(loc="upper left")
    if summary.processed_rate:
        rates = ax.twinx()
        rates.plot(summary.instances_t, summary.input_rate, color="tab:green", lw=0.8)
        rates.plot(summary.instances_t, summary.processed_rate, color="tab:red", lw=0.8)
        rates.set_ylabel("records/s: routed (green), processed (red)")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
