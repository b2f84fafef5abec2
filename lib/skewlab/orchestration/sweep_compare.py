"""The comparison step of a sweep: the table (CSV + Markdown) and plots on the parent run.

The sweep's other steps are beside it (:mod:`.sweep_grid`, :mod:`.sweep_form`,
:mod:`.sweep_cells`); :func:`compare` reads the child runs back from MLflow.
"""

from __future__ import annotations

import csv
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.orchestration.sweep_cells import cell_row
from skewlab.orchestration.sweep_grid import (
    CELL_METRICS,
    CELL_TAG,
    PLOT_METRICS,
    TABLE_COLUMNS,
    SweepSettings,
    grid_cells,
)

if TYPE_CHECKING:
    from skewlab.io.tracking import RunSummary, Tracker

log = logging.getLogger(__name__)


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "-"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return str(value)


def markdown_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub-flavoured Markdown table of ``rows`` (``-`` for a missing value)."""
    head = "| " + " | ".join(columns) + " |"
    rule = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join([head, rule, *body])


def _means(rows: Sequence[Mapping[str, Any]], metric: str) -> dict[str, dict[str, float]]:
    """``{strategy: {"workload W=w": mean over seeds}}`` of ``metric`` (finished rows)."""
    acc: dict[str, dict[str, list[float]]] = {}
    for r in rows:
        v = r.get(metric)
        if r.get("status") != "FINISHED" or v is None or not math.isfinite(v):
            continue
        group = f"{r['workload']} W={r['workers']}"
        acc.setdefault(r["strategy"], {}).setdefault(group, []).append(float(v))
    return {s: {g: sum(v) / len(v) for g, v in gs.items()} for s, gs in acc.items()}


def plot_metric(rows: Sequence[Mapping[str, Any]], metric: str, ylabel: str, path: Path) -> Path:
    """Grouped bars: one group per (workload, W), one bar per strategy (mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    means = _means(rows, metric)
    groups = list(dict.fromkeys(f"{r['workload']} W={r['workers']}" for r in rows))
    strategies = list(dict.fromkeys(r["strategy"] for r in rows))
    width = 0.8 / max(len(strategies), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(groups) + 3), 4.2))
    for i, s in enumerate(strategies):
        xs = [g + (i - (len(strategies) - 1) / 2) * width for g in range(len(groups))]
        ys = [means.get(s, {}).get(g, math.nan) for g in groups]
        ax.bar(xs, ys, width=width, label=s)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(f"{ylabel} per strategy")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def compare(
    settings: SweepSettings, parent_run_id: str, tracker: Tracker, out_dir: Path
) -> dict[str, Any]:
    """Write the comparison of the sweep's child runs to the parent run, then end it.

    Steps: 1. read every child run of the parent back from MLflow (not from the
    tasks' XComs, so a partial sweep still compares what finished); 2. one row
    per grid cell, ``MISSING`` where no child finished; 3. ``sweep.csv``,
    ``sweep.md`` and the plots of :data:`PLOT_METRICS` into ``out_dir`` and the
    parent's artifacts (``comparison/``); 4. end the parent FINISHED if every
    cell finished, else FAILED. Returns ``{"cells", "finished", "missing",
    "markdown", "files"}``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    by_cell: dict[str, RunSummary] = {}
    for cid in tracker.child_runs(parent_run_id):
        run = tracker.get_run_summary(cid)
        name = run.tags.get(CELL_TAG)
        if name is not None and (name not in by_cell or run.status == "FINISHED"):
            by_cell[name] = run
    rows = []
    for cell in grid_cells(settings):
        child = by_cell.get(cell.name)
        if child is None:
            rows.append({**cell.to_dict(), "cell": cell.name, "status": "MISSING"})
        else:
            rows.append(cell_row(cell, child))
    missing = [r["cell"] for r in rows if r["status"] != "FINISHED"]

    csv_path = out_dir / "sweep.csv"
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(TABLE_COLUMNS), extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    per_strategy = [
        {"strategy": s, **{m: _overall(rows, s, m) for m in CELL_METRICS}}
        for s in dict.fromkeys(r["strategy"] for r in rows)
    ]
    title = f"# Sweep {settings.preset or 'custom'} ({settings.mode}, {len(rows)} cells)"
    md = "\n\n".join(
        [
            title,
            "## Mean per strategy (finished cells)",
            markdown_table(per_strategy, ["strategy", *CELL_METRICS]),
            "## Cells",
            markdown_table(rows, TABLE_COLUMNS),
        ]
    )
    md_path = out_dir / "sweep.md"
    md_path.write_text(md + "\n")
    files = [csv_path, md_path]
    for metric, stem, ylabel in PLOT_METRICS:
        files.append(plot_metric(rows, metric, ylabel, out_dir / f"{stem}.png"))
    for f in files:
        tracker.log_artifact(parent_run_id, f, "comparison")
    tracker.log_metrics(
        parent_run_id,
        {"cells_finished": float(len(rows) - len(missing)), "cells_missing": float(len(missing))},
    )
    tracker.end_run(parent_run_id, "FAILED" if missing else "FINISHED")
    return {
        "cells": len(rows),
        "finished": len(rows) - len(missing),
        "missing": missing,
        "markdown": md,
        "files": [str(f) for f in files],
    }


def _overall(rows: Sequence[Mapping[str, Any]], strategy: str, metric: str) -> float | None:
    vals = [
        float(r[metric])
        for r in rows
        if r["strategy"] == strategy
        and r.get("status") == "FINISHED"
        and r.get(metric) is not None
        and math.isfinite(r[metric])
    ]
    return sum(vals) / len(vals) if vals else None
