"""``skewlab reproduce [NAME ...]``: run the seed reproductions, print the claims table.

Each experiment runs at its default reproduction scale (``--scale`` sets one
for all; 1 = the papers' sizes). Prints ``seed | claim (figure) | paper | ours |
rule | holds?``, writes ``reproduce.md`` (the table, then per experiment its
setup, table and plots) under ``<home>/runs/reproduce-<UTC stamp>/`` and logs an
MLflow parent run with one child per experiment unless ``--no-mlflow``.
Progress goes to stderr. Exit 0 when everything ran (a claim that does not
hold is a result, not an error); 2 on an unknown name, before anything runs;
1 when an experiment raised.
"""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from pathlib import Path

from skewlab.commands._args import one_of, positive_float
from skewlab.experiments import registry
from skewlab.experiments.reproduce import (
    REPRODUCE_SCALES,
    claims_document,
    describe,
    reproduce,
    resolve_names,
)
from skewlab.io.tracking import Tracker, TrackingSettings

HELP = "run the seed reproductions and judge the papers' claims (table + report + MLflow)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``reproduce``'s options (``NAME ...``, ``--list``, ``--scale``, ``--seed``,
    ``--home``, ``--no-mlflow``, ``--doc``); the epilog lists each experiment's default scale."""
    defaults = ", ".join(f"{n} ({s:g})" for n, s in REPRODUCE_SCALES.items())
    parser.epilog = f"experiments and their default scales: {defaults}"
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        type=one_of(tuple(REPRODUCE_SCALES), "experiment"),
        help="experiments to run (default: all of --list); a misspelt one gets a did-you-mean",
    )
    parser.add_argument("--list", action="store_true", help="list the experiments and exit")
    parser.add_argument(
        "--scale",
        type=positive_float,
        default=None,
        help="one scale for every experiment, in (0, 1] (1 = the paper's size); "
        "default: each experiment's own",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--home", default=".skewlab", help="data dir (run dirs, MLflow store)")
    parser.add_argument("--no-mlflow", action="store_true")
    parser.add_argument(
        "--doc",
        metavar="PATH",
        default=None,
        help="also write the claims table as a document (docs/reproduce.md)",
    )


def run(args: argparse.Namespace) -> int:
    """Run the named experiments (all by default) and print the claims table; ``--list``
    prints the experiments instead.

    Returns 0 when every experiment ran (a claim that does not hold is a result), 1 when one
    raised; an unknown name raises :class:`~skewlab.errors.ConfigError` before anything runs.
    """
    from tabulate import tabulate

    known = registry()
    if args.list:
        rows = [
            [n, describe(known[n]), f"{REPRODUCE_SCALES[n]:g}"]
            for n in REPRODUCE_SCALES
            if n in known
        ]
        print(tabulate(rows, headers=["experiment", "reproduces", "default scale"]))
        return 0
    resolve_names(args.names, known)  # an unknown name fails here, before anything runs
    tracker = None
    if not args.no_mlflow:
        tracker = Tracker(TrackingSettings.for_runs(Path(args.home).resolve()))

    def progress(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    result = reproduce(
        args.names,
        home=Path(args.home),
        now=datetime.now(UTC),
        scale=args.scale,
        seed=args.seed,
        tracker=tracker,
        progress=progress,
    )
    rows = [[r[c] for c in r] for r in result.rows()]
    headers = ["seed", "claim (figure)", "paper", "ours", "rule", "holds?"]
    print(tabulate(rows, headers=headers, maxcolwidths=[None, 40, 18, 32, 30, 40]))
    print(f"\n{result.holding} of {len(result.claims)} claims hold")
    print(f"report: {result.report_path}")
    if args.doc:
        Path(args.doc).write_text(claims_document(result.rows(), args.seed, args.scale))
        print(f"document: {args.doc}")
    if result.parent_run_id:
        print(f"mlflow run: {result.parent_run_id}")
    if result.failed:
        print(f"failed: {', '.join(result.failed)}", file=sys.stderr)
        return 1
    return 0
