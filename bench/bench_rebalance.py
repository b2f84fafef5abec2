"""Decision time per rebalance for 10k / 100k / 1M tracked keys over 100 workers.

Each policy decides once on one interval of Zipf(s=1.1, v=2.72) key loads
(10 events per key on average, keys on their hash worker). The baseline,
measured in the same run, is computing the per-worker load sums alone
(``np.bincount``), the least any policy must do. Also printed: SMALOPS' heavy-
hitter state (lossy-counter entries and pickled snapshot bytes).
Target (issue 5): < 100 ms per decision at 100k keys.

    .venv/bin/python bench/bench_rebalance.py [--sizes 10000,100000]
"""

from __future__ import annotations

import argparse
import pickle
import time
from collections.abc import Callable

import numpy as np

from skewlab.keys import KeyVocab
from skewlab.rebalance import LoadSnapshot, make_rebalancer
from skewlab.workload._common import zipf_weights

WORKERS = 100
POLICIES: tuple[tuple[str, dict[str, float]], ...] = (
    ("none", {}),
    ("smalops", {}),
    ("smalops", {"threshold": 0.001, "epsilon": 0.0001}),
    ("dlb-h", {}),
    ("dlb-l", {}),
    ("lptf", {}),
)


def interval(n: int) -> LoadSnapshot:
    p = zipf_weights(n, 1.1, 2.72)
    loads = np.maximum(np.round(p / p.sum() * 10 * n), 1).astype(np.int64)
    keys = [f"k{i}" for i in range(n)]
    where = KeyVocab(keys).buckets(13, WORKERS)
    return LoadSnapshot(
        now=10.0, interval_s=10.0, workers=WORKERS, keys=tuple(keys), loads=loads, placement=where
    )


def best_of(fn: Callable[[], object], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return min(out)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(x) for x in ap.parse_args().sizes.split(",")]
    print(
        f"{'keys':>9} {'policy':<16} {'decide ms':>10} {'x baseline':>11} {'moves':>7} "
        f"{'imb before->after':>18} {'state':>22}"
    )
    for n in sizes:
        snap = interval(n)
        base = best_of(snap.worker_loads, 5)
        print(f"{n:>9} {'baseline(sums)':<16} {base * 1e3:>10.2f} {1.0:>11.1f}")
        for name, params in POLICIES:
            cfg = make_rebalancer(name, WORKERS, **params)
            rb = cfg.build()
            t0 = time.perf_counter()
            d = rb.decide(10.0, snap)
            dt = time.perf_counter() - t0
            label = name + ("@0.1%" if params else "")
            state = ""
            if name == "smalops":
                size = len(pickle.dumps(rb.snapshot()))
                state = f"{int(d.extra['tracked_keys'])} ent, {size / 1024:.0f} KiB"
            print(
                f"{n:>9} {label:<16} {dt * 1e3:>10.1f} {dt / base:>11.0f} {d.keys_moved:>7} "
                f"{d.imbalance_before:>8.1f}->{d.imbalance_after:<8.1f} {state:>22}",
                flush=True,
            )


if __name__ == "__main__":
    main()
