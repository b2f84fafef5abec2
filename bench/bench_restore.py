"""A worker's restore of its own key state from Delta ``operator_state``.

A restarted worker (a crash, or the scale-out restart baseline) reads its rows up
to its last commit, keeps each key's newest row and decodes them
(``state_rows_at`` + ``KeySets.from_rows``). The history here is what a worker of
the README's ``--prefill`` scale-out run writes: every key in its first flush,
then a share of them changed per flush. Baseline, same rows in the same run: the
newest rows picked in Python from every row of the history and decoded with
cyclic garbage collection on (the restore before session 13).

    .venv/bin/python bench/bench_restore.py [--keys 100000] [--flushes 8] [--changed 0.2]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, row, say, scratch_dir, timed
from skewlab.io.delta import DeltaStore
from skewlab.io.state_store import state_rows_at
from skewlab.live.worker.rows import state_table
from skewlab.pipeline.handoff import KeySets, Rec, latest_rows

RUN = "bench-restore"


def write_history(store: DeltaStore, keys: int, flushes: int, changed: float) -> int:
    """Flushes of one worker's changed rows; returns the last commit version."""
    ks = KeySets(0, 4)
    rng = random.Random(7)
    for version in range(1, flushes + 1):
        picked = range(keys) if version == 1 else rng.sample(range(keys), int(keys * changed))
        for i in picked:
            ks.record(
                f"key-{i}", 0, version % 4, Rec(float(i), version * keys + i, 100, version % 4)
            )
        table = state_table(ks.changed_rows(), version, 0, 1000 * version)
        store.append("operator_state", table, app_id="w0", version=version, run_id=RUN)
    return flushes


def baseline(store: DeltaStore, version: int) -> KeySets:
    t = store.read(
        "operator_state",
        run_id=RUN,
        columns=["checkpoint", "key", "value", "buffered"],
        filters=[("instance", "=", 0), ("checkpoint", "<=", version)],
    )
    rows = latest_rows(zip(*(t[c].to_pylist() for c in t.column_names), strict=True))
    return KeySets._from_rows(0, 4, rows)  # the decode itself, collections on


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--flushes", type=int, default=8)
    ap.add_argument("--changed", type=float, default=0.2, help="share of keys per later flush")
    ap.add_argument("--repeat", type=int, default=5)
    keep_flag(ap)
    args = ap.parse_args()
    home = scratch_dir("skewlab-bench-restore-")
    try:
        measure(DeltaStore(home), args)
    finally:
        drop_scratch(home, args.keep)


def measure(store: DeltaStore, args: argparse.Namespace) -> None:
    """Write the history, check both restores agree, time them interleaved."""
    version = write_history(store, args.keys, args.flushes, args.changed)
    rows = store.read("operator_state", run_id=RUN, columns=["key"]).num_rows
    say(f"one worker's state: {args.keys:,} keys, {rows:,} rows over {args.flushes} flushes")
    new = KeySets.from_rows(0, 4, state_rows_at(store, RUN, 0, version))
    assert new.rows() == baseline(store, version).rows(), "the two restores differ"
    base_s, new_s = [], []
    for _ in range(args.repeat):  # interleaved: both see the same machine
        base_s.append(timed(lambda: baseline(store, version)))
        new_s.append(timed(lambda: KeySets.from_rows(0, 4, state_rows_at(store, RUN, 0, version))))
    b, n = statistics.median(base_s), statistics.median(new_s)
    say(row("restore", "median s", "x baseline", "all runs, s"))
    say(row("baseline", f"{b:.2f}", "1.00x", " ".join(f"{x:.2f}" for x in base_s)))
    say(row("now", f"{n:.2f}", f"{n / b:.2f}x", " ".join(f"{x:.2f}" for x in new_s)))


if __name__ == "__main__":
    main()
