"""The route job's streaming query: ``events`` -> decode -> per-splitter grouping.

1. Spark's Kafka source (``format("kafka")``) reads ``events`` from the offsets in the
   query's checkpoint (:func:`kafka_events`);
2. each Arrow batch of (partition, offset, value) is decoded (:func:`decode_batch`):
   valid events shrink to (key, ts, seq, size), rejects keep their bytes and a reason;
3. each source partition is one splitter routing in offset order (:func:`splitter_fn`)
   in the read's own Spark task, its state in the checkpoint
   (:mod:`skewlab.spark.task_route`);
4. the ``foreachBatch`` sink (:mod:`skewlab.spark.route_sink`) runs steps 2-3 and
   Spark's Kafka sink to ``routed`` as one Spark job, then appends the Delta tables."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.errors import ConfigError
from skewlab.grouping import make_grouping
from skewlab.io.kafka.base import KafkaSettings
from skewlab.pipeline import events
from skewlab.pipeline.route import AssignmentVersion, Splitter
from skewlab.rundir import RunDir
from skewlab.spec import default

if TYPE_CHECKING:
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
    trigger_s: float = default("trigger_s")
    max_events_per_trigger: int | None = default("max_events_per_trigger")
    max_event_bytes: int = events.DEFAULT_MAX_BYTES
    spark_master: str = "local[2]"
    message_sets: bool = False
    spark_ui: bool = True
    """Serve the Spark UI on a free loopback port (its URL goes into ``route.ready``);
    ``$SKEWLAB_SPARK_UI=0`` switches it off too."""
    warmup_events: int = 400
    """Synthetic events of the warm-up micro-batch (0: no warm-up, ``route.ready`` when
    the query runs)."""
    tasks: int = 1
    """Spark tasks of a micro-batch: the source's reads (its Kafka partitions, coalesced),
    each routing and sending its source partitions. Each task is a fixed cost per batch
    (a Python worker round trip); one task also sends the source partitions one after
    another, as one producer. On 2 cores that the workers, broker and producer share, one
    task gave the shortest batches at 5,000 events/s (docs/throughput.md)."""
    delta_every_s: float = 5.0
    """Seconds between the starts of two rounds of Delta appends (each round: one commit
    per table for every batch waiting; :class:`~skewlab.spark.writes.DeltaAppender`). A
    round costs a dozen Spark jobs whatever its rows, so fewer rounds leave the cores to
    the stream; the tables then lag the stream by up to this much plus a round."""

    def __post_init__(self) -> None:
        if self.message_sets and self.strategy != "key":
            raise ConfigError(
                f"message sets run on top of KEY grouping only, got strategy {self.strategy!r}"
            )
        if self.workers < 1:
            raise ConfigError(f"workers must be >= 1, got {self.workers}")
        if self.window_s <= 0 or self.trigger_s <= 0:
            raise ConfigError("window_s and trigger_s must be > 0")
        if self.delta_every_s < 0:
            raise ConfigError(f"delta_every_s must be >= 0, got {self.delta_every_s}")
        if self.warmup_events < 0:
            raise ConfigError(f"warmup_events must be >= 0, got {self.warmup_events}")
        if self.tasks < 1:
            raise ConfigError(f"tasks must be >= 1, got {self.tasks}")
        make_grouping(self.strategy, workers=self.workers, **self.strategy_params)
        KafkaSettings(self.bootstrap, self.client)

    @property
    def files(self) -> RunDir:
        """The run's files (:class:`~skewlab.rundir.RunDir` of :attr:`run_dir`)."""
        return RunDir.of(self.run_dir)

    @property
    def checkpoint(self) -> str:
        """The query's Spark checkpoint (in the run dir)."""
        return str(self.files.checkpoint)

    def to_json(self) -> str:
        """All fields as a JSON object (sorted keys); :meth:`from_json` reads it back."""
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RouteSettings:
        """Settings from :meth:`to_json`'s text, validated again (:class:`ConfigError`;
        ``TypeError`` on unknown fields)."""
        return cls(**json.loads(text))


