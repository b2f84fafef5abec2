"""``skewlab doctor``: check the data dir's Delta tables; repair or isolate a damaged one.

Examples::

    skewlab doctor                          # one line per table; exit 1 if one is damaged
    skewlab doctor --deep                   # also read every data file's Parquet footer
    skewlab doctor --repair quarantine      # roll it back to its last readable version,
                                            # else move it aside (<name>.damaged-<stamp>)
    skewlab doctor --repair all             # the same for every damaged table
    skewlab doctor --isolate key_loads      # move a table aside, damaged or not

The Delta root is ``--delta-root``, else ``$SKEWLAB_DELTA_ROOT``, else
``<data dir>/delta`` (the root ``skewlab run`` writes to). See
:mod:`skewlab.io.delta.recovery` for what a repair does.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from skewlab.envsettings import env_settings
from skewlab.services.datadir import resolve_home

HELP = "check the Delta tables of a data dir; repair or isolate a damaged table"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``doctor``'s options to its subparser."""
    parser.add_argument(
        "--home", default=None, help="data directory (default $SKEWLAB_HOME or .skewlab)"
    )
    parser.add_argument(
        "--delta-root", default=None, help="Delta root (default $SKEWLAB_DELTA_ROOT or HOME/delta)"
    )
    parser.add_argument(
        "--deep", action="store_true", help="also check every data file's Parquet footer"
    )
    act = parser.add_mutually_exclusive_group()
    act.add_argument("--repair", metavar="TABLE", help="repair TABLE (or 'all' damaged tables)")
    act.add_argument("--isolate", metavar="TABLE", help="move TABLE aside (next run: fresh)")


def _root(args: argparse.Namespace) -> Path:

    if args.delta_root:
        return Path(args.delta_root).expanduser()
    env = env_settings().delta_root
    return Path(env) if env else resolve_home(args.home) / "delta"


def run(args: argparse.Namespace) -> int:
    """Report (default), repair or isolate; a damaged table left as is exits 1."""
    from skewlab.io.delta.recovery import (
        check_tables,
        isolate_table,
        repair_table,
        scan_tables,
    )
    from skewlab.io.delta.schemas import table_spec

    root = _root(args)
    if args.isolate:
        result = isolate_table(root, table_spec(args.isolate).name)
        print(f"{result.table}: {result.action} -> {result.moved_to or 'no such table'}")
        return 0
    if args.repair:
        health = scan_tables(root, args.deep)
        names = (
            [h.table for h in health if not h.ok]
            if args.repair == "all"
            else [table_spec(args.repair).name]
        )
        for name in names:
            r = repair_table(root, name)
            where = f"; damaged part moved to {r.moved_to}" if r.moved_to else ""
            version = "" if r.version is None else f" (version {r.version})"
            print(f"{r.table}: {r.action}{version}{where}")
    for h in scan_tables(root, args.deep):
        state = "ok" if h.ok else f"DAMAGED: {h.damage}"
        print(f"{h.table:22} version {h.version if h.version is not None else '-':>6}  {state}")
    check_tables(root, args.deep)  # raises DamagedTableError (exit 1) naming the repair
    return 0
