"""Per-splitter state in Spark's state store survives micro-batches and a restart.

The stream is Spark's Kafka source; the splitter is the source partition.
``maxOffsetsPerTrigger`` forces several micro-batches, and the query is stopped and
restarted from its checkpoint with more records produced in between.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from tests.integration.fixtures.spark import BatchCollector, produce_round_robin, stream_topic

from skewlab.grouping import make_grouping
from skewlab.spark.state import APIS, route_with_state

pytestmark = pytest.mark.integration

COUNT_SCHEMA = "splitter int, batch_rows long, running long, first_offset long, prev_last long"
COUNT_COLUMNS = tuple(field.split()[0] for field in COUNT_SCHEMA.split(", "))


def running_count(key, state, rows: pd.DataFrame):
    """Stand-in for a grouping snapshot: rows seen so far and the last offset seen."""
    state = state or {"count": 0, "last": -1}
    new = {"count": state["count"] + len(rows), "last": int(rows["offset"].iloc[-1])}
    out = pd.DataFrame(
        {
            "splitter": [int(key[0])],
            "batch_rows": [len(rows)],
            "running": [new["count"]],
            "first_offset": [int(rows["offset"].iloc[0])],
            "prev_last": [state["last"]],
        }
    )
    return new, out


def run_twice(spark, broker, kafka, topic, build, checkpoint: Path, columns) -> list[tuple]:
    """Stream ``topic`` through ``build(df)``, restart once after producing more records."""
    sink = BatchCollector(columns)
    for first, count in ((0, 600), (600, 400)):
        produce_round_robin(kafka, topic, first, count)
        df = stream_topic(spark, broker.bootstrap, topic, maxOffsetsPerTrigger="250")
        query = (
            build(df)
            .writeStream.outputMode("update")
            .foreachBatch(sink)
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="0 seconds")
            .start()
        )
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        assert query.exception() is None
    assert len([n for _, n in sink.batches if n]) >= 5
    return sink.rows


@pytest.mark.parametrize("api", APIS)
def test_running_count_survives_batches_and_restart(
    spark, broker, new_topic, kafka, tmp_path, api
) -> None:
    topic = new_topic(partitions=4)

    def build(df):
        return route_with_state(
            df.select("partition", "offset"),
            ["partition"],
            running_count,
            COUNT_SCHEMA,
            order_by="offset",
            api=api,
        )

    rows = run_twice(spark, broker, kafka, topic, build, tmp_path / "ck", COUNT_COLUMNS)
    out = pd.DataFrame(rows, columns=["splitter", "batch_rows", "running", "first", "prev_last"])
    assert out["batch_rows"].sum() == 1_000
    # each group's state continued exactly where the previous batch (or run) left it
    assert (out["first"] == out["prev_last"] + 1).all()
    final = out.groupby("splitter")["running"].max().to_dict()
    assert (
        final == {p: n for p, n in kafka.end_offsets(topic).items()} == {p: 250 for p in range(4)}
    )
    assert (out.groupby("splitter").size() >= 3).all()


def test_grouping_snapshot_routes_like_one_uninterrupted_router(
    spark, broker, new_topic, kafka, tmp_path
) -> None:
    """A stateful grouping, rebuilt from its snapshot each batch, decides like one object."""
    topic = new_topic(partitions=4)
    cfg = make_grouping("pkg", workers=3)

    def route(key, snap, rows: pd.DataFrame):
        g = cfg.build(state=snap)
        workers = [g.route(k.decode()) for k in rows["key"]]
        out = pd.DataFrame(
            {"partition": rows["partition"], "offset": rows["offset"], "worker": workers}
        )
        return g.snapshot(), out

    def build(df):
        return route_with_state(
            df.select("partition", "offset", "key"),
            ["partition"],
            route,
            "partition int, offset long, worker int",
            order_by="offset",
        )

    rows = run_twice(
        spark, broker, kafka, topic, build, tmp_path / "ck", ("partition", "offset", "worker")
    )
    got = {(p, o): w for p, o, w in rows}
    assert len(got) == len(rows) == 1_000
    for p, end in kafka.end_offsets(topic).items():
        reference = cfg.build()
        expected = [reference.route(r.key.decode()) for r in kafka.fetch(topic, p, 0, end)]
        assert [got[(p, o)] for o in range(end)] == expected