def decode_batch(b: Any, max_bytes: int) -> Any:
    """One Arrow batch of (partition, offset, value) decoded into :data:`DECODED_SCHEMA`
    (step 2): valid events shrink to (key, ts, seq, size); only rejects keep their raw
    bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = _array(b.column("value"))
    dec = events.decode_arrow(values, max_bytes=max_bytes)
    reason = dec.column("reason").combine_chunks()
    raw = pc.if_else(reason.is_null(), pa.nulls(len(values), pa.binary()), values)
    return pa.RecordBatch.from_arrays(
        [
            _array(b.column("partition")),
            _array(b.column("offset")),
            *(dec.column(c).combine_chunks() for c in ("key", "ts", "seq", "size")),
            raw,
            reason,
        ],
        names=["partition", "offset", "key", "ts", "seq", "size", "raw", "reason"],
    )


def _array(col: Any) -> Any:
    """One Arrow array of a batch's or a table's column."""
    return col.combine_chunks() if hasattr(col, "combine_chunks") else col


def decode_table(t: Any, max_bytes: int) -> Any:
    """:func:`decode_batch` of a whole Arrow table of (partition, offset, value) rows (a
    task's rows), as a table of :data:`DECODED_SCHEMA`."""
    import pyarrow as pa

    return pa.Table.from_batches([decode_batch(t, max_bytes)])


def decode_fn(max_bytes: int) -> Callable[[Any], Any]:
    """``mapInArrow`` function: :func:`decode_batch` of every batch (step 2)."""

    def run(batches: Any) -> Any:
        for b in batches:
            yield decode_batch(b, max_bytes)

    return run


Versions = Callable[[], Sequence[AssignmentVersion]]


def splitter_fn(s: RouteSettings, versions: Versions | None = None) -> Any:
    """The function of one splitter (source partition) and micro-batch (step 3):
    ``fn(key, state_or_None, rows) -> (new_state, out_rows)``, rows of
    :data:`DECODED_SCHEMA` in and of :data:`ROUTED_SCHEMA` out, in offset order (markers
    after the events); Arrow tables, or pandas frames for pandas frames given.

    ``versions()`` gives the batch's ``assignments`` versions; message sets need it
    (:class:`ConfigError` without: moved keys routed without their versions would break
    the message-set order silently).
    """
    if s.message_sets and versions is None:
        raise ConfigError("a splitter of message sets needs the batch's assignments versions")
    cfg = make_grouping(s.strategy, workers=s.workers, **s.strategy_params)

    def run(key: tuple[Any, ...], state: Any, rows: Any) -> tuple[Any, Any]:
        import pyarrow as pa

        t0 = time.perf_counter()
        frame = not isinstance(rows, pa.Table)
        if frame:  # a pandas frame: the same rows as Arrow, and a frame back
            rows = pa.Table.from_pandas(rows, preserve_index=False)
        splitter = Splitter(cfg, state)
        valid = rows.column("reason").is_null().to_numpy(zero_copy_only=False)
        n = rows.num_rows
        workers = np.full(n, -1, dtype=np.int64)
        set_ids = np.zeros(n, dtype=np.int64)
        sources = np.full(n, -1, dtype=np.int64)
        markers: list[dict[str, Any]] = []
        if valid.any():
            good = rows if valid.all() else rows.filter(pa.array(valid))
            keys = good.column("key").to_numpy(zero_copy_only=False).tolist()  # to_pylist: slower
            ts = good.column("ts").to_numpy()
            if s.message_sets:
                rs = splitter.route_sets(keys, ts, versions() if versions else ())
                workers[valid], set_ids[valid], sources[valid] = rs.workers, rs.set_ids, rs.sources
                offs = good.column("offset").to_numpy()
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
        named = dict(zip(rows.column_names, rows.columns, strict=True))
        cols = {
            "src_partition": named["partition"],
            "src_offset": named["offset"],
            "worker": pa.array(workers),
            **{c: named[c] for c in OUT_COLUMNS[3:9]},
            "set_id": pa.array(set_ids),
            "source": pa.array(sources),
            "kind": pa.array(np.ones(n, dtype=np.int32)),
        }
        out = pa.table(cols)
        if markers:
            out = pa.concat_tables([out, pa.Table.from_pylist(markers, schema=out.schema)])
        log.debug("splitter %s: %d rows in %.2f s", key, n, time.perf_counter() - t0)
        return splitter.state(), out.to_pandas() if frame else out

    return run


KAFKA_CALL_TIMEOUT_MS = 15_000
"""Bound on one Kafka call of the source (``default.api.timeout.ms``; Kafka's default 60 s).
Spark asks for offsets in a section its stream thread cannot be interrupted in, so a query
stopped while its broker is gone waits for the call: a run's query on the route host is
stopped, not killed, and must end within seconds (docs/route-host.md)."""


FETCH_MAX_WAIT_MS = 10
"""How long the broker may hold a fetch of the source's consumers for data (Kafka's default
500 ms). Spark's consumer asks for each partition's offset range after every poll, and the
broker answers a connection's requests in order, so a fetch the consumer sent ahead at the
end of a partition's data held every such ask that long: ~0.5 s per partition of a batch
that reached the end of its input, ~2 s for the last batch of a run (docs/real-stack.md,
session 29)."""


def kafka_events(spark: SparkSession, s: RouteSettings) -> DataFrame:
    """Step 1: Spark's Kafka source on ``events`` from the earliest offset, as rows of
    (partition, offset, value); at most ``s.max_events_per_trigger`` records a batch."""
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", s.bootstrap)
        .option("kafka.default.api.timeout.ms", str(KAFKA_CALL_TIMEOUT_MS))
        .option("kafka.request.timeout.ms", str(KAFKA_CALL_TIMEOUT_MS * 2 // 3))  # <= the above
        .option("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
        .option("subscribe", s.events_topic)
        .option("startingOffsets", "earliest")
    )
    if s.max_events_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(s.max_events_per_trigger))
    return reader.load().select("partition", "offset", "value")


def routed_stream(spark: SparkSession, s: RouteSettings, source: DataFrame | None = None) -> Any:
    """Step 1 as a streaming DataFrame: the raw (partition, offset, value) rows of
    ``source`` (default :func:`kafka_events`), coalesced to ``s.tasks`` tasks, which the
    sink decodes, routes and sends in one Spark job (:mod:`skewlab.spark.task_route`)."""
    rows = (kafka_events(spark, s) if source is None else source).select(
        "partition", "offset", "value"
    )
    return rows.coalesce(s.tasks)


class RouteQuery:
    """The running route query: Spark's ``StreamingQuery`` (every attribute passes
    through), whose :meth:`stop` also closes the sink (``sink.close(spark)``, if it has
    one: the route sink's Delta appends still pending when the query stopped)."""

    def __init__(self, query: StreamingQuery, sink: Any, spark: SparkSession) -> None:
        self._query, self._sink, self._spark = query, sink, spark

    def stop(self) -> None:
        """Stop the query, then close its sink."""
        try:
            self._query.stop()
        finally:
            close = getattr(self._sink, "close", None)
            if close is not None:
                close(self._spark)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)


def start_query(
    spark: SparkSession,
    s: RouteSettings,
    sink: Callable[[DataFrame, int], None],
    *,
    source: DataFrame | None = None,
    checkpoint: str | None = None,
    name: str | None = None,
    available_now: bool = False,
) -> StreamingQuery:
    """Define and start the streaming query (steps 1-4) writing through ``sink``
    (a :class:`RouteQuery`: its ``stop`` closes the sink too)."""
    writer = (
        routed_stream(spark, s, source)
        .writeStream.outputMode("append")
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint or s.checkpoint)
        .queryName(name or f"route-{s.run_id}")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{s.trigger_s} seconds")
    return RouteQuery(writer.start(), sink, spark)  # type: ignore[return-value]
