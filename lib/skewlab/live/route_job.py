"""The Spark route job: ``events`` -> per-splitter grouping -> ``routed`` + Delta.

One streaming query, per micro-batch:

1. the ``skewlab-kafka`` source reads the new range of every partition of
   ``events`` (offsets checkpointed by Spark);
2. rows are grouped by source partition: each group is one *splitter*
   (DKG's SplitterBolt) whose :class:`~skewlab.pipeline.route.Splitter` state
   lives in Spark's state store (:func:`skewlab.spark.state.route_with_state`),
   so a restarted query continues with the same grouping state. Each splitter
   decodes its records in offset order; invalid ones become quarantine rows,
   valid ones get a worker from the grouping (or the newest ``assignments``);
3. ``foreachBatch`` on the driver, for batch ``b``:
   a. produce every routed event to ``routed`` partition = worker, in source
      offset order, with its source (partition, offset) header, and flush;
   b. append ``key_loads``, ``partition_loads`` and ``quarantine`` rows under
      app id ``route:<run>`` version ``b``.
   A batch replayed after a crash re-produces its records (workers drop them by
   watermark) and skips its Delta writes (already committed), so nothing is
   counted twice.

The job stops when its stop file appears: it processes all available input,
then stops the query.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.errors import ConfigError
from skewlab.faults import crash_point
from skewlab.grouping import make_grouping
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaSettings
from skewlab.pipeline import events
from skewlab.pipeline.route import AssignmentVersion, Splitter, key_loads
from skewlab.rundir import RunDir, app_id
from skewlab.spark.session import spark_session
from skewlab.spark.state import route_with_state

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

log = logging.getLogger(__name__)

DECODED_SCHEMA = (
    "partition int, offset long, key string, ts double, seq long, size long, raw binary, "
    "reason string"
)
"""Rows after decoding, before the shuffle: ``raw`` and ``reason`` only for rejects."""

ROUTED_SCHEMA = (
    "src_partition int, src_offset long, worker long, key string, ts double, seq long, "
    "size long, raw binary, reason string, set_id long, source long, kind int"
)
"""Rows out of the splitters: ``worker = -1`` and a ``reason`` for quarantined input;
``kind`` 1 = event (``set_id``, ``source``: its message set), 0 = end-of-set marker
(``set_id`` ends, ``source`` = the next worker)."""

OUT_COLUMNS = [
    "src_partition",
    "src_offset",
    "worker",
    "key",
    "ts",
    "seq",
    "size",
    "raw",
    "reason",
    "set_id",
    "source",
    "kind",
]


@dataclass(frozen=True)
class RouteSettings:
    """Everything the route job needs, validated once (the job's edge)."""

    run_id: str
    bootstrap: str
    events_topic: str
    routed_topic: str
    workers: int
    strategy: str
    delta_root: str
    run_dir: str
    """The run's directory (:class:`~skewlab.rundir.RunDir`): checkpoint, markers, data."""
    strategy_params: dict[str, Any] = field(default_factory=dict)
    client: str = "confluent"
    window_s: float = 15.0
    trigger_s: float = 1.0
    max_events_per_trigger: int | None = None
    max_event_bytes: int = events.DEFAULT_MAX_BYTES
    spark_master: str = "local[2]"
    message_sets: bool = False

    def __post_init__(self) -> None:
        if self.message_sets and self.strategy != "key":
            raise ConfigError(
                f"message sets run on top of KEY grouping only, got strategy {self.strategy!r}"
            )
        if self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}")
        if self.window_s <= 0 or self.trigger_s <= 0:
            raise ConfigError("window_s and trigger_s must be > 0")
        make_grouping(self.strategy, workers=self.workers, **self.strategy_params)
        KafkaSettings(self.bootstrap, self.client)

    @property
    def files(self) -> RunDir:
        return RunDir.of(self.run_dir)

    @property
    def checkpoint(self) -> str:
        """The query's Spark checkpoint (in the run dir)."""
        return str(self.files.checkpoint)

    def to_json(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RouteSettings:
        return cls(**json.loads(text))


def decode_fn(max_bytes: int) -> Any:
    """``mapInArrow`` function: decode raw records next to the source (no shuffle yet).

    Valid events shrink to (key, ts, seq, size); only rejects keep their raw
    bytes, so the shuffle to the splitters moves a fraction of the input.
    """

    def run(batches: Any) -> Any:
        import pyarrow as pa

        for b in batches:
            values = b.column("value").to_pylist()
            dec = events.decode(values, max_bytes=max_bytes)
            n = len(values)
            key: list[str | None] = [None] * n
            ts: list[float | None] = [None] * n
            seq: list[int | None] = [None] * n
            size = [len(v) if v is not None else 0 for v in values]
            raw: list[bytes | None] = [None] * n
            reason: list[str | None] = [None] * n
            for j, i in enumerate(dec.index):
                key[i], ts[i], seq[i] = dec.keys[j], dec.ts[j], dec.seq[j]
            for i, r in dec.rejects:
                raw[i], reason[i] = values[i], r
            yield pa.RecordBatch.from_pydict(
                {
                    "partition": b.column("partition"),
                    "offset": b.column("offset"),
                    "key": pa.array(key, pa.string()),
                    "ts": pa.array(ts, pa.float64()),
                    "seq": pa.array(seq, pa.int64()),
                    "size": pa.array(size, pa.int64()),
                    "raw": pa.array(raw, pa.binary()),
                    "reason": pa.array(reason, pa.string()),
                }
            )

    return run


_STORES: dict[str, Any] = {}


def assignment_versions(delta_root: str, run_id: str, after: int) -> list[AssignmentVersion]:
    """The ``assignments`` versions of ``run_id`` above ``after`` (a store per Python worker)."""
    from skewlab.io.delta import DeltaStore

    store = _STORES.get(delta_root)
    if store is None:
        store = _STORES[delta_root] = DeltaStore(delta_root)
    rows = store.read("assignments", run_id=run_id, filters=[("version", ">", after)])
    return AssignmentVersion.from_rows(rows.to_pylist())


def splitter_fn(s: RouteSettings) -> Any:
    """The per-splitter function run by Spark for one group and micro-batch."""
    cfg = make_grouping(s.strategy, workers=s.workers, **s.strategy_params)

    def run(key: tuple[Any, ...], state: Any, rows: pd.DataFrame) -> tuple[Any, pd.DataFrame]:
        import pandas as pd

        t0 = time.perf_counter()
        splitter = Splitter(cfg, state)
        valid = rows["reason"].isna().to_numpy()
        n = len(rows)
        workers = np.full(n, -1, dtype=np.int64)
        set_ids = np.zeros(n, dtype=np.int64)
        sources = np.full(n, -1, dtype=np.int64)
        markers: list[dict[str, Any]] = []
        if valid.any():
            keys, ts = rows["key"][valid].tolist(), rows["ts"][valid].to_numpy()
            if s.message_sets:
                versions = assignment_versions(s.delta_root, s.run_id, splitter.applied)
                rs = splitter.route_sets(keys, ts, versions)
                workers[valid], set_ids[valid], sources[valid] = rs.workers, rs.set_ids, rs.sources
                offs = rows["offset"][valid].to_numpy()
                markers = [
                    {
                        "src_partition": int(key[0]),
                        "src_offset": int(offs[m.index]),
                        "worker": m.worker,
                        "key": m.key,
                        "ts": float(ts[m.index]),
                        "seq": -1,
                        "size": 0,
                        "raw": None,
                        "reason": None,
                        "set_id": m.set_id,
                        "source": m.next_worker,
                        "kind": 0,
                    }
                    for m in rs.markers
                ]
            else:
                workers[valid] = splitter.route(keys, ts)
        out = rows.rename(columns={"partition": "src_partition", "offset": "src_offset"})
        out.insert(2, "worker", workers)
        out["set_id"], out["source"] = set_ids, sources
        out["kind"] = np.ones(n, dtype=np.int32)
        if markers:
            out = pd.concat([out[OUT_COLUMNS], pd.DataFrame(markers)], ignore_index=True)
        log.debug("splitter %s: %d rows in %.2f s", key, len(rows), time.perf_counter() - t0)
        return splitter.state(), out[OUT_COLUMNS]

    return run


class BatchSink:
    """The ``foreachBatch`` function: produce to ``routed``, then write Delta (step 3)."""

    def __init__(self, s: RouteSettings) -> None:
        self.s = s
        self._client: Any = None
        self._store: Any = None
        self._encoder = events.RoutedEncoder()

    def _clients(self) -> tuple[Any, Any]:
        if self._client is None:
            from skewlab.io.delta import DeltaStore

            self._client = connect(KafkaSettings(self.s.bootstrap, self.s.client))
            self._store = DeltaStore(self.s.delta_root)
        return self._client, self._store

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        t0 = time.perf_counter()
        crash_point("route.in_batch")
        t = batch.toArrow()
        if t.num_rows == 0:
            return
        t = t.sort_by(
            [("src_partition", "ascending"), ("src_offset", "ascending"), ("kind", "ascending")]
        )
        t1 = time.perf_counter()
        self.write(t.to_pydict(), int(batch_id))
        log.info(
            "batch %d: %d rows, compute %.2f s, sink %.2f s",
            batch_id,
            t.num_rows,
            t1 - t0,
            time.perf_counter() - t1,
        )

    def write(self, cols: dict[str, list[Any]], batch_id: int) -> None:
        t_start = time.perf_counter()
        client, store = self._clients()
        s = self.s
        kinds = cols.get("kind") or [1] * len(cols["worker"])
        good = [i for i, w in enumerate(cols["worker"]) if w >= 0 and kinds[i] == 1]
        topic = s.routed_topic
        keys, workers, tss, seqs = cols["key"], cols["worker"], cols["ts"], cols["seq"]
        sp, so, sz = cols["src_partition"], cols["src_offset"], cols["size"]
        sets, sources = cols.get("set_id"), cols.get("source")
        encode, produce, header = self._encoder.encode, client.produce, events.SRC_HEADER
        for i in range(len(workers)):
            k = keys[i]
            if kinds[i] == 0:
                eos = f"{sets[i]}:{sources[i]}:{sp[i]}".encode()  # type: ignore[index]
                produce(
                    topic,
                    b"",
                    key=k.encode(),
                    partition=workers[i],
                    headers=[(events.EOS_HEADER, eos)],
                )
                continue
            if workers[i] < 0:
                continue
            hdrs = [(header, f"{sp[i]}:{so[i]}".encode())]
            if sets is not None and sets[i] > 0:
                hdrs.append((events.SET_HEADER, f"{sets[i]}:{sources[i]}".encode()))  # type: ignore[index]
            produce(
                topic,
                encode(k, tss[i], seqs[i], sz[i]),
                key=k.encode(),
                partition=workers[i],
                headers=hdrs,
            )
        client.flush()
        crash_point("route.after_produce")
        t_produced = time.perf_counter()
        app, run = app_id("route", s.run_id), s.run_id
        ts = np.asarray([cols["ts"][i] for i in good])
        w_arr = np.asarray([workers[i] for i in good], dtype=np.int64)
        sizes = np.asarray([cols["size"][i] for i in good], dtype=np.int64)
        kl = key_loads(s.window_s, ts, [keys[i] for i in good], w_arr, sizes)
        for row in kl:
            row["window_start"] = round(row["window_start"] * 1000)
        store.append("key_loads", kl, app_id=app, version=batch_id, run_id=run)
        store.append(
            "partition_loads",
            _partition_loads(kl, topic, s.window_s),
            app_id=app,
            version=batch_id,
            run_id=run,
        )
        bad = [i for i, w in enumerate(workers) if w < 0 and kinds[i] == 1]
        now_ms = round(time.time() * 1000)
        store.append(
            "quarantine",
            [
                {
                    "raw": cols["raw"][i],
                    "topic": s.events_topic,
                    "partition": sp[i],
                    "offset": so[i],
                    "reason": cols["reason"][i],
                    "ts": now_ms,
                }
                for i in bad
            ],
            app_id=app,
            version=batch_id,
            run_id=run,
        )
        log.info(
            "batch %d: routed %d, quarantined %d (produce %.2f s, delta %.2f s)",
            batch_id,
            len(good),
            len(bad),
            t_produced - t_start,
            time.perf_counter() - t_produced,
        )


def _partition_loads(kl: list[dict[str, Any]], topic: str, window_s: float) -> list[dict[str, Any]]:
    acc: dict[tuple[int, int], list[int]] = {}
    for r in kl:
        slot = acc.setdefault((r["window_start"], r["worker"]), [0, 0])
        slot[0] += r["bytes"]
        slot[1] += r["count"]
    return [
        {
            "window_start": w,
            "topic": topic,
            "partition": p,
            "bytes": b,
            "records": n,
            "bytes_per_s": b / window_s,
        }
        for (w, p), (b, n) in sorted(acc.items())
    ]


def start_query(spark: SparkSession, s: RouteSettings) -> StreamingQuery:
    """Define and start the streaming query (steps 1-3 of the module doc)."""

    reader = (
        spark.readStream.format("skewlab-kafka")
        .option("bootstrap", s.bootstrap)
        .option("topic", s.events_topic)
        .option("client", s.client)
        .option("startingOffsets", "earliest")
    )
    if s.max_events_per_trigger:
        reader = reader.option("maxEventsPerTrigger", str(s.max_events_per_trigger))
    src = reader.load().select("partition", "offset", "value")
    decoded = src.mapInArrow(decode_fn(s.max_event_bytes), DECODED_SCHEMA)
    routed = route_with_state(
        decoded, ["partition"], splitter_fn(s), ROUTED_SCHEMA, order_by="offset"
    )
    return (
        routed.writeStream.outputMode("update")
        .foreachBatch(BatchSink(s))
        .option("checkpointLocation", s.checkpoint)
        .trigger(processingTime=f"{s.trigger_s} seconds")
        .queryName(f"route-{s.run_id}")
        .start()
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.route_job SETTINGS_JSON [DATA_DIR]`` (and ``jobs/route.py``)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: route_job SETTINGS_JSON [SPARK_DATA_DIR]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    s = RouteSettings.from_json(Path(args[0]).read_text() if Path(args[0]).exists() else args[0])
    data_dir = args[1] if len(args) > 1 else str(s.files.spark_data)
    spark = spark_session(f"skewlab-route-{s.run_id}", data_dir, master=s.spark_master)
    ready, stop = s.files.route_ready, s.files.route_stop
    query = start_query(spark, s)
    ready.write_text(str(time.time()))
    try:
        while query.isActive:
            if stop.exists():
                query.processAllAvailable()
                break
            time.sleep(0.5)
        exc = query.exception()
        if exc is not None:
            log.error("route query failed: %s", exc)
            return 1
    finally:
        query.stop()
        spark.stop()
    if s.message_sets:
        send_end_of_stream(s)
    return 0


def send_end_of_stream(s: RouteSettings) -> None:
    """Tell every worker that no splitter routes any more (their open sets may end)."""

    client = connect(KafkaSettings(s.bootstrap, s.client))
    try:
        for w in range(s.workers):
            client.produce(s.routed_topic, b"", partition=w, headers=[(events.END_HEADER, b"1")])
        client.flush()
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
