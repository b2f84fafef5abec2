"""The route job's ``foreachBatch`` sink: routed records to Kafka, then Delta.

:class:`RouteSink` runs each micro-batch:

1. the batch comes to the driver as Arrow (crash point ``route.in_batch``): raw rows with
   ``splitters="driver"`` (decoded and routed here, the splitters' states saved under the
   checkpoint before any record leaves: :meth:`RouteSink.route`), else routed rows;
2. the routed records go to ``routed`` through Spark's Kafka sink, one partition per
   worker (:func:`~skewlab.spark.writes.kafka_write`; crash point ``route.after_produce``);
3. its ``key_loads``, ``partition_loads`` and (when there are rejects) ``quarantine``
   rows are saved under the checkpoint and appended with delta-spark in the background
   (app id ``route:<run>``, version = the batch id; :class:`~skewlab.spark.writes.DeltaAppender`).

A replay resends its records (workers drop the copies) and Delta skips its appends;
Spark commits the batch's offsets after the sink returns, its rows then on disk.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.faults import crash_point
from skewlab.pipeline import events
from skewlab.pipeline.route import AssignmentVersion
from skewlab.rundir import app_id
from skewlab.spark import tables
from skewlab.spark.driver_splitters import SplitterStates, route_decoded
from skewlab.spark.route import (
    ASSIGNMENTS_PROPERTY,
    RouteSettings,
    decode_table,
    splitter_fn,
    versions_to_json,
)
from skewlab.spark.writes import (
    HEADER_PREFIX,
    Append,
    DeltaAppender,
    delta_appends,
    kafka_write,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

PENDING = "skewlab-delta-pending"
"""The folder of the checkpoint holding batches' Delta rows not yet appended."""

MAX_PENDING = 64
"""Batches whose Delta rows may wait for a round before the stream waits for the appends:
a bound on memory and on the tables' lag should rounds fall behind (a dozen Spark jobs each)."""

ROUTED_PRODUCER = {"batch.size": "1048576", "linger.ms": "20"}
"""Producer settings of the sink's Kafka write: a batch is sent in bulk, so 1 MB record
batches per partition (not 16 KB) and a 20 ms linger; measured in docs/real-stack.md."""

_PLAIN_KEY = r"^[ !#-\[\]-~]*$"
"""Keys JSON writes as themselves between quotes (printable ASCII but ``"`` and ``\\``)."""


def json_strings(keys: pa.Array) -> pa.Array:
    """``json.dumps(k)`` of every key (Arrow ``string``), vectorised but for keys that
    need escapes, which are encoded once per distinct key."""
    quoted = pc.binary_join_element_wise('"', keys, '"', "")
    plain = pc.match_substring_regex(keys, _PLAIN_KEY)
    if pc.all(plain).as_py() is not False:
        return quoted
    special = pc.unique(keys.filter(pc.invert(plain)))
    encoded = pa.array([json.dumps(k) for k in special.to_pylist()], pa.string())
    return pc.if_else(plain, quoted, encoded.take(pc.index_in(keys, special)))


def _text(arr: Any) -> pa.Array:
    return pc.cast(arr, pa.string())


