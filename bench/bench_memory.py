"""Peak memory of DKG and the sketches on a stream of 10M distinct keys.

Each structure runs in its own process; the baseline process generates the
same keys and does nothing else, so ``extra MiB`` is what the structure holds.
Bounded means: the extra does not grow with the number of distinct keys
(compare --keys 2e6 with 10e6).

    .venv/bin/python bench/bench_memory.py [--keys 10e6]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import peak_rss_mb, row, say

CHUNK = 200_000


def _feed(kind: str, keys: int, out: mp.Queue) -> None:
    import numpy as np

    from skewlab.clock import ManualClock
    from skewlab.grouping import make_grouping
    from skewlab.keys import KeyBatch, KeyVocab
    from skewlab.sketch import sketch_config

    clock = ManualClock()
    sink = None
    if kind == "dkg":
        sink = make_grouping("dkg", workers=10).build(clock=clock)
    elif kind in ("lossy-counting", "space-saving"):
        sink = sketch_config(kind).build()
    for start in range(0, keys, CHUNK):
        vocab = KeyVocab(f"u{i}" for i in range(start, min(start + CHUNK, keys)))
        batch = KeyBatch(np.arange(len(vocab), dtype=np.int64), vocab)
        if kind == "dkg":
            sink.route_batch(batch)
            clock.advance(1.0)
        elif sink is not None:
            sink.update_batch(batch)
    out.put(peak_rss_mb())


def measure(kind: str, keys: int) -> float:
    q: mp.Queue = mp.get_context("spawn").Queue()
    p = mp.get_context("spawn").Process(target=_feed, args=(kind, keys, q))
    p.start()
    value = q.get()
    p.join()
    return float(value)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=float, default=10e6)
    args = ap.parse_args()
    keys = int(args.keys)
    base = measure("baseline", keys)
    say(f"{keys:,} distinct keys in chunks of {CHUNK:,}")
    say(row("structure", "peak RSS MiB", "extra MiB"))
    say(row("baseline", f"{base:.0f}", "0"))
    for kind in ("dkg", "lossy-counting", "space-saving"):
        peak = measure(kind, keys)
        say(row(kind, f"{peak:.0f}", f"{peak - base:.0f}"))


if __name__ == "__main__":
    main()
