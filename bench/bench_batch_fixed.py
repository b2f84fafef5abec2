"""A micro-batch's fixed cost: the route query against Spark's passthrough, step by step.

One Spark session set up as the route host's (``local[2]``, the route job's session
factory) and the embedded broker. Each variant is a streaming query over a topic of
``--batches`` x ``--size`` encoded events already there (4 partitions), read
``--size`` records a batch (``maxOffsetsPerTrigger``) with the route query's trigger,
so every batch has the same rows; the variants, each ``--rounds`` times, interleaved:

- ``kafka-sink``: Spark's Kafka sink, the partition column only (the bench's peer);
- ``foreach-kafka``: the same write inside ``foreachBatch`` (the Python callback);
- ``foreach-identity``: the same through a ``mapInArrow`` handing the rows back (the
  Python worker's round trip);
- ``route``: the route query itself (:func:`~skewlab.spark.route.start_query`,
  :class:`~skewlab.spark.route_sink.RouteSink`), Delta rounds held back to its end;
- ``route+delta``: the same with its Delta rounds (``delta_every_s``, default 5 s).

Printed per variant: the median and p90 ms of Spark's ``durationMs`` phases over the
batches after the first ``--skip``, and of the sink function's own wall time.

    .venv/bin/python bench/bench_batch_fixed.py [--size 3000] [--batches 20] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, scratch_dir
from _passthrough import fill, start_job
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import get_service
from skewlab.spark.route import RouteSettings, start_query
from skewlab.spark.route_sink import RouteSink
from skewlab.spark.session import spark_session
from skewlab.spark.writes import kafka_writer

VARIANTS = ("kafka-sink", "foreach-kafka", "foreach-identity", "route", "route+delta")
PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")
WORKERS = 4


class Timed:
    """A ``foreachBatch`` function's wall time per call (``close`` passes through)."""

    def __init__(self, fn: Callable[[Any, int], None]) -> None:
        self.fn, self.secs = fn, []

    def __call__(self, df: Any, batch_id: int) -> None:
        t0 = time.perf_counter()
        self.fn(df, batch_id)
        self.secs.append(time.perf_counter() - t0)

    def close(self, spark: Any = None) -> None:
        close = getattr(self.fn, "close", None)
        if close is not None:
            close(spark)


def identity(batches: Any) -> Any:
    """``mapInArrow``: the rows back as the Kafka sink's columns."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for b in batches:
        part = pc.cast(pc.bit_wise_and(b.column("partition"), WORKERS - 1), pa.int32())
        yield pa.RecordBatch.from_arrays([part, b.column("value")], names=["partition", "value"])


def query(spark: Any, variant: str, bootstrap: str, src: str, out: str, tmp: Path, a: Any):
    """The variant's streaming query (started) and its timed sink, if it has one."""
    from pyspark.sql import functions as F

    if variant == "kafka-sink":
        ck = tmp / "ck"
        return start_job(spark, bootstrap, src, out, WORKERS, ck, False, a.trigger, a.size), None
    if variant.startswith("route"):
        s = RouteSettings(
            run_id=f"bench-{uuid.uuid4().hex[:6]}",
            bootstrap=bootstrap,
            events_topic=src,
            routed_topic=out,
            workers=WORKERS,
            strategy="key",
            delta_root=str(tmp / "delta"),
            run_dir=str(tmp / "run"),
            trigger_s=a.trigger,
            max_events_per_trigger=a.size,
            delta_every_s=5.0 if variant == "route+delta" else 1e6,
        )
        sink = Timed(RouteSink(s))
        return start_query(spark, s, sink), sink

    def kafka(df: Any, batch_id: int) -> None:
        kafka_writer(df, bootstrap, out).save()

    def to_kafka(df: Any, batch_id: int) -> None:
        cols = (F.col("partition") % WORKERS).cast("int").alias("partition"), "value"
        kafka(df.select(*cols), batch_id)

    def via_python(df: Any, batch_id: int) -> None:
        kafka(df.mapInArrow(identity, "partition int, value binary"), batch_id)

    sink = Timed(to_kafka if variant == "foreach-kafka" else via_python)
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(a.size))
    )
    q = (
        reader.load()
        .select("partition", "offset", "value")
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp / "ck"))
        .trigger(processingTime=f"{a.trigger} seconds")
        .start()
    )
    return q, sink


def run_variant(spark: Any, client: Any, bootstrap: str, variant: str, a: Any) -> dict:
    """One variant over its own topics; its phases per batch (after ``a.skip``)."""
    tag = f"{variant.replace('+', '-')}-{uuid.uuid4().hex[:6]}"
    src, out = f"bench-bf-in-{tag}", f"bench-bf-out-{tag}"
    fill(bootstrap, src, a.size * a.batches, 4)
    client.create_topic(out, WORKERS)
    with tempfile.TemporaryDirectory(prefix="skewlab-bf-", dir=a.tmp) as tmp:
        q, sink = query(spark, variant, bootstrap, src, out, Path(tmp), a)
        try:
            while True:
                progress = [json.loads(p.json()) for p in q._jsq.recentProgress()]
                if sum(p.get("numInputRows", 0) for p in progress) >= a.size * a.batches:
                    break
                if q.exception() is not None:
                    raise RuntimeError(str(q.exception()))
                time.sleep(0.2)
        finally:
            q.stop()
    for t in (src, out):
        client.delete_topic(t)
    rows = [p["durationMs"] for p in progress if p.get("numInputRows")][a.skip :]
    result: dict[str, Any] = {}
    for k in (*PHASES, "triggerExecution"):
        v = np.asarray([r.get(k, 0) for r in rows], dtype=float)
        result[k] = (float(np.median(v)), float(np.percentile(v, 90)))
    if sink is not None:
        v = np.asarray(sink.secs[a.skip :]) * 1000
        result["sink"] = (float(np.median(v)), float(np.percentile(v, 90)))
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=3000)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--trigger", type=float, default=0.5)
    ap.add_argument("--only", default=",".join(VARIANTS))
    keep_flag(ap)
    a = ap.parse_args()
    home = Path(scratch_dir("skewlab-bench-bf-"))
    a.tmp = str(home)
    bootstrap = get_service("broker", home).start().url
    client = connect(KafkaSettings(bootstrap))
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    try:
        spark = spark_session("bench-batch-fixed", home / "spark", "local[2]", site_pyspark=True)
        run_variant(
            spark,
            client,
            bootstrap,
            "route",
            argparse.Namespace(**{**vars(a), "batches": 3, "skip": 0}),
        )
        for r in range(a.rounds):
            for variant in a.only.split(","):
                got = run_variant(spark, client, bootstrap, variant, a)
                cells = "  ".join(f"{k} {v[0]:.0f}/{v[1]:.0f}" for k, v in got.items())
                print(f"round {r} {variant:<17} ms median/p90: {cells}", flush=True)
        spark.stop()
    finally:
        client.close()
        get_service("broker", home).stop()
        drop_scratch(str(home), a.keep)
        print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