def routed_records(batch: pa.Table) -> pa.Table:
    """The ``routed`` records of a sorted batch (events with a worker and markers).

    An event's value is :func:`~skewlab.pipeline.events.encode_routed`'s JSON (ts
    written by Arrow's shortest round-trip formatting, so it decodes to the same
    float), its key the event key, its headers ``skewlab.src`` = ``"<partition>:<offset>"``
    and, in a message set, ``skewlab.set`` = ``"<set id>:<source>"``. A marker has an
    empty value and only ``skewlab.eos`` = ``"<set id>:<next worker>:<splitter>"``.
    """
    kind = batch.column("kind")
    keep = pc.or_(pc.equal(kind, 0), pc.greater_equal(batch.column("worker"), 0))
    t = batch.filter(keep).combine_chunks()
    is_marker = pc.equal(t.column("kind"), 0)
    key = t.column("key").combine_chunks()
    value = pc.binary_join_element_wise(
        '{"key":',
        json_strings(key),
        ',"ts":',
        _text(t.column("ts")),
        ',"seq":',
        _text(t.column("seq")),
        ',"size":',
        _text(t.column("size")),
        "}",
        "",
    )
    value = pc.if_else(is_marker, pa.scalar(b"", pa.binary()), pc.cast(value, pa.binary()))
    sp, so = _text(t.column("src_partition")), _text(t.column("src_offset"))
    nulls = pa.nulls(t.num_rows, pa.binary())
    cols: dict[str, Any] = {
        "partition": t.column("worker"),
        "value": value,
        "key": pc.cast(key, pa.binary()),
        HEADER_PREFIX + events.SRC_HEADER: pc.if_else(
            is_marker, nulls, pc.cast(pc.binary_join_element_wise(sp, so, ":"), pa.binary())
        ),
    }
    set_id, source = t.column("set_id"), t.column("source")
    if pc.any(pc.greater(set_id, 0)).as_py() or pc.any(is_marker).as_py():
        pair = pc.binary_join_element_wise(_text(set_id), _text(source), ":")
        in_set = pc.and_(pc.invert(is_marker), pc.greater(set_id, 0))
        cols[HEADER_PREFIX + events.SET_HEADER] = pc.if_else(
            in_set, pc.cast(pair, pa.binary()), nulls
        )
        eos = pc.binary_join_element_wise(pair, sp, ":")
        cols[HEADER_PREFIX + events.EOS_HEADER] = pc.if_else(
            is_marker, pc.cast(eos, pa.binary()), nulls
        )
    return pa.table(cols)


