"""``skewlab resume RUN_ID``: finish a run whose driver is gone, to its verdict.

A run whose ``skewlab run`` was killed, whose broker went away, or that ``skewlab stop`` /
``skewlab gc`` ended, keeps its handle, topics, checkpoints and Delta state. ``resume``:

1. refuses, in one line, a run that another process still drives (its driver, or an
   Airflow DAG run), and says so for a run that already finished;
2. stops what is left of an orphaned run's processes (as ``skewlab gc`` does);
3. resumes the run in this process (:func:`skewlab.live.driver.run.open_run`): every phase not
   done yet runs, the route job and workers restart from their checkpoints and committed
   Delta state, and the run ends with the same verdict table as ``skewlab run``.

``skewlab status`` lists the runs of a data dir with the command for each.
"""

from __future__ import annotations

import argparse
import sys

from skewlab.commands.run import exit_code, report
from skewlab.commands.stop import HOME_HELP, find_run
from skewlab.errors import ConfigError
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.lifecycle import (
    Interrupted,
    failure_reason,
    run_state,
    signals_as_interrupts,
    stop_run,
)
from skewlab.services.datadir import resolve_home

HELP = "finish a run whose driver is gone (killed, broker lost, stopped) to its verdict"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``resume``'s options: the positional ``RUN_ID``, ``--home``, ``--json`` and
    ``--no-progress``."""
    parser.add_argument(
        "run_id", metavar="RUN_ID", nargs="?", help="the run to resume (see skewlab status)"
    )
    parser.add_argument("--home", default=None, help=HOME_HELP)
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    """Steps 1-3 of the module doc; the exit code of ``skewlab run`` for its summary.

    Raises :class:`~skewlab.errors.ConfigError` (exit 2) for a missing or unknown run
    (:func:`~skewlab.commands.stop.find_run`), or one that a live driver or an Airflow
    DAG run still drives.
    """
    from skewlab.live.driver.run import open_run
    from skewlab.live.report.watch import ProgressLine

    home = resolve_home(args.home)
    run_dir = find_run(home, args.run_id)
    h = RunHandle.load(run_dir.path)
    state = run_state(h)
    if state.state in ("live", "airflow"):  # step 1
        raise ConfigError(
            f"run {h.run_id} is {state.state} ({state.detail}): it is not resumed here"
        )
    if state.state == "finished":
        print(f"{h.run_id}: finished already ({state.detail}); nothing to resume")
        return 0
    if state.state == "orphaned":  # step 2
        stop_run(run_dir.path, reason="stopped by skewlab resume: its driver is gone")
    print(f"{h.run_id}: resuming ({state.state}: {state.detail})", file=sys.stderr)
    prog = None if args.no_progress else ProgressLine(h.run_id, sys.stderr)
    try:  # step 3
        with signals_as_interrupts():
            summary = open_run(run_dir.path, progress=prog).run_all()
    except Interrupted as exc:
        print(f"skewlab resume: {failure_reason(exc)}; run recorded as failed", file=sys.stderr)
        return 128 + exc.signum
    finally:
        if prog is not None:
            prog.close()
    report([summary], str(home), as_json=args.json)
    return exit_code([summary])
