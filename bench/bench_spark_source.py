"""Records/s through the ``skewlab-kafka`` Spark source vs the raw client, same run.

Starts its own tansu broker and a ``local[2]`` Spark session, produces N records
(100-byte values, 4 partitions, explicit partitions), then measures:

1. raw: the client's ``end_offsets`` + ``fetch`` of every partition (one process);
2. spark stream: an ``availableNow`` query counting every record in ``foreachBatch``
   (wall time from ``start()`` to termination, and Spark's own trigger time), twice:
   cold (first Python workers of the session) and warm;
3. spark batch: ``spark.read.format("skewlab-kafka").load().count()``;
4. with ``--state``: the median micro-batch time of a small stream (``maxEventsPerTrigger``)
   with no state, with ``applyInPandasWithState`` and with ``transformWithStateInPandas``
   (both through :func:`skewlab.spark.state.route_with_state`), i.e. the per-batch
   overhead of keeping per-splitter state.

Prints absolute numbers and Spark/raw ratios. About 1-2 minutes on 2 cores.

    .venv/bin/python bench/bench_spark_source.py [--records N] [--state]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from _common import raw_consume
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import Broker
from skewlab.spark.kafka_source import NAME
from skewlab.spark.session import spark_session
from skewlab.spark.state import APIS, route_with_state

PARTITIONS = 4
VALUE = b"v" * 100


def produce(bootstrap: str, topic: str, records: int) -> None:
    client = connect(KafkaSettings(bootstrap))
    client.create_topic(topic, PARTITIONS)
    for i in range(records):
        client.produce(topic, VALUE, key=b"k%d" % (i % 1000), partition=i % PARTITIONS)
    client.flush(120)
    client.close()


def spark_stream_count(
    spark, bootstrap: str, topic: str, checkpoint: Path
) -> tuple[int, float, float]:
    """(records, wall seconds incl. query start, Spark's summed trigger seconds)."""
    counted: list[int] = []
    df = spark.readStream.format(NAME).option("bootstrap", bootstrap).option("topic", topic).load()
    t0 = time.perf_counter()
    query = (
        df.writeStream.foreachBatch(lambda batch, _id: counted.append(batch.count()))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    wall = time.perf_counter() - t0
    trigger_ms = sum(p["durationMs"].get("triggerExecution", 0) for p in query.recentProgress)
    return sum(counted), wall, trigger_ms / 1000


def spark_batch_count(spark, bootstrap: str, topic: str) -> tuple[int, float]:
    t0 = time.perf_counter()
    n = spark.read.format(NAME).option("bootstrap", bootstrap).option("topic", topic).load().count()
    return n, time.perf_counter() - t0


def count_state(key, state, rows):
    import pandas as pd

    total = (state or 0) + len(rows)
    return total, pd.DataFrame({"partition": [int(key[0])], "total": [total]})


def batch_overhead(spark, bootstrap: str, topic: str, mode: str, checkpoint: Path) -> float:
    """Median trigger time (ms) of micro-batches of 2,000 records under ``mode``."""
    df = (
        spark.readStream.format(NAME)
        .option("bootstrap", bootstrap)
        .option("topic", topic)
        .option("maxEventsPerTrigger", "2000")
        .load()
        .select("partition", "offset")
    )
    if mode != "stateless":
        df = route_with_state(
            df, ["partition"], count_state, "partition int, total long", "offset", api=mode
        )
    query = (
        df.writeStream.outputMode("update")
        .foreachBatch(lambda batch, _id: batch.count())
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    times = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]]
    return statistics.median(times[1:] or times)  # the first batch pays for planning


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--state", action="store_true", help="also measure state overhead")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-spark-") as tmp:
        broker = Broker(Path(tmp) / "home")
        bootstrap = broker.start().url
        try:
            topic = f"bench-{uuid.uuid4().hex[:8]}"
            produce(bootstrap, topic, args.records)
            n_raw, s_raw = raw_consume(bootstrap, topic)
            raw_rate = n_raw / s_raw
            print(f"records {args.records:,} (100-byte values, {PARTITIONS} partitions)")
            print(f"raw client fetch   {n_raw:>9,} in {s_raw:6.2f} s  {raw_rate:>10,.0f} rec/s")

            t0 = time.perf_counter()
            spark = spark_session("bench-spark-source", Path(tmp) / "spark", master="local[2]")
            print(f"spark start        {time.perf_counter() - t0:6.2f} s")
            try:
                for run in ("cold", "warm"):
                    n, wall, trig = spark_stream_count(spark, bootstrap, topic, Path(tmp) / run)
                    for label, secs in ((f"{run} wall", wall), (f"{run} trigger", trig)):
                        rate = n / secs
                        print(
                            f"spark stream {label:<12} {n:>9,} in {secs:6.2f} s  {rate:>10,.0f} "
                            f"rec/s  ratio to raw {rate / raw_rate:.2f}"
                        )
                n, secs = spark_batch_count(spark, bootstrap, topic)
                rate = n / secs
                print(
                    f"spark batch count        {n:>9,} in {secs:6.2f} s  {rate:>10,.0f} rec/s  "
                    f"ratio to raw {rate / raw_rate:.2f}"
                )
                if args.state:
                    small = f"bench-state-{uuid.uuid4().hex[:8]}"
                    produce(bootstrap, small, 20_000)
                    for mode in ("stateless", *APIS):
                        ms = batch_overhead(spark, bootstrap, small, mode, Path(tmp) / f"ck-{mode}")
                        print(f"micro-batch of 2,000 records, {mode:<27} median {ms:6.0f} ms")
            finally:
                spark.stop()
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
