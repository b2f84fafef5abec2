"""Live imbalance after rebalancing vs KEY, on the same events of the same run.

Issue target: SMALOPS and DLB at or below the papers' figures. Each live run
(embedded broker, Spark route job, workers, Delta, the rebalancer loop) reports
imbScore = 100 * std / mean of the worker loads in the windows after the first
move, and KEY's imbScore for the very same events placed on their hash workers
(the baseline, computed in the same run). MLflow off.

    .venv/bin/python bench/bench_rebalance_live.py [--duration 40] [--rate 2000]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, row, say, scratch_dir
from skewlab.live.driver.run import run_experiment
from skewlab.runsettings import ExperimentSettings
from skewlab.services import get_service

RUNS = (
    ("smalops", "zipf:s=1.1,v=2.72,keys=50", {"threshold": 0.05, "gate": False}),
    ("dlb-h", "eps-switch:low_s=5,high_s=15,keys=200", {}),
    ("dlb-l", "eps-switch:low_s=5,high_s=15,keys=200", {}),
    ("lptf", "eps-switch:low_s=5,high_s=15,keys=200", {}),
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=40)
    ap.add_argument("--rate", type=float, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    keep_flag(ap)
    args = ap.parse_args()
    home = scratch_dir("skewlab-bench-rebalance-")
    bootstrap = get_service("broker", home).start().url
    try:
        say(f"{args.workers} workers, {args.rate:,.0f} events/s for {args.duration:g} s each")
        say(row("policy", "imbScore %", "KEY %", "x KEY", "moves / exact"))
        for policy, workload, params in RUNS:
            s = ExperimentSettings(
                strategy="key",
                workers=args.workers,
                partitions=4,
                workload=workload,
                rate=args.rate,
                duration_s=args.duration,
                window_s=5.0,
                home=home,
                bootstrap=bootstrap,
                mlflow=False,
                quality=False,
                rebalance=policy,
                rebalance_params=params,
                rebalance_interval_s=5.0,
            )
            r = run_experiment(s)
            ratio = r.imb_after / r.imb_key_after if r.imb_key_after else float("nan")
            say(
                row(
                    policy,
                    f"{r.imb_after:.1f}",
                    f"{r.imb_key_after:.1f}",
                    f"{ratio:.2f}",
                    f"{r.keys_moved} / {r.exact}",
                )
            )
    finally:
        get_service("broker", home).stop()
        drop_scratch(home, args.keep)


if __name__ == "__main__":
    main()
