"""The route job's ``foreachBatch`` sink: routed records to Kafka, then Delta.

:class:`RouteSink` runs each micro-batch:

1. crash point ``route.in_batch``; one Spark job decodes the batch, routes each source
   partition from its state under the checkpoint and sends the routed records with
   Spark's Kafka sink, one partition per worker (:mod:`~skewlab.spark.task_route`);
2. crash point ``route.after_produce``;
3. the batch's ``key_loads``, ``partition_loads`` and (when there are rejects)
   ``quarantine`` rows (from the tasks' files, :func:`~skewlab.spark.task_route.read_loads`)
   are saved under the checkpoint and appended with delta-spark in the background (app id
   ``route:<run>``, version = the batch id; :class:`~skewlab.spark.writes.DeltaAppender`).

A replay resends its records (workers drop the copies) and Delta skips its appends;
Spark commits the batch's offsets after the sink returns, its rows then on disk.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.faults import crash_point
from skewlab.pipeline.route import AssignmentVersion
from skewlab.rundir import app_id
from skewlab.spark import tables
from skewlab.spark.route import RouteSettings
from skewlab.spark.task_route import KAFKA_SCHEMA, TaskPlan, drop_loads, read_loads, route_task_fn
from skewlab.spark.writes import Append, DeltaAppender, delta_appends, kafka_writer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

PENDING = "skewlab-delta-pending"
"""The folder of the checkpoint holding batches' Delta rows not yet appended."""

LOADS = "skewlab-batch-loads"
"""The folder of the checkpoint where a batch's tasks leave its events for its Delta rows
(:func:`~skewlab.spark.task_route.save_loads`; emptied once they are in :data:`PENDING`)."""

MAX_PENDING = 64
"""Batches whose Delta rows may wait for a round before the stream waits for the appends:
a bound on memory and on the tables' lag should rounds fall behind (a dozen Spark jobs each)."""

ROUTED_PRODUCER = {"batch.size": "1048576", "linger.ms": "20"}
"""Producer settings of the sink's Kafka write: a batch is sent in bulk, so 1 MB record
batches per partition (not 16 KB) and a 20 ms linger; measured in docs/real-stack.md."""


@dataclass
class RouteSink:
    """The ``foreachBatch`` function (steps 1-3 of the module doc).

    ``dry`` (the warm-up): everything but sending (no produce, no crash points) and
    the Delta writes go to ``delta_root`` (a scratch root), so nothing is counted.
    ``spark``: the session to write through (default: the batch's). ``scratch``: where
    the tasks keep the splitter states and the batches' events (default: the checkpoint).
    """

    s: RouteSettings
    dry: bool = False
    delta_root: str | None = None
    spark: SparkSession | None = field(default=None, repr=False)
    scratch: Path | None = None
    batches: int = 0
    """Micro-batches with rows handled so far."""
    _store: Any = field(default=None, repr=False)
    _versions: tuple[int | None, list[AssignmentVersion]] = (None, [])
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

    def folders(self) -> tuple[Path, Path]:
        """The tasks' folders: splitter states, and the batches' events for Delta."""
        if self.scratch is not None:
            return self.scratch / "splitters", self.scratch / "loads"
        return self.s.files.splitter_states, Path(self.s.checkpoint) / LOADS

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Steps 1-3 for one micro-batch (its raw rows ``batch``)."""
        if not self.dry:  # step 1
            crash_point("route.in_batch")
        if self.spark is None:
            self.spark = batch.sparkSession
        s, batch_id = self.s, int(batch_id)
        states, loads = self.folders()
        t0 = time.perf_counter()
        versions = tuple(self.versions()) if s.message_sets else ()
        plan = TaskPlan(s, batch_id, str(states), str(loads), versions)
        out = batch.mapInArrow(route_task_fn(plan), KAFKA_SCHEMA)
        if self.dry:  # the same job, its records dropped
            out.write.format("noop").mode("overwrite").save()
        else:
            kafka_writer(out, s.bootstrap, s.routed_topic, **ROUTED_PRODUCER).save()
            crash_point("route.after_produce")  # step 2
        routed_s = time.perf_counter() - t0
        events = read_loads(loads, batch_id)
        if events is None:  # no rows
            return
        self.delta(events, batch_id, {"route + produce job": routed_s})  # step 3
        drop_loads(loads, batch_id)
        self.batches += 1

    def delta(self, events: pa.Table, batch_id: int, times: dict[str, float]) -> None:
        """Step 3: the Delta rows of a batch's ``events`` (``worker`` < 0: rejects), saved
        and queued (``dry``: appended to the scratch root at once); ``times``: what the
        batch took so far, for its log line."""
        s, spark = self.s, self.spark
        if spark is None:
            raise RuntimeError("RouteSink.delta needs a Spark session (RouteSink.spark)")
        t0 = time.perf_counter()
        good = events.filter(pc.greater_equal(events.column("worker"), 0))
        bad = events.filter(pc.less(events.column("worker"), 0))
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
        times = {**times, "delta queued": time.perf_counter() - t0}
        spent = ", ".join(f"{k} {v:.3f} s" for k, v in times.items())
        if self.dry:
            log.info(
                "warm-up micro-batch: %d events, %d rejects (%s)",
                good.num_rows,
                bad.num_rows,
                spent,
            )
            return
        log.info(
            "batch %d: routed %d, quarantined %d (%s; Delta appends pending %d)",
            batch_id,
            good.num_rows,
            bad.num_rows,
            spent,
            self.appender().lag,
        )
