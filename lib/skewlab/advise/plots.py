"""``advise``'s two plots: the ranked trade-offs and the stream's key distribution.

matplotlib is imported inside the functions (Agg backend), like :mod:`skewlab.report.plots`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.advise.base import Stream
from skewlab.advise.profile import StreamProfile
from skewlab.advise.rank import Ranked

__all__ = ["plot_key_distribution", "plot_tradeoffs"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


_PANELS = (
    ("imbalance", "imbalance (mean imbScore, %)"),
    ("p99_ms", "p99 queueing delay (ms)"),
    ("dist_cost", "DIST_COST"),
    ("keys_moved_min", "keys moved / min"),
)


def plot_tradeoffs(ranked: Sequence[Ranked], path: str | Path) -> Path:
    """One horizontal bar panel per ranked figure, candidates in rank order (the
    recommendation on top, Pareto members in a darker colour). Returns ``path``."""
    plt = _pyplot()
    labels = [f"{r.rank}. {r.label}" for r in ranked]
    colours = ["tab:green" if r.rank == 1 else "tab:blue" if r.pareto else "tab:gray"
               for r in ranked]  # fmt: skip
    height = max(3.0, 0.32 * len(ranked) + 1.2)
    fig, axes = plt.subplots(1, len(_PANELS), figsize=(16, height), sharey=True)
    y = np.arange(len(ranked))[::-1]
    for ax, (name, title) in zip(axes, _PANELS):
        values = [r.outcome.figures()[name] for r in ranked]
        ax.barh(y, values, color=colours)
        ax.set_title(title, fontsize=9)
        if name == "p99_ms" and max(values, default=0.0) > 100 * max(min(values), 1e-3):
            ax.set_xscale("symlog", linthresh=0.01)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y)
    axes[0].set_yticklabels(labels, fontsize=8)
    fig.suptitle("advise: green = recommended, blue = Pareto set", fontsize=10)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


def plot_key_distribution(stream: Stream, prof: StreamProfile, path: str | Path) -> Path:
    """The rank-frequency curve of the keys (log-log) with the fitted Zipf line and the
    fair share ``1 / W``, beside the hot-set overlap per window. Returns ``path``."""
    plt = _pyplot()
    counts = np.sort(stream.counts())[::-1]
    counts = counts[counts > 0]
    shares = counts / counts.sum()
    ranks = np.arange(1, shares.size + 1)
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2))
    left.loglog(ranks, shares, ".", markersize=3, label="observed")
    model = ranks ** (-prof.zipf.s)
    left.loglog(
        ranks, model / model.sum(), "-", label=f"Zipf s={prof.zipf.s:.2f} (KS {prof.zipf.ks:.3f})"
    )
    left.axhline(
        prof.fair_share, color="tab:red", linestyle="--", label=f"fair share 1/{prof.workers}"
    )
    left.set_xlabel("key rank")
    left.set_ylabel("share of events")
    left.set_title(f"{prof.keys:,} keys, {prof.events:,} events", fontsize=10)
    left.legend(fontsize=8)
    xs = np.arange(len(prof.windows))
    right.plot(xs, [w.jaccard for w in prof.windows], "o-", label="hot-set Jaccard vs previous")
    right.plot(
        xs, [w.carried for w in prof.windows], "s--", label="load carried by previous hot set"
    )
    right.set_ylim(-0.05, 1.05)
    right.set_xlabel("window")
    right.set_title(f"hot-set drift {prof.drift:.2f}", fontsize=10)
    right.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
