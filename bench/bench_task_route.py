"""Where the route job's one Spark job per batch spends its time, against its peers.

One Spark session (``local[2]``, the route job's session factory) and the embedded
broker; ``--records`` encoded events (4 partitions) read as one static batch and written
to a 4-partition topic, one task, each variant ``--rounds`` times, interleaved:

- ``passthrough``: Kafka -> Kafka, the partition column only (no Python);
- ``identity``: the same through a ``mapInArrow`` that hands the rows back (the Python
  worker round trip of flat columns);
- ``route``: the route job's own job (``task_route.route_task_fn``: decode, KEY splitters,
  records with an ``array<struct>`` headers column built in Python);
- ``route-flat``: the same routing, the worker handing back a flat ``src`` column that the
  JVM turns into the headers column (``array(struct(...))``);
- ``two-jobs``: the earlier driver path: the raw rows to the driver (``toArrow``), routed
  there, ``createDataFrame`` into the Kafka sink.

    .venv/bin/python bench/bench_task_route.py [--records 200000] [--rounds 3]

Prints microseconds per event of each run (wall time of the job(s)).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, scratch_dir
from _passthrough import fill
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import get_service
from skewlab.spark.route import RouteSettings
from skewlab.spark.session import spark_session
from skewlab.spark.task_route import KAFKA_SCHEMA, TaskPlan, route_table, route_task_fn
from skewlab.spark.writes import kafka_writer

PARTITIONS = 4


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    keep_flag(ap)
    args = ap.parse_args()
    home = Path(scratch_dir("skewlab-bench-tr-"))
    broker = get_service("broker", home)
    try:
        run(broker.start().url, home, args)
    finally:
        broker.stop()
        drop_scratch(str(home), args.keep)


def run(bootstrap: str, home: Path, args: Any) -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    src, out = "bench-tr-in", "bench-tr-out"
    fill(bootstrap, src, args.records, PARTITIONS)
    c = connect(KafkaSettings(bootstrap))
    c.create_topic(out, PARTITIONS)
    c.close()
    spark = spark_session("bench-task-route", home / "spark", master="local[2]")
    s = RouteSettings(
        run_id="bench",
        bootstrap=bootstrap,
        events_topic=src,
        routed_topic=out,
        workers=PARTITIONS,
        strategy="key",
        delta_root=str(home / "delta"),
        run_dir=str(home / "run"),
    )
    raw = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", "earliest")
        .load()
        .select("partition", "offset", "value")
        .coalesce(1)
    )
    batch_ids = iter(range(1_000_000))

    def plan() -> TaskPlan:
        b = next(batch_ids)
        return TaskPlan(s, b, str(home / "states" / str(b)), str(home / "loads"))

    def send(df: Any) -> None:
        kafka_writer(df, bootstrap, out, **{"batch.size": "1048576", "linger.ms": "20"}).save()

    def passthrough() -> None:
        send(raw.select((F.col("partition") % PARTITIONS).cast("int").alias("partition"), "value"))

    def identity() -> None:
        def fn(batches: Any) -> Any:
            for b in batches:
                yield pa.RecordBatch.from_arrays(
                    [pc.cast(b.column("partition"), pa.int32()), b.column("value")],
                    names=["partition", "value"],
                )

        send(raw.mapInArrow(fn, "partition int, value binary"))

    def route() -> None:
        send(raw.mapInArrow(route_task_fn(plan()), KAFKA_SCHEMA))

    def route_flat() -> None:
        inner = route_task_fn(plan())

        def fn(batches: Any) -> Any:
            for b in inner(batches):
                first = pc.list_element(b.column("headers"), 0)
                yield pa.RecordBatch.from_arrays(
                    [b.column("partition"), b.column("key"), b.column("value"),
                     pc.struct_field(first, "value")],
                    names=["partition", "key", "value", "src"],
                )  # fmt: skip

        flat = raw.mapInArrow(fn, "partition int, key binary, value binary, src binary")
        headers = F.array(F.struct(F.lit("skewlab.src").alias("key"), F.col("src").alias("value")))
        send(flat.select("partition", "key", "value", headers.alias("headers")))

    def two_jobs() -> None:
        t = raw.toArrow()
        records = pa.concat_tables(list(route_table(t, plan())))
        send(spark.createDataFrame(records).coalesce(1))

    variants = {
        "passthrough": passthrough,
        "identity": identity,
        "route": route,
        "route-flat": route_flat,
        "two-jobs": two_jobs,
    }
    for fn in variants.values():  # warm every path once (JIT, Python workers)
        fn()
    print(f"us per event over {args.records:,} events, one task, {args.rounds} rounds")
    got: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            fn()
            got[name].append((time.perf_counter() - t0) / args.records * 1e6)
    for name, us in got.items():
        print(f"{name:12s} " + " ".join(f"{u:7.1f}" for u in us))
    spark.stop()


if __name__ == "__main__":
    main()
