"""Routing decision rate per grouping on pre-generated skewed events, single core.

Issue targets: KEY/SHUFFLE >= 5M events/s (batch path), PKG and DKG >= 1M
events/s, i.e. no worse than 5x KEY. Each figure is printed with its ratio to
KEY measured in the same run.

    .venv/bin/python bench/bench_routing.py [--events 10e6] [--workers 10]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import row, say, timed
from skewlab.clock import ManualClock
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.keys import KeyBatch, KeyVocab


def zipf_ids(n: int, keys: int, s: float, v: float, seed: int) -> np.ndarray:
    """Key ranks with P(k) ~ (v + k)^-s, the SMALOPS skew."""
    p = (v + np.arange(keys)) ** -s
    cdf = np.cumsum(p / p.sum())
    rng = np.random.default_rng(seed)
    return np.searchsorted(cdf, rng.random(n), side="right").astype(np.int64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=float, default=10e6)
    ap.add_argument("--workers", type=int, default=10)
    ap.add_argument("--chunk", type=int, default=1 << 20)
    ap.add_argument("--rate", type=float, default=100_000.0, help="event-time rate for clocks")
    args = ap.parse_args()
    n = int(args.events)
    vocab = KeyVocab(f"k{i}" for i in range(10_000))
    ids = zipf_ids(n, 10_000, 1.1, 2.72, seed=1)
    vocab.hashes(13), vocab.hashes(17)  # hashing distinct keys once is not routing
    say(f"routing {n:,} Zipf(s=1.1, v=2.72) events over 10,000 keys to {args.workers} workers")
    say(row("strategy", "events/s", "x KEY", "note"))
    rates: dict[str, float] = {}
    order = ["key"] + [g for g in GROUPING_NAMES if g != "key"]
    for name in order:
        clock = ManualClock()
        g = make_grouping(name, workers=args.workers).build(clock=clock)

        def run(g=g, clock=clock) -> None:
            for start in range(0, n, args.chunk):
                batch = KeyBatch(ids[start : start + args.chunk], vocab)
                g.route_batch(batch)
                clock.advance(len(batch) / args.rate)

        secs = timed(run)
        rates[name] = n / secs
        ratio = rates[name] / rates["key"]
        target = 5e6 if name in ("key", "shuffle") else 1e6
        gap = "meets" if rates[name] >= target else f"{rates[name] / target:.2f}x of"
        say(row(name, f"{rates[name]:,.0f}", f"{ratio:.3f}", f"{gap} target {target:,.0f}/s"))


if __name__ == "__main__":
    main()
