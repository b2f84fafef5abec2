"""``skewlab experiment NAME``: reproduce a seed paper's experiment.

Prints the experiment's table (ours beside the paper's figures), saves its plots
under ``--out`` (default ``./.skewlab/runs/exp-<name>-<UTC timestamp>``) and logs
one MLflow run (params, summary metrics, plots, the table) unless ``--no-mlflow``.
``skewlab experiment --list`` names them all.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from skewlab.commands._args import positive_float
from skewlab.errors import ConfigError
from skewlab.experiments import ExperimentArgs, get, registry
from skewlab.io.tracking import Tracker, TrackingSettings

HELP = "reproduce a seed paper's experiment (table + plots + MLflow run)"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", nargs="?", help="experiment name (see --list)")
    parser.add_argument("--list", action="store_true", help="list the experiments")
    parser.add_argument(
        "--scale", type=positive_float, default=1.0, help="fraction of the paper's size"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, help="directory for plots and the table")
    parser.add_argument("--home", default=".skewlab", help="data dir (MLflow store)")
    parser.add_argument("--no-mlflow", action="store_true")


def run(args: argparse.Namespace) -> int:

    if args.list or not args.name:
        names = sorted(registry())
        print("\n".join(names) if names else "(no experiments yet)")
        return 0 if args.list else 2
    experiment = get(args.name)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or Path(args.home) / "runs" / f"exp-{args.name}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)
    if args.scale > 1.0:
        raise ConfigError(f"--scale must be in (0, 1], got {args.scale}")

    def progress(msg: str) -> None:
        print(f"{args.name}: {msg}", file=sys.stderr, flush=True)

    report = experiment(
        ExperimentArgs(out=out, scale=args.scale, seed=args.seed, progress=progress)
    )
    (out / "table.txt").write_text(report.table + "\n")
    print(report.title)
    print(report.table)
    for p in report.plots:
        print(f"  plot: {p}")
    if not args.no_mlflow:
        tracker = Tracker(TrackingSettings.for_runs(Path(args.home).resolve()))
        params = {"experiment": args.name, "scale": args.scale, "seed": args.seed, **report.params}
        rid = tracker.start_run(
            "skewlab-experiments",
            f"{args.name}-{stamp}",
            params=params,
            tags={"experiment": args.name, "mode": "experiment"},
        )
        tracker.log_metrics(rid, report.metrics)
        for p in report.plots:
            tracker.log_artifact(rid, p, "plots")
        tracker.log_artifact(rid, out / "table.txt")
        if report.rows:
            tracker.log_table(rid, report.rows, "rows.csv")
        tracker.end_run(rid)
        print(f"  mlflow run: {rid}")
    return 0
