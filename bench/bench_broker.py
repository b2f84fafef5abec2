"""Raw produce and consume rates of each Kafka client implementation against the embedded broker.

Starts its own Apache Kafka broker (KRaft, one node) in a temporary data directory and
prints its start-up: the first start (storage format + JVM start until it serves
metadata) and a restart on the same data dir (what ``skewlab up`` costs after
``skewlab down``). Then for each client: produce N records (100-byte values, explicit
partition round-robin over 4 partitions) and flush; read them back with ``end_offsets``
+ ``fetch`` per partition, checking the count. Prints absolute msgs/s and each client's
ratio to confluent's rate measured in the same run. About 30-40 s on 2 cores.

    .venv/bin/python bench/bench_broker.py [--confluent-records N] [--kafka-python-records N]
"""

from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
import uuid

from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import Broker

PARTITIONS = 4
VALUE = b"v" * 100

log = logging.getLogger("bench_broker")


def bench_client(bootstrap: str, impl: str, records: int) -> tuple[float, float]:
    """(produce msgs/s, consume msgs/s) of one implementation on a fresh topic."""
    client = connect(KafkaSettings(bootstrap, client=impl))
    topic = f"bench-{impl}-{uuid.uuid4().hex[:8]}"
    client.create_topic(topic, PARTITIONS)
    try:
        t0 = time.perf_counter()
        for i in range(records):
            client.produce(topic, VALUE, partition=i % PARTITIONS)
        client.flush(120)
        produce_s = time.perf_counter() - t0

        t0 = time.perf_counter()
        ends = client.end_offsets(topic)
        got = 0
        for p, end in ends.items():
            for _rec in client.fetch(topic, p, 0, end):
                got += 1
        consume_s = time.perf_counter() - t0
        if got != records:
            raise SystemExit(f"{impl}: read {got} records, produced {records}")
    finally:
        client.delete_topic(topic)
        client.close()
    return records / produce_s, records / consume_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--confluent-records", type=int, default=300_000)
    parser.add_argument("--kafka-python-records", type=int, default=40_000)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    with tempfile.TemporaryDirectory(prefix="skewlab-bench-") as home:
        broker = Broker(home)
        t0 = time.perf_counter()
        broker.start()
        first_s = time.perf_counter() - t0
        broker.stop()
        t0 = time.perf_counter()
        bootstrap = broker.start().url
        restart_s = time.perf_counter() - t0
        try:
            rows = [
                ("confluent", *bench_client(bootstrap, "confluent", args.confluent_records)),
                (
                    "kafka-python",
                    *bench_client(bootstrap, "kafka-python", args.kafka_python_records),
                ),
            ]
        finally:
            broker.stop()

    base_p, base_c = rows[0][1], rows[0][2]
    print(f"Apache Kafka (KRaft, one node) @ {bootstrap}, load average {os.getloadavg()[0]:.1f}")
    print(
        f"broker start-up: first start {first_s:.1f} s (format + start), "
        f"restart {restart_s:.1f} s (until it serves metadata)"
    )
    print(f"{PARTITIONS} partitions, {len(VALUE)}-byte values")
    print(f"{'client':<14}{'produce msg/s':>15}{'ratio':>8}{'consume msg/s':>16}{'ratio':>8}")
    for name, prod, cons in rows:
        print(f"{name:<14}{prod:>15,.0f}{prod / base_p:>8.3f}{cons:>16,.0f}{cons / base_c:>8.3f}")


if __name__ == "__main__":
    main()