@dataclass
class RouteSink:
    """The ``foreachBatch`` function (steps 1-3 of the module doc).

    ``dry`` (the warm-up): everything but sending (no produce, no crash points) and
    the Delta writes go to ``delta_root`` (a scratch root), so nothing is counted.
    ``spark``: the session to write through (default: the batch's).
    """

    s: RouteSettings
    dry: bool = False
    delta_root: str | None = None
    spark: SparkSession | None = field(default=None, repr=False)
    batches: int = 0
    """Micro-batches with rows handled so far."""
    _store: Any = field(default=None, repr=False)
    _versions: tuple[int | None, list[AssignmentVersion]] = (None, [])
    _split: Any = field(default=None, repr=False)
    _states: dict[int, Any] | None = field(default=None, repr=False)
    _states_after: int = -1
    """The batch :attr:`_states` are the states after (splitters on the driver)."""
    _batch_versions: list[AssignmentVersion] = field(default_factory=list, repr=False)
    _route_s: float = 0.0
    """Seconds of the last batch's driver-side decode and routing (part of its compute)."""
    _appender: DeltaAppender | None = field(default=None, repr=False)

    def appender(self) -> DeltaAppender:
        """The background Delta appender of the run's tables (made on first use): its
        pending rows live in ``<checkpoint>/skewlab-delta-pending`` (:attr:`PENDING`)."""
        if self._appender is None:
            if self.spark is None:
                raise RuntimeError("RouteSink needs a Spark session (RouteSink.spark)")
            self._appender = DeltaAppender(
                self.spark,
                self.delta_root or self.s.delta_root,
                Path(self.s.checkpoint) / PENDING,
                app_id=app_id("route", self.s.run_id),
                run_id=self.s.run_id,
                max_lag=MAX_PENDING,
                every_s=self.s.delta_every_s,
            )
        return self._appender

    def close(self, spark: SparkSession | None = None) -> None:
        """Append every batch still pending, once the query has stopped (``spark``: the
        session, if no batch brought one); the rows of a process killed before that stay
        under the checkpoint for the next one."""
        if self.dry:
            return
        if self.spark is None:
            self.spark = spark
        if self._appender is None and self.spark is None:
            return
        try:
            self.appender().close()  # a restarted job that saw no batch: its pending rows
        finally:
            self._appender = None

    def _reader(self) -> Any:
        """The delta-rs store the sink reads ``assignments`` from (the rebalancer's table)."""
        if self._store is None:
            from skewlab.io.delta.store import DeltaStore

            self._store = DeltaStore(self.delta_root or self.s.delta_root)
        return self._store

    def versions(self) -> list[AssignmentVersion]:
        """Every ``assignments`` version of the run, read again only when the table moved."""
        store = self._reader()
        current = store.table_version("assignments")
        if current is None:
            return []
        if current != self._versions[0]:
            rows = store.read("assignments", run_id=self.s.run_id).to_pylist()
            self._versions = (current, AssignmentVersion.from_rows(rows))
        return self._versions[1]

    def route(self, decoded: pa.Table, batch_id: int) -> pa.Table:
        """Route a decoded batch on the driver (``splitters = "driver"``): each source
        partition from its state after the previous batch, the new states saved under
        the checkpoint before the batch's records leave (:mod:`~skewlab.spark.driver_splitters`).
        """
        if self._split is None:
            self._split = splitter_fn(self.s, versions=lambda: self._batch_versions)
        store = SplitterStates(self.s.files.splitter_states)
        if self._states is None or self._states_after >= batch_id:
            states = store.before(batch_id)
        else:
            states = dict(self._states)
        if self.s.message_sets:
            self._batch_versions = self.versions()
        routed = route_decoded(decoded, self._split, states)
        if routed.num_rows and not self.dry:
            store.save(batch_id, states)
        self._states, self._states_after = states, batch_id
        return routed

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if not self.dry:  # step 1
            crash_point("route.in_batch")
        t0 = time.perf_counter()
        driver = self.s.splitters == "driver"
        if self.spark is None:
            self.spark = batch.sparkSession
        sc = batch.sparkSession.sparkContext
        if self.s.message_sets and not driver:
            sc.setLocalProperty(ASSIGNMENTS_PROPERTY, versions_to_json(self.versions()))
        try:
            t = batch.toArrow()
        finally:
            if self.s.message_sets and not driver:
                sc.setLocalProperty(ASSIGNMENTS_PROPERTY, None)  # type: ignore[arg-type]
        if t.num_rows == 0:
            return
        t_route = time.perf_counter()
        if driver:
            t = self.route(decode_table(t, self.s.max_event_bytes), int(batch_id))
        self._route_s = time.perf_counter() - t_route
        t = t.sort_by(
            [("src_partition", "ascending"), ("src_offset", "ascending"), ("kind", "ascending")]
        )
        self.write(t, int(batch_id), compute_s=time.perf_counter() - t0)
        self.batches += 1

    def write(self, t: pa.Table, batch_id: int, compute_s: float = 0.0) -> None:
        """Steps 2-3 for a sorted batch ``t`` (:data:`~skewlab.spark.route.ROUTED_SCHEMA`)."""
        s, spark = self.s, self.spark
        if spark is None:
            raise RuntimeError("RouteSink.write needs a Spark session (RouteSink.spark)")
        t1 = time.perf_counter()
        records = routed_records(t)  # step 2
        t2 = time.perf_counter()
        if not self.dry:
            kafka_write(spark, s.bootstrap, s.routed_topic, records, **ROUTED_PRODUCER)
            crash_point("route.after_produce")
        t3 = time.perf_counter()
        is_event = pc.equal(t.column("kind"), 1)  # step 3
        good = t.filter(pc.and_(is_event, pc.greater_equal(t.column("worker"), 0)))
        bad = t.filter(pc.and_(is_event, pc.less(t.column("worker"), 0)))
        app, run = app_id("route", s.run_id), s.run_id
        kl = tables.key_loads(run, good, s.window_s)
        pl = tables.partition_loads(run, kl, s.routed_topic, s.window_s)
        appends = [Append("key_loads", kl), Append("partition_loads", pl)]
        if bad.num_rows:  # no commit for an empty quarantine: a replay has no rejects either
            q = tables.quarantine(run, bad, s.events_topic, round(time.time() * 1000))
            appends.append(Append("quarantine", q))
        if self.dry:
            root = self.delta_root or s.delta_root
            delta_appends(spark, root, appends, app_id=app, version=batch_id, run_id=run)
        else:
            self.appender().submit(batch_id, appends)
        t4 = time.perf_counter()
        times = (compute_s, t2 - t1, t3 - t2, t4 - t3)
        if self.dry:
            log.info(
                "warm-up micro-batch: %d events, %d rejects (compute %.3f s, encode %.3f s, "
                "produce %.3f s, delta %.3f s)",
                good.num_rows,
                bad.num_rows,
                *times,
            )
            return
        log.info(
            "batch %d: routed %d, quarantined %d (compute %.3f s, encode %.3f s, "
            "produce %.3f s, delta queued %.3f s; of compute, driver decode + routing %.3f s; "
            "Delta appends pending %d)",
            batch_id,
            good.num_rows,
            bad.num_rows,
            *times,
            self._route_s,
            self.appender().lag,
        )
