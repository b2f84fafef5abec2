"""``skewlab experiment NAME``: reproduce a seed paper's experiment.

Prints the experiment's table (ours beside the paper's figures), saves its plots
under ``--out`` (default ``<data dir>/runs/exp-<name>-<UTC timestamp>``, the data
dir being ``--home``, else ``$SKEWLAB_HOME``, else ``./.skewlab``) and logs one
MLflow run (params, summary metrics, plots, the table) unless ``--no-mlflow``.
``skewlab experiment --list`` prints one line per experiment: its name, what it
reproduces and the scale ``skewlab reproduce`` runs it at. An unknown name is
one line listing the valid ones (exit 2), before anything is written.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

from skewlab.commands._args import positive_float
from skewlab.commands._sim_tracking import quiet_mlflow
from skewlab.errors import ConfigError
from skewlab.experiments import ExperimentArgs, get, registry
from skewlab.experiments.reproduce import REPRODUCE_SCALES, describe
from skewlab.io.run_links import run_link
from skewlab.io.tracking import Tracker, TrackingSettings
from skewlab.report.table import format_table
from skewlab.services.datadir import resolve_home

HELP = "reproduce a seed paper's experiment (table + plots + MLflow run)"

DEFAULT_SCALE = 1.0
DEFAULT_SEED = 1


def listing() -> list[list[str]]:
    """``[name, what it reproduces, reproduce's default scale or "-"]`` per experiment."""

    known = registry()
    return [
        [
            name,
            describe(known[name]) or "-",
            f"{REPRODUCE_SCALES[name]:g}" if name in REPRODUCE_SCALES else "-",
        ]
        for name in sorted(known)
    ]


_EPILOG = "experiments: (their names)"


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Fills in the experiment names when ``--help`` is shown (the registry imports the
    experiment modules, which every other command need not pay for)."""

    def add_text(self, text: str | None) -> None:
        if text == _EPILOG:
            names = ", ".join(r[0] for r in listing()) or "(none yet)"
            text = (
                textwrap.fill(f"experiments: {names}", width=78, break_on_hyphens=False) + "\n"
                "(skewlab experiment --list: what each reproduces and its reproduce scale)"
            )
        super().add_text(text)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``experiment``'s options (``NAME``, ``--list``, ``--scale``, ``--seed``, ``--out``,
    ``--home``, ``--no-mlflow``); ``--help`` lists the experiment names."""
    parser.formatter_class = _HelpFormatter
    parser.epilog = _EPILOG
    parser.add_argument("name", nargs="?", help="experiment name (see --list)")
    parser.add_argument(
        "--list",
        action="store_true",
        help="one line per experiment: name, what it reproduces, reproduce's scale",
    )
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=DEFAULT_SCALE,
        help=f"fraction of the paper's size, in (0, 1] (default: {DEFAULT_SCALE:g})",
    )
    parser.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"seed (default: {DEFAULT_SEED})"
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="directory for plots and the table (default: <home>/runs/exp-<name>-<UTC time>)",
    )
    parser.add_argument(
        "--home",
        default=None,
        help="data dir: run dirs and the MLflow store (default: $SKEWLAB_HOME, else ./.skewlab)",
    )
    parser.add_argument("--no-mlflow", action="store_true", help="do not log an MLflow run")


def run(args: argparse.Namespace) -> int:
    """Run experiment ``args.name`` once, write and print its table and plots, log its MLflow
    run; ``--list`` prints the experiments instead. Returns 0.

    Raises :class:`~skewlab.errors.ConfigError` (exit 2, nothing written) when no name is
    given, the name is unknown (the message lists the valid ones) or ``--scale`` exceeds 1.
    """
    if args.list:
        rows = listing()
        if not rows:
            print("(no experiments yet)")
        else:
            print(format_table(["experiment", "reproduces", "reproduce scale"], rows, align="left"))
        return 0
    if not args.name:
        names = ", ".join(r[0] for r in listing())
        raise ConfigError(f"give an experiment NAME; valid: {names}")
    experiment = get(args.name)  # an unknown name: one line listing the valid ones
    if args.scale > 1.0:
        raise ConfigError(f"--scale must be in (0, 1], got {args.scale}")
    home = resolve_home(args.home)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = args.out or home / "runs" / f"exp-{args.name}-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

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
        quiet_mlflow()
        tracker = Tracker(TrackingSettings.for_runs(home))
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
        print(f"  mlflow: {run_link(tracker, rid)}")
    return 0
