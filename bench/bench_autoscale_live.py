"""Live rebalance downtime per moved partition, as a ratio to the iteration length.

Runs one scaled-down live autoscaling run on the embedded broker (8
partitions, C_bar = 8 kB/s, a measurement stream at delta = 15 so partitions
move every iteration) and reports, per moved partition, the time from the
controller sending Stop to the old owner until (a) the new owner applied
Start and (b) the new owner had its first record, over the iteration length.
The seed budgets 5 s of a 30 s iteration (ratio 0.167) for a rebalance.

    .venv/bin/python bench/bench_autoscale_live.py [--iteration 3] [--duration 30]
"""

from __future__ import annotations

import argparse
import logging
import tempfile

import numpy as np

from skewlab.live.autoscale.run import run_autoscale
from skewlab.live.autoscale.settings import AutoscaleSettings

SEED_RATIO = 5.0 / 30.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iteration", type=float, default=3.0)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--algorithm", default="mwf")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="bench-autoscale-") as home:
        s = AutoscaleSettings(
            algorithm=args.algorithm, partitions=8, capacity=8000.0,
            workload="stream:delta=15,start=50,seed=3", duration_s=args.duration,
            iteration_s=args.iteration, window_s=args.iteration, min_span_s=0.5,
            sample_s=0.25, publish_s=args.iteration / 3, home=home, mlflow=False,
        )  # fmt: skip
        r = run_autoscale(s)
        from skewlab.services import get_service

        get_service("broker", home).stop()
    start = np.array([d["start_s"] for d in r.downtime])
    first = np.array([d["first_record_s"] for d in r.downtime])
    print(f"run {r.run_id}: {r.exactness}; {len(r.decisions)} iterations, {r.moved} moves")
    print(f"iteration length: {s.iteration_s:.1f} s; moved partitions measured: {len(first)}")
    if len(first) == 0:
        print("no partition moved: nothing to report")
        return 1
    for name, v in (("stop sent -> start applied", start), ("stop sent -> first record", first)):
        print(
            f"{name:28s} mean {v.mean():.3f} s  p90 {np.percentile(v, 90):.3f} s  "
            f"max {v.max():.3f} s  ratio to iteration {v.mean() / s.iteration_s:.3f}"
        )
    print(f"seed budget ratio (5 s / 30 s): {SEED_RATIO:.3f}; at a 30 s iteration our mean "
          f"first-record downtime is {first.mean() / 30.0:.3f} of it")  # fmt: skip
    return 0 if r.exact else 1


if __name__ == "__main__":
    raise SystemExit(main())
