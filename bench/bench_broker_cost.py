"""The broker's CPU per record, by producer batching setting (issue 16's profile).

Starts its own Apache Kafka broker (and prints its start-up), then for each setting:
produce N routed-like records (150-byte values, one header, 4 partitions) with the
confluent client and flush, then read them back as columns (``fetch_range``). Prints the
CPU seconds the broker's JVM and this process spent per record in each phase, and the
produce / consume wall rates: which producer settings (``linger.ms``,
``batch.num.messages``, ``batch.size``, compression) make the broker cheaper.

    .venv/bin/python bench/bench_broker_cost.py [--records 300000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

import psutil

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, say, scratch_dir
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import get_service

PARTITIONS = 4
VALUE = b'{"key":"k123","ts":1795485208.123,"seq":123456,"size":100}' + b" " * 90

SETTINGS: dict[str, dict[str, str]] = {
    "default (linger 5, 10k / 1 MB)": {},
    "linger 50": {"producer.linger.ms": "50"},
    "100k msgs / 8 MB batches, linger 50": {
        "producer.linger.ms": "50",
        "producer.batch.num.messages": "100000",
        "producer.batch.size": "8000000",
    },
    "lz4": {"producer.compression.type": "lz4"},
}


def cpu(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    keep_flag(ap)
    args = ap.parse_args()
    n = args.records
    home = scratch_dir("skewlab-broker-cost-")
    t0 = time.perf_counter()
    state = get_service("broker", home).start()
    say(f"Apache Kafka broker @ {state.url} started in {time.perf_counter() - t0:.1f} s")
    bootstrap = state.url
    broker = psutil.Process(state.pid)
    me = psutil.Process()
    say(f"{n:,} records per setting, load average {os.getloadavg()[0]:.1f} (2 cores)")
    say(f"{'setting':<38} {'phase':<8} {'broker us/rec':>13} {'client us/rec':>13} {'rec/s':>10}")
    try:
        for name, extra in SETTINGS.items():
            c = connect(KafkaSettings(bootstrap, extra=extra))
            topic = f"cost-{uuid.uuid4().hex[:8]}"
            c.create_topic(topic, PARTITIONS)
            b0, m0, t0 = cpu(broker), cpu(me), time.perf_counter()
            for i in range(n):
                c.produce(topic, VALUE, partition=i % PARTITIONS, headers=[("skewlab.src", b"1:2")])
            c.flush(120)
            b1, m1, t1 = cpu(broker), cpu(me), time.perf_counter()
            got = sum(len(c.fetch_range(topic, p, 0, e)) for p, e in c.end_offsets(topic).items())
            b2, m2, t2 = cpu(broker), cpu(me), time.perf_counter()
            if got != n:
                raise SystemExit(f"{name}: read {got} of {n}")
            for phase, b, m, t in (
                ("produce", b1 - b0, m1 - m0, t1 - t0),
                ("consume", b2 - b1, m2 - m1, t2 - t1),
            ):
                per = f"{1e6 * b / n:>13.2f} {1e6 * m / n:>13.2f}"
                say(f"{name:<38} {phase:<8} {per} {n / t:>10,.0f}")
            c.delete_topic(topic)
            c.close()
    finally:
        get_service("broker", home).stop()
        drop_scratch(home, args.keep)


if __name__ == "__main__":
    main()
