"""``skewlab gc``: stop every live run under a data dir whose driver is gone.

A run whose ``skewlab run`` was killed (SIGKILL, a crash, a closed terminal)
leaves its route job, JVM and workers running; ``gc`` finds those runs by their
handles (driver pid and create time no longer alive) and stops them as
``skewlab stop`` does. Runs driven task by task by Airflow are left alone.
"""

from __future__ import annotations

import argparse

from skewlab.commands.stop import HOME_HELP, describe
from skewlab.live.driver.lifecycle import gc
from skewlab.services.datadir import resolve_home

HELP = "stop the processes of every live run whose driver is gone"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``gc``'s one option, ``--home`` (the data dir whose runs are checked)."""
    parser.add_argument("--home", default=None, help=HOME_HELP)


def run(args: argparse.Namespace) -> int:
    """Stop every orphaned run under the data dir (:func:`skewlab.live.driver.lifecycle.gc`), print
    one :func:`~skewlab.commands.stop.describe` line per run stopped; returns 0."""
    home = resolve_home(args.home)
    done = gc(home)
    for d in done:
        print(describe(d))
    if not done:
        print(f"no orphaned runs under {home}")
    return 0
