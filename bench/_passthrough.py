"""Spark's own minimal Kafka -> Kafka job: the peer baseline of bench_e2e.py.

It reads a topic of encoded events with ``readStream.format("kafka")`` and writes every
record to a second topic with Spark's Kafka sink, its ``partition`` column the source
partition modulo the workers: what the route job does minus decoding, routing and the
Delta tables. Run in a process of its own (its JVM gone before the live runs start):

    .venv/bin/python bench/_passthrough.py BOOTSTRAP --records N --partitions P --workers W

It fills the input topic, runs the job once over 1,000 records (JVM and connector warm-up,
as the route job's warm-up batch), then times one ``availableNow`` query over the N
records from its start to its end, and prints ``{"records": .., "seconds": ..}``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

from skewlab.io.kafka import KafkaSettings, connect
from skewlab.pipeline import events
from skewlab.spark.session import spark_session


def fill(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    """``n`` encoded events over 1,000 keys, round robin over ``partitions``."""
    c = connect(KafkaSettings(bootstrap))
    try:
        c.create_topic(topic, partitions)
        t0 = time.time()
        for i in range(n):
            value = events.encode(f"k{i % 1000}", t0 + i * 1e-5, i, "x" * 40)
            c.produce(topic, value, partition=i % partitions)
        c.flush()
    finally:
        c.close()


def passthrough(spark, bootstrap: str, source: str, sink: str, workers: int, ck: Path) -> float:
    """Seconds of one ``availableNow`` run of the job from ``source`` to ``sink``."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    query = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
        .load()
        .select((F.col("partition") % workers).cast("int").alias("partition"), "key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    args = ap.parse_args()
    tag = uuid.uuid4().hex[:8]
    warm, src, out = (f"bench-pass-{name}-{tag}" for name in ("warm", "in", "out"))
    fill(args.bootstrap, warm, 1_000, args.partitions)
    fill(args.bootstrap, src, args.records, args.partitions)
    admin = connect(KafkaSettings(args.bootstrap))
    admin.create_topic(out, args.workers)
    with tempfile.TemporaryDirectory(prefix="skewlab-pass-") as tmp:
        spark = spark_session("bench-passthrough", Path(tmp) / "spark", master="local[2]")
        passthrough(spark, args.bootstrap, warm, out, args.workers, Path(tmp) / "ck-warm")
        secs = passthrough(spark, args.bootstrap, src, out, args.workers, Path(tmp) / "ck")
        spark.stop()
    moved = sum(admin.end_offsets(out).values()) - 1_000
    for t in (warm, src, out):
        admin.delete_topic(t)
    admin.close()
    print(json.dumps({"records": moved, "seconds": secs}), flush=True)


if __name__ == "__main__":
    main()
