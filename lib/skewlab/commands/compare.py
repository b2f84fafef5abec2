"""``skewlab compare RUN_ID [RUN_ID...]``: MLflow runs side by side, and their plots.

Prints identity and status, the params that differ and every summary metric with its ratio to
the first run, then draws :data:`LOADS_PNG` (every run on one y-axis) and :data:`LATENCY_PNG`
under ``--out`` from the runs' per-window series. An unknown run id is one line and exit 2.
What each table and plot holds, and which store the runs come from: docs/cli.md,
"skewlab compare".
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.errors import ConfigError
from skewlab.io.tracking import Tracker, TrackingError, TrackingSettings
from skewlab.report.plots import LoadPanel, plot_load_panels
from skewlab.report.table import format_table
from skewlab.services.datadir import resolve_home

if TYPE_CHECKING:
    import numpy as np

    from skewlab.io.tracking import RunSummary, Tracker, TrackingSettings

HELP = (
    "compare MLflow runs side by side: the params that differ, every metric with its ratio "
    "to the first run, load (one shared axis) and latency plots"
)

LOADS_PNG = "loads.png"
LATENCY_PNG = "latency.png"
LOADS_TABLE = "window_loads.json"
"""A run's per-worker loads as one MLflow table (``skewlab simulate`` logs it)."""

LOAD_SERIES = re.compile(r"^load_w(\d+)$")
LATENCY_SERIES = ("window_p50_ms", "window_p99_ms")
SERIES = re.compile(r"^(load_w\d+|window_.+)$")
"""Per-window series: plotted, not tabulated."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``compare``'s options: ``RUN_ID ...``, ``--home`` and ``--out``."""
    parser.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="MLflow run ids (1 or more)")
    parser.add_argument(
        "--home",
        help="data dir whose MLflow store holds the runs "
        "(default: $MLFLOW_TRACKING_URI, else $SKEWLAB_HOME, else ./.skewlab)",
    )
    parser.add_argument(
        "--out", type=Path, help="directory for the plots (default: <home>/runs/compare-<UTC time>)"
    )


@dataclass(frozen=True)
class RunSeries:
    """The per-window series of one run, ready to plot."""

    label: str
    window_s: float
    loads: np.ndarray
    p50: list[tuple[int, float]]
    p99: list[tuple[int, float]]


def _settings(home: str | None) -> TrackingSettings:

    settings = (
        TrackingSettings.for_data_dir(resolve_home(home))
        if home is not None
        else TrackingSettings.from_env()
    )
    db = settings.sqlite_path
    if db is not None and not db.is_file():
        raise ConfigError(f"no MLflow store at {db}; pass --home with the data dir of the runs")
    return settings


def _summary(tracker: Tracker, run_id: str) -> RunSummary:
    """The run, or a ConfigError (exit 2) if the store does not know the id."""

    try:
        return tracker.get_run_summary(run_id)
    except TrackingError as exc:
        code = getattr(exc.__cause__, "error_code", "")
        if code in ("RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"):
            raise ConfigError(
                f"unknown MLflow run id {run_id!r} in {tracker.settings.tracking_uri}"
            ) from None
        raise


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.6g}" if math.isfinite(value) else str(value)
    return str(value)


def _label(s: RunSummary) -> str:
    return s.run_name or s.run_id[:12]


def _ratio(value: Any, first: Any) -> str:
    if not isinstance(value, int | float) or not isinstance(first, int | float):
        return "-"
    if first == 0:
        return "1" if value == 0 else "-"
    return f"{value / first:.3g}"


