"""Simulator rate, and the SMALOPS-scale run.

Issue targets: >= 2M simulated events/s with 10 workers; a 28M-event
SMALOPS-scale run (Zipf s=1.1, v=2.72, 10..50 us service) in < 60 s.
Baseline measured in the same run: generating the same workload alone, so the
ratio is what simulating (routing + queues + metrics) costs on top of it.

    .venv/bin/python bench/bench_sim.py [--events 5e6] [--big 28e6]
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _common import row, say, timed
from skewlab.grouping import make_grouping
from skewlab.sim import SimConfig, simulate
from skewlab.sim.service import parse_service_us
from skewlab.workload import parse_workload


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=float, default=5e6)
    ap.add_argument("--big", type=float, default=28e6)
    ap.add_argument("--workers", type=int, default=10)
    args = ap.parse_args()
    n, big, w = int(args.events), int(args.big), args.workers
    spec = "zipf:s=1.1,v=2.72"
    cfg = SimConfig(service=parse_service_us("10..50"), seed=1)
    rate = 0.8 * w / 30e-6

    def gen(count: int) -> None:
        for _ in parse_workload(spec, seed=1).events(count, chunk=65_536, rate=rate):
            pass

    base = timed(lambda: gen(n))
    say(f"{n:,} events of {spec}, {w} workers, service 10..50 us, rate {rate:,.0f}/s")
    say(row("what", "events/s", "x workload", "seconds"))
    say(row("workload only", f"{n / base:,.0f}", "1.000", f"{base:.2f}"))
    for name in ("key", "shuffle", "pkg", "dkg"):
        g = make_grouping(name, workers=w)
        secs = timed(lambda g=g: simulate(g, parse_workload(spec, seed=1), n, rate, config=cfg))
        say(row(f"sim {name}", f"{n / secs:,.0f}", f"{base / secs:.3f}", f"{secs:.2f}"))
    say(f"SMALOPS-scale: {big:,} events (target < 60 s)")
    for name in ("key", "dkg"):
        g = make_grouping(name, workers=w)
        secs = timed(lambda g=g: simulate(g, parse_workload(spec, seed=1), big, rate, config=cfg))
        verdict = "meets" if secs < 60 else f"misses by {secs - 60:.1f} s"
        say(row(f"sim {name}", f"{big / secs:,.0f}", "", f"{secs:.1f}  {verdict}"))


if __name__ == "__main__":
    main()
