"""Spark's own minimal Kafka -> Kafka job: the peer baseline of bench_e2e.py.

It reads a topic of encoded events with ``readStream.format("kafka")`` and writes every
record to a second topic with Spark's Kafka sink, its ``partition`` column the source
partition modulo the workers: what the route job does minus decoding, routing and the
Delta tables. Run in a process of its own (its JVM gone before the live runs start):

    .venv/bin/python bench/_passthrough.py BOOTSTRAP --records N --partitions P --workers W

It runs the job once over 1,000 records (JVM and connector warm-up, as the route job's
warm-up batch), then one of:

- ``--records N`` (one batch): fills the input topic with N records, times one
  ``availableNow`` query over them from its start to its end, and prints
  ``{"records": .., "seconds": ..}``;
- ``--rate R --duration D`` (a stream, like the route query): the job runs with the
  route query's trigger (``--trigger``, default ``trigger_s``) and batch cap
  (``--max-offsets-per-trigger``), its checkpoint on the local disk; the live runs'
  producer sends the bench's workload at R/s for D s (its pacing, each burst stamped at
  send); once all are through it prints ``{"records", "seconds", "p50_ms", "p99_ms",
  "slices"}`` (``slices``: per second of send time, ``_common.slices``):
  latency = (the output record's timestamp, set by Spark's Kafka producer) - (the
  event's send time), ``seconds`` = last output timestamp - first send time (the live
  runs' sustained window: first produced -> last processed).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from _common import slices
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.pipeline import events
from skewlab.spark.session import spark_session
from skewlab.spec import DEFAULTS
from skewlab.workload.spec import parse_workload

PROBE = "probe"
"""The key of the record that shows the stream is running before the timed events."""
STREAM_IN, STREAM_OUT = "bench-pass-lin-", "bench-pass-lout-"
"""The stream mode's input and output topics: these prefixes + the run's tag."""


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


def start_job(
    spark,
    bootstrap: str,
    source: str,
    sink: str,
    workers: int,
    ck: Path,
    once: bool,
    trigger_s: float = DEFAULTS["trigger_s"],
    max_offsets: int | None = None,
):
    """The job from ``source`` to ``sink``: one ``availableNow`` run, or a stream with a
    ``trigger_s`` trigger and at most ``max_offsets`` records a batch."""
    from pyspark.sql import functions as F

    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", source)
        .option("startingOffsets", "earliest")
    )
    if max_offsets:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets))
    writer = (
        reader.load()
        .select((F.col("partition") % workers).cast("int").alias("partition"), "key", "value")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", sink)
        .option("checkpointLocation", str(ck))
    )
    if once:
        return writer.trigger(availableNow=True).start()
    return writer.trigger(processingTime=f"{trigger_s} seconds").start()


def passthrough(spark, bootstrap: str, source: str, sink: str, workers: int, ck: Path) -> float:
    """Seconds of one ``availableNow`` run of the job from ``source`` to ``sink``."""
    t0 = time.perf_counter()
    start_job(spark, bootstrap, source, sink, workers, ck, once=True).awaitTermination()
    return time.perf_counter() - t0


def wait_records(client, topic: str, n: int, timeout_s: float = 600.0) -> None:
    """Poll until ``topic`` holds ``n`` records (fail after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while sum(client.end_offsets(topic).values()) < n:
        if time.monotonic() > deadline:
            raise SystemExit(f"{topic}: fewer than {n} records after {timeout_s:.0f} s")
        time.sleep(0.2)


def out_stamps(
    client, topic: str, partitions: int, routed: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(record timestamps, event send times)`` in s of every event record of ``topic``
    (not the probe): values decoded as one Arrow column. ``routed``: a route job's
    ``routed`` topic (routed events; its end-of-set markers left out)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stamps: list[float] = []
    values: list[bytes | None] = []
    for p in range(partitions):
        end = client.end_offsets(topic).get(p, 0)
        for rec in client.fetch(topic, p, 0, end):
            if routed and not rec.value:
                continue
            stamps.append(rec.timestamp_ms / 1000.0)
            values.append(rec.value)
    dec = events.decode_arrow(pa.array(values, pa.binary()), routed=routed)
    keep = pc.fill_null(pc.not_equal(dec.column("key"), PROBE), False).to_numpy()
    sent = dec.column("ts").to_numpy(zero_copy_only=False)
    return np.asarray(stamps)[keep], sent[keep]


def measure_stream(spark, client, bootstrap: str, args, tmp: Path, tag: str) -> dict:
    """The stream mode of the module doc: one probe through the stream, then the events."""
    src, out = STREAM_IN + tag, STREAM_OUT + tag
    client.create_topic(src, args.partitions)
    client.create_topic(out, args.workers)
    query = start_job(
        spark,
        bootstrap,
        src,
        out,
        args.workers,
        tmp / "ck-stream",
        once=False,
        trigger_s=args.trigger,
        max_offsets=args.max_offsets_per_trigger,
    )
    client.produce(src, events.encode(PROBE, time.time(), 0, ""), partition=0)
    client.flush()
    wait_records(client, out, 1)  # the stream is running and has moved a record
    n = int(args.rate * args.duration)  # the live runs' producer, pacing and stamps alike
    ps = ProduceSettings(topic=src, partitions=args.partitions, events=n, rate=args.rate)
    produce(client, parse_workload("zipf:s=1.1,v=2.72"), ps)
    wait_records(client, out, n + 1)
    query.stop()
    stamps, sent = out_stamps(client, out, args.workers)
    for t in (src, out):
        client.delete_topic(t)
    ms = (stamps - sent) * 1000.0
    pct = {q: float(np.percentile(ms, q)) for q in (50, 99)} if len(ms) else {50: 0.0, 99: 0.0}
    secs = float(stamps.max() - sent.min()) if len(ms) else 0.0
    got = {"records": len(ms), "seconds": secs, "p50_ms": pct[50], "p99_ms": pct[99]}
    return {**got, "slices": slices(sent, ms, pct[99])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--rate", type=float, default=None, help="stream mode: events/s")
    ap.add_argument("--duration", type=float, default=10.0, help="stream mode: seconds")
    ap.add_argument("--trigger", type=float, default=DEFAULTS["trigger_s"], help="stream: s")
    ap.add_argument("--max-offsets-per-trigger", type=int, default=None, help="stream: cap")
    args = ap.parse_args()
    tag = uuid.uuid4().hex[:8]
    warm, src, out, wout = (f"bench-pass-{name}-{tag}" for name in ("warm", "in", "out", "wout"))
    admin = connect(KafkaSettings(args.bootstrap))
    fill(args.bootstrap, warm, 1_000, args.partitions)
    admin.create_topic(wout, args.workers)
    with tempfile.TemporaryDirectory(prefix="skewlab-pass-") as tmp:
        spark = spark_session("bench-passthrough", Path(tmp) / "spark", master="local[2]")
        passthrough(spark, args.bootstrap, warm, wout, args.workers, Path(tmp) / "ck-warm")
        if args.rate is not None:
            result = measure_stream(spark, admin, args.bootstrap, args, Path(tmp), tag)
        else:
            fill(args.bootstrap, src, args.records, args.partitions)
            admin.create_topic(out, args.workers)
            secs = passthrough(spark, args.bootstrap, src, out, args.workers, Path(tmp) / "ck")
            result = {"records": sum(admin.end_offsets(out).values()), "seconds": secs}
        spark.stop()
    for t in (warm, src, out, wout):
        admin.delete_topic(t)
    admin.close()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