def split_params(rows: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """The ``params.*`` fields of :meth:`Tracker.compare` rows: (differing, equal in every run)."""
    names = [k for k in rows[0] if k.startswith("params.")] if rows else []
    differ = [n for n in names if len({_fmt(r.get(n)) for r in rows}) > 1]
    return differ, [n for n in names if n not in differ]


def metric_rows(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per summary metric: name (``*`` if the runs differ), each run's value, then
    each further run's ratio to the first run's value (``-`` where undefined)."""
    names = [
        k
        for k in (rows[0] if rows else {})
        if k.startswith("metrics.") and not SERIES.match(k[len("metrics.") :])
    ]
    body = []
    for name in names:
        values = [r.get(name) for r in rows]
        cells = [_fmt(v) for v in values]
        mark = " *" if len(set(cells)) > 1 else ""
        ratios = [_ratio(v, values[0]) for v in values[1:]]
        body.append([name[len("metrics.") :] + mark, *cells, *ratios])
    return body


def side_by_side(rows: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """The rows of :meth:`Tracker.compare` as three tables with a column per run:
    identity, the params that differ (all of them for one run), the metrics with ratios."""

    if not rows:
        return ""
    head = ["", *labels]
    identity = [[k, *(_fmt(r.get(k)) for r in rows)] for k in ("run_id", "status")]
    parts = [format_table(head, identity)]

    differ, equal = split_params(rows)
    shown = differ if len(rows) > 1 else differ + equal
    if shown:
        params = [[n[len("params.") :], *(_fmt(r.get(n)) for r in rows)] for n in shown]
        parts.append(format_table(["param", *labels], params))
    if len(rows) > 1:
        total = len(differ) + len(equal)
        parts.append(f"{len(differ)} of {total} params differ; {len(equal)} equal in every run")

    metrics = metric_rows(rows)
    if metrics:
        ratios = [f"{lab} / {labels[0]}" for lab in labels[1:]]
        parts.append(format_table(["metric", *labels, *ratios], metrics))
        if any(r[0].endswith(" *") for r in metrics):
            parts.append("* differs between the runs")
    return "\n\n".join(parts)


def _table_loads(tracker: Tracker, s: RunSummary) -> tuple[np.ndarray, float] | None:
    """``(loads[window, worker], window seconds)`` from the run's :data:`LOADS_TABLE`."""

    if LOADS_TABLE not in tracker.list_artifacts(s.run_id):
        return None
    folder = tracker.artifact_dir(s.run_id)
    if folder is not None:  # a local store: read in place
        table = json.loads((folder / LOADS_TABLE).read_text())
    else:
        with tempfile.TemporaryDirectory(prefix="skewlab-compare-") as tmp:
            local = tracker.client.download_artifacts(s.run_id, LOADS_TABLE, tmp)
            table = json.loads(Path(local).read_text())
    cols = {c: i for i, c in enumerate(table["columns"])}
    data = table["data"]
    if not data or not {"t_s", "worker", "events"} <= set(cols):
        return None
    starts = sorted({float(row[cols["t_s"]]) for row in data})
    index = {t: i for i, t in enumerate(starts)}
    workers = max(int(row[cols["worker"]]) for row in data) + 1
    loads = np.zeros((len(starts), workers), dtype=np.float64)
    for row in data:
        loads[index[float(row[cols["t_s"]])], int(row[cols["worker"]])] = float(row[cols["events"]])
    window_s = starts[1] - starts[0] if len(starts) > 1 else _window_param(s)
    return loads, window_s


def _window_param(s: RunSummary) -> float:
    try:
        window_s = float(s.params.get("window_s", "1"))
    except ValueError:
        return 1.0
    return window_s if window_s > 0 else 1.0


def _series(tracker: Tracker, s: RunSummary) -> RunSeries | None:

    workers = sorted(int(m.group(1)) for k in s.metrics if (m := LOAD_SERIES.match(k)))
    if workers:
        histories = {w: tracker.metric_history(s.run_id, f"load_w{w}") for w in workers}
        steps = max((step for h in histories.values() for step, _ in h), default=-1) + 1
        loads = np.zeros((steps, max(workers) + 1), dtype=np.float64)
        for w, history in histories.items():
            for step, value in history:
                loads[step, w] = value
        window_s = _window_param(s)
    else:
        table = _table_loads(tracker, s)
        if table is None:
            return None
        loads, window_s = table
    p50, p99 = (
        tracker.metric_history(s.run_id, n) if n in s.metrics else [] for n in LATENCY_SERIES
    )
    std = s.metrics.get("std_dev")
    label = _label(s) + (f": STD_DEV {std:.2f}%" if std is not None else "")
    return RunSeries(label, window_s, loads, p50, p99)


def plot_latency(runs: Sequence[RunSeries], path: Path) -> Path | None:
    """p50 (dashed) and p99 (solid) latency per window, one colour per run; None if no data."""
    runs = [r for r in runs if r.p50 or r.p99]
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    positive = True
    for i, r in enumerate(runs):
        colour = f"C{i % 10}"
        for points, style, name in ((r.p99, "-", "p99"), (r.p50, "--", "p50")):
            if points:
                x = [step * r.window_s for step, _ in points]
                y = [v for _, v in points]
                positive = positive and min(y) > 0
                ax.plot(x, y, style, color=colour, marker=".", label=f"{r.label} {name}")
    if positive:
        ax.set_yscale("log")
    ax.set_xlabel("time since the first window (s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title("latency per window: p99 solid, p50 dashed")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def draw(runs: Sequence[RunSeries], out: Path) -> list[Path]:
    """:data:`LOADS_PNG` and :data:`LATENCY_PNG` of ``runs`` under ``out``; the paths drawn."""

    if not runs:
        return []
    out.mkdir(parents=True, exist_ok=True)
    panels = [LoadPanel(r.label, r.window_s, r.loads) for r in runs]
    paths = [plot_load_panels(panels, out / LOADS_PNG, "time since the first window (s)")]
    latency = plot_latency(runs, out / LATENCY_PNG)
    return paths + ([latency] if latency is not None else [])


def run(args: argparse.Namespace) -> int:
    """Print :func:`side_by_side` of the runs (a repeated id counts once), then :func:`draw`
    the runs that have per-window loads (the others are named on stderr). Returns 0.

    Raises :class:`~skewlab.errors.ConfigError` (exit 2) when no RUN_ID is given, the store
    does not exist or does not know a run id.
    """
    if not args.run_ids:
        raise ConfigError("give at least one RUN_ID (the MLflow run ids to compare)")
    settings = _settings(args.home)
    tracker = Tracker(settings)
    run_ids = list(dict.fromkeys(args.run_ids))
    summaries = [_summary(tracker, rid) for rid in run_ids]
    labels = [_label(s) for s in summaries]
    if len(set(labels)) < len(labels):
        labels = [s.run_id[:12] for s in summaries]
    print(side_by_side(tracker.compare(run_ids), labels))

    series = []
    for s in summaries:
        one = _series(tracker, s)
        if one is None:
            print(
                f"compare: run {s.run_id} has no {LOADS_TABLE} table and no load_w<i> series; "
                "not plotted",
                file=sys.stderr,
            )
        else:
            series.append(one)
    if series:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        out = args.out or Path(settings.data_dir) / "runs" / f"compare-{stamp}"
        for path in draw(series, out):
            print(f"  plot: {path}")
    return 0
