"""Autoscaler decision time per iteration, every algorithm, 32 / 1,000 / 10,000 partitions.

Issue target: < 50 ms per iteration at 1,000 partitions. One iteration is
``assign(speeds, previous, C)`` on a delta = 5 measurement stream (Landau et
al. Eq. 15), after a first, untimed iteration from an empty group. Each time
is printed with its ratio to a baseline measured in the same run: sorting the
speeds (``np.argsort``), the least any decreasing heuristic must do.

    .venv/bin/python bench/bench_autoscale.py [--partitions 32,1000,10000] [--iterations 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import row, say, timed
from skewlab.autoscale import ALGORITHM_NAMES, MeasurementStream, make_algorithm

C = 100.0
TARGET_S = 0.050


def per_iteration(spec: str, stream: np.ndarray) -> float:
    """Median seconds of one iteration (with the previous assignment) over the stream."""
    algo = make_algorithm(spec)
    prev = algo.assign(stream[0], None, C)
    times = []
    for s in stream[1:]:
        out: list = []
        times.append(timed(lambda s=s, prev=prev, out=out: out.append(algo.assign(s, prev, C))))
        prev = out[0]
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", default="32,1000,10000")
    ap.add_argument("--iterations", type=int, default=5)
    args = ap.parse_args()
    for p in (int(x) for x in args.partitions.split(",")):
        iters = args.iterations if p <= 1000 else max(2, args.iterations // 2)
        stream = MeasurementStream(partitions=p, measurements=iters + 1, delta=5, seed=1).generate()
        base = statistics.median(timed(lambda s=s: np.argsort(-s, kind="stable")) for s in stream)
        say(f"{p:,} partitions, {iters} timed iterations, baseline argsort {base * 1e6:.1f} us")
        say(row("algorithm", "ms/iteration", "x argsort", "note"))
        for spec in (*ALGORITHM_NAMES, f"kafka:{max(1, p // 2)}"):
            t = per_iteration(spec, stream)
            note = ""
            if p == 1000:
                note = "meets < 50 ms" if t < TARGET_S else f"{t / TARGET_S:.1f}x over 50 ms"
            say(row(spec, f"{t * 1e3:.2f}", f"{t / base:,.0f}", note))


if __name__ == "__main__":
    main()
