"""Sustained end-to-end events/s of the live pipeline, against the raw broker.

Issue targets: >= 50,000 events/s sustained for 60 s on 2 cores; p99
end-to-end latency <= 5 s at half that rate; DKG within 1.3x of KEY's cost.
Baseline in the same run: raw consume rate of the default client over the same
number of events (the physical limit of the machine for the pipeline).

Each live run: the embedded broker, Spark route job, W workers, Delta, exactness
check (MLflow off). ``throughput`` is verified events / (last processed -
first produced).

    .venv/bin/python bench/bench_e2e.py [--rate 50000] [--duration 60] [--workers 4]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from _common import row, say
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.live.experiment import ExperimentSettings, run_experiment
from skewlab.services import get_service


def raw_consume(bootstrap: str, n: int, partitions: int) -> float:
    c = connect(KafkaSettings(bootstrap))
    topic = f"bench-raw-{int(time.time())}"
    c.create_topic(topic, partitions)
    value = b"x" * 150
    for i in range(n):
        c.produce(topic, value, partition=i % partitions)
    c.flush()
    t0 = time.perf_counter()
    got = sum(1 for p, end in c.end_offsets(topic).items() for _ in c.fetch(topic, p, 0, end))
    secs = time.perf_counter() - t0
    c.delete_topic(topic)
    c.close()
    return got / secs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=50_000)
    ap.add_argument("--duration", type=float, default=60)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    home = tempfile.mkdtemp(prefix="skewlab-bench-")
    bootstrap = get_service("broker", home).start().url
    try:
        n = int(args.rate * args.duration)
        raw = raw_consume(bootstrap, min(n, 1_000_000), args.partitions)
        say(f"live runs: {args.workers} workers, {args.partitions} partitions, data dir {home}")
        say(row("run", "events/s", "x raw", "p99 ms", "exact / events"))
        say(row("raw consume", f"{raw:,.0f}", "1.000", "", ""))
        cost = {}
        for name, rate in (("key", args.rate), ("dkg", args.rate), ("key", args.rate / 2)):
            s = ExperimentSettings(
                strategy=name,
                workers=args.workers,
                partitions=args.partitions,
                workload="zipf:s=1.1,v=2.72",
                rate=rate,
                duration_s=args.duration,
                home=home,
                bootstrap=bootstrap,
                mlflow=False,
            )
            r = run_experiment(s)
            label = f"{name} @ {rate:,.0f}/s"
            if rate == args.rate:
                cost[name] = 1.0 / max(r.throughput, 1e-9)
            say(
                row(
                    label,
                    f"{r.throughput:,.0f}",
                    f"{r.throughput / raw:.3f}",
                    f"{r.p99_ms:,.0f}",
                    f"{r.exact} / {r.events:,}",
                )
            )
        say(
            f"DKG cost / KEY cost (per event, same rate): {cost['dkg'] / cost['key']:.2f} "
            "(target <= 1.3)"
        )
    finally:
        get_service("broker", home).stop()


if __name__ == "__main__":
    main()
