"""The route sink's one Spark job per micro-batch, on the real broker, Spark and Delta.

Two batches over two source partitions read in two tasks: each batch is one Spark job;
every valid event reaches the worker a splitter per source partition (its state carried
from batch to batch) chooses, once, in offset order per source, naming its source; the
rejects and loads reach Delta once the sink closes, and the tasks' files of the batches'
events are gone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from skewlab.grouping import make_grouping
from skewlab.io.delta import DeltaStore
from skewlab.pipeline import events
from skewlab.pipeline.route import Splitter
from skewlab.spark.route import RouteSettings
from skewlab.spark.route_sink import LOADS, RouteSink

pytestmark = pytest.mark.integration

DKG_FAST = {"warmup": 0.5, "check_interval": 0.5, "promotion_interval": 0.5, "old_every": 1}


def batch(first: int, n: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of ``n`` events per source partition from offset ``first``
    (Zipf-like keys over 2 s of event time), the first offset of partition 1 invalid."""
    out = []
    for p in (0, 1):
        for o in range(first, first + n):
            key = f"k{(o * o + p) % 7 if o % 3 else 0}"
            out.append((p, o, events.encode(key, 1_795_000_000.0 + o * 0.004, o)))
    if first == 0:
        out[n] = (1, 0, b"not json")
    return out


def reference(batches: list[list[tuple[int, int, bytes]]]) -> dict[tuple[int, int], int]:
    cfg = make_grouping("dkg", workers=4, **DKG_FAST)
    states: dict[int, Any] = {}
    out = {}
    for recs in batches:
        for p in (0, 1):
            mine = [(o, v) for q, o, v in sorted(recs) if q == p and v != b"not json"]
            dec = events.decode([v for _, v in mine])
            sp = Splitter(cfg, states.get(p))
            workers = sp.route(dec.keys, dec.ts)
            states[p] = sp.state()
            out.update({(p, o): w for (o, _), w in zip(mine, workers.tolist(), strict=True)})
    return out


def test_a_batch_is_one_job_routing_and_sending_in_its_tasks(
    spark, broker, new_topic, kafka, tmp_path: Path
) -> None:
    routed = new_topic(partitions=4)
    s = RouteSettings(
        run_id="taskroute",
        bootstrap=broker.bootstrap,
        events_topic="events-taskroute",
        routed_topic=routed,
        workers=4,
        strategy="dkg",
        strategy_params=DKG_FAST,
        delta_root=str(tmp_path / "delta"),
        run_dir=str(tmp_path / "run"),
        tasks=2,
    )
    sink = RouteSink(s, spark=spark)
    batches = [batch(0, 300), batch(300, 200)]
    sc = spark.sparkContext
    for b, recs in enumerate(batches):
        frame = pd.DataFrame(recs, columns=["partition", "offset", "value"])
        df = spark.createDataFrame(frame, "partition int, offset long, value binary")
        # A task's source partitions one after another (as from Kafka); this job first.
        df = df.repartition(2, "partition").sortWithinPartitions("partition").localCheckpoint()
        group = f"taskroute-{b}"
        sc.setJobGroup(group, group)
        try:
            sink(df, b)
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        assert len(sc.statusTracker().getJobIdsForGroup(group)) == 1
    sink.close(spark)

    got: dict[tuple[int, int], int] = {}
    ends = kafka.end_offsets(routed)
    sent = {(p, o): v for b in batches for p, o, v in b}
    for w in range(4):
        recs = list(kafka.fetch(routed, w, 0, ends[w]))
        srcs = [events.parse_src(r.headers) for r in recs]
        for r, src in zip(recs, srcs, strict=True):  # the event itself, keyed by its key
            ev, out = events.decode([sent[src]]), events.decode([r.value], routed=True)
            assert (out.keys, out.ts, out.seq, out.sizes) == (ev.keys, ev.ts, ev.seq, ev.sizes)
            assert r.key == ev.keys[0].encode()
        for p in (0, 1):
            offs = [o for q, o in srcs if q == p]
            assert offs == sorted(offs)  # each source in offset order
        for src in srcs:
            assert src not in got  # once
            got[src] = w
    assert got == reference(batches)

    store = DeltaStore(s.delta_root)
    loads = store.read("key_loads", run_id=s.run_id).to_pydict()
    assert sum(loads["count"]) == len(got)
    rejects = store.read("quarantine", run_id=s.run_id).to_pydict()
    assert list(zip(rejects["partition"], rejects["offset"], strict=True)) == [(1, 0)]
    assert not any((Path(s.checkpoint) / LOADS).iterdir())
