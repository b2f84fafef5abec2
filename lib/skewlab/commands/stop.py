"""``skewlab stop RUN_ID``: end a live run's processes from any shell.

Asks the run's driver (``skewlab run``) to stop if it still runs, then kills
what is left of the run's process groups (route job and its JVM, workers,
spare instances), checking each pid's create time so a recycled pid is never
signalled, and records the run as stopped in its handle.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from skewlab.errors import ConfigError
from skewlab.live.driver.lifecycle import Stopped, stop_run
from skewlab.rundir import RunDir
from skewlab.services.datadir import resolve_home

HELP = "stop a live run's processes (route job, JVM, workers) from any shell"

HOME_HELP = "data directory (default: $SKEWLAB_HOME, else ./.skewlab)"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``stop``'s options: the positional ``RUN_ID`` and ``--home``."""
    parser.add_argument(
        "run_id", metavar="RUN_ID", nargs="?", help="the run to stop (see <home>/runs/)"
    )
    parser.add_argument("--home", default=None, help=HOME_HELP)


def describe(done: Stopped) -> str:
    """One line: what was stopped."""
    what = ", ".join(done.killed) if done.killed else "nothing was running"
    return f"{done.run_id}: {what}; status {done.status}"


def find_run(home: Path, run_id: str | None) -> RunDir:
    """The files of run ``run_id`` under data dir ``home``.

    Raises :class:`~skewlab.errors.ConfigError` (exit 2, naming the latest runs) when no
    RUN_ID is given or the data dir has no handle for it.
    """
    runs = home / "runs"
    known = sorted(p.name for p in runs.iterdir())[-5:] if runs.is_dir() else []
    hint = f"; latest runs: {', '.join(known)}" if known else ""
    if not run_id:
        raise ConfigError(f"give the RUN_ID of a run under {home}{hint}")
    run_dir = RunDir.at(home, run_id)
    if not run_dir.handle.is_file():
        raise ConfigError(f"no run {run_id!r} under {home}{hint}")
    return run_dir


def run(args: argparse.Namespace) -> int:
    """Stop run ``args.run_id`` (:func:`skewlab.live.driver.lifecycle.stop_run`; a missing or
    unknown one: :func:`find_run`'s error), print what was stopped; returns 0."""
    run_dir = find_run(resolve_home(args.home), args.run_id)
    print(describe(stop_run(run_dir.path)))
    return 0
