"""The route job's writes through Spark's own connectors: Kafka records and Delta appends.

:func:`kafka_writer` is Spark's Kafka sink (``format("kafka")``) for a DataFrame in
the columns of :func:`kafka_frame` (a ``partition`` column picks each record's
partition, a ``headers`` column carries its headers); :func:`delta_append` appends an
Arrow table to a Delta table with delta-spark, exactly once per ``(app_id, version)``
through Delta's idempotent writes (``txnAppId`` / ``txnVersion``: the app transaction is recorded in
the same commit as the data, and a replayed version is skipped; a table's steady appends
commit through its transaction log directly: :func:`commit_files`). :func:`delta_appends`
runs several appends at once (each is a few small Spark jobs; see docs/real-stack.md);
:class:`DeltaAppender` runs them off the micro-batch's path, saved to disk first.

The Delta rows are built on the driver; these functions only hand them to Spark's writers.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.io.delta.convert import to_arrow
from skewlab.io.delta.schemas import table_spec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameWriter, SparkSession

log = logging.getLogger(__name__)

HEADER_PREFIX = "header:"
"""Columns named ``header:<name>`` of a records table become header ``<name>`` of each
record whose value there is not null."""

HEADERS_TYPE = pa.list_(
    pa.struct([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
)
"""The ``headers`` column Spark's Kafka sink takes: ``array<struct<key, value>>``."""


def headers_column(records: pa.Table) -> pa.Array | None:
    """The ``header:*`` columns of ``records`` as one ``headers`` list per row (in column
    order, nulls left out); ``None`` when there are no header columns."""
    names = [c for c in records.column_names if c.startswith(HEADER_PREFIX)]
    if not names:
        return None
    n = records.num_rows
    cols = [pc.cast(records.column(c), pa.binary()).combine_chunks() for c in names]
    present = np.stack([col.is_valid().to_numpy(zero_copy_only=False) for col in cols], axis=1)
    rows, which = np.nonzero(present)  # row-major: each row's headers in column order
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    values = pa.concat_arrays(cols).take(pa.array(rows + which * n))
    keys = pa.array([c[len(HEADER_PREFIX) :] for c in names], pa.string()).take(pa.array(which))
    entries = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    return pa.ListArray.from_arrays(pa.array(offsets), entries, type=HEADERS_TYPE)


def kafka_frame(records: pa.Table) -> pa.Table:
    """``records`` (``partition``, ``value``, optional ``key`` and ``header:*``) in the
    columns and types Spark's Kafka sink reads."""
    cols: dict[str, Any] = {
        "partition": pc.cast(records.column("partition"), pa.int32()),
        "value": pc.cast(records.column("value"), pa.binary()),
    }
    if "key" in records.column_names:
        cols["key"] = pc.cast(records.column("key"), pa.binary())
    headers = headers_column(records)
    if headers is not None:
        cols["headers"] = headers
    return pa.table(cols)


def kafka_writer(df: DataFrame, bootstrap: str, topic: str, **kafka: str) -> DataFrameWriter:
    """Spark's Kafka sink for ``df`` (columns of :func:`kafka_frame`) to ``topic``;
    ``kafka``: extra producer settings (``linger.ms="5"`` becomes option ``kafka.linger.ms``).
    Each task sends its rows in order; delivery is at least once."""
    writer = (
        df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
    )
    for key, value in kafka.items():
        writer = writer.option(f"kafka.{key}", value)
    return writer


@dataclass(frozen=True)
class Append:
    """One append of :func:`delta_appends`: ``data`` to ``table``."""

    table: str
    data: Any


def delta_append(
    spark: SparkSession,
    root: str | Path,
    table: str,
    data: Any,
    *,
    app_id: str,
    version: int,
    run_id: str,
) -> None:
    """Append ``data`` to ``<root>/<table>`` with delta-spark, once per ``(app_id, version)``.

    1. the data is cast to the table's schema (:func:`~skewlab.io.delta.convert.to_arrow`:
       a bad batch fails before any I/O);
    2. the table's columns and the app's last version are read from its log with delta-rs
       (:func:`table_state`, no Spark job); a ``version`` not above that version adds
       nothing (a replayed micro-batch);
    3. a missing table is created partitioned by ``run_id``, and a table whose columns are
       not the data's is widened (``mergeSchema``: older rows read a new nullable column as
       null), by Spark's writer with ``txnAppId`` / ``txnVersion``;
    4. otherwise the rows go in one file and one commit through the table's transaction log
       (:func:`commit_files`): the same actions as the writer's, without its rebuild of
       the table's state to find the app's version again (docs/real-stack.md, session 32).
    """
    spec = table_spec(table)
    arrow = to_arrow(spec, data, run_id)  # step 1
    path = str(Path(root) / spec.name)
    columns, done = table_state(path, app_id)  # step 2
    if done is not None and version <= done:
        return
    frame = spark.createDataFrame(arrow).coalesce(1)
    if columns != set(arrow.column_names):  # step 3
        (
            frame.write.format("delta")
            .mode("append")
            .option("txnAppId", app_id)
            .option("txnVersion", str(version))
            .option("mergeSchema", "true")
            .partitionBy(*spec.partition_by)
            .save(path)
        )
        return
    commit_files(spark, path, frame, app_id, version, spec.partition_by)  # step 4


def table_state(path: str, app_id: str) -> tuple[set[str], int | None]:
    """The columns of the Delta table at ``path`` (empty: no table) and the last version
    ``app_id`` committed there (``None``: none), from its log with delta-rs."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        dt = DeltaTable(path)
    except TableNotFoundError:
        return set(), None
    done = dt.transaction_version(app_id)
    return {f.name for f in dt.schema().fields}, None if done is None else int(done)


def commit_files(
    spark: SparkSession,
    path: str,
    frame: DataFrame,
    app_id: str,
    version: int,
    partition_by: Sequence[str],
) -> int:
    """Write ``frame`` into the Delta table at ``path`` and commit its files with the app
    transaction ``(app_id, version)`` in one commit, through delta-spark's
    ``OptimisticTransaction`` (what its writer does for ``txnAppId`` / ``txnVersion``);
    the commit's version. The table exists with ``frame``'s columns; the caller has
    checked ``version`` is new (:func:`delta_append`)."""
    jvm = spark._jvm
    if jvm is None:
        raise RuntimeError("a Delta commit needs a classic Spark session (py4j), not Spark Connect")
    delta = jvm.org.apache.spark.sql.delta
    scala, seqs = jvm.scala, jvm.scala.jdk.javaapi.CollectionConverters

    def seq(items: Any) -> Any:
        out = jvm.java.util.ArrayList()
        for item in items:
            out.add(item)
        return seqs.asScala(out).toSeq()

    txn = delta.DeltaLog.forTable(spark._jsparkSession, path).startTransaction()
    files = list(seqs.asJava(txn.writeFiles(frame._jdf)))
    stamp = jvm.java.lang.Long.valueOf(int(time.time() * 1000))
    app = delta.actions.SetTransaction(app_id, version, scala.Some(stamp))
    write = delta.DeltaOperations.Write(
        jvm.org.apache.spark.sql.SaveMode.Append,
        scala.Some(seq(partition_by)),
        scala.Option.empty(),
        scala.Option.empty(),
    )
    return int(txn.commit(seq([*files, app]), write))


def delta_appends(
    spark: SparkSession,
    root: str | Path,
    appends: Sequence[Append],
    *,
    app_id: str,
    version: int,
    run_id: str,
) -> None:
    """:func:`delta_append` of each of ``appends`` (different tables), all at once."""
    if len(appends) <= 1:
        for a in appends:
            delta_append(
                spark, root, a.table, a.data, app_id=app_id, version=version, run_id=run_id
            )
        return
    with ThreadPoolExecutor(len(appends), thread_name_prefix="delta-append") as pool:
        futures = [
            pool.submit(
                delta_append,
                spark,
                root,
                a.table,
                a.data,
                app_id=app_id,
                version=version,
                run_id=run_id,
            )
            for a in appends
        ]
        for f in futures:
            f.result()


@dataclass(frozen=True)
class _Pending:
    """One batch's rows per table."""

    batch: int
    data: dict[str, pa.Table]


class DeltaAppender:
    """Idempotent Delta appends of a stream's batches, off the batch's path, in order.

    The route job's ``foreachBatch`` hands each batch's rows to :meth:`submit` and
    returns; Spark then commits the batch's offsets while the appends run here. Each
    batch, in this order:

    1. its rows, cast to each table's schema, are written to ``<pending>/<batch id>``
       (a temporary file, flushed, then renamed) before :meth:`submit` returns, so they
       are on disk before Spark commits the batch;
    2. one background thread appends the queued batches in batch order: all batches
       queued at that moment in one commit per table (app version = the newest batch id,
       the tables at once: :func:`delta_appends`), each table's commit holding the rows
       of the batches above the app's last version in that table (read with delta-rs just
       before, :meth:`committed`), then deletes their files. Rounds start ``every_s``
       apart at most, the first ``every_s`` after the appender starts (an idempotent
       append costs several Spark jobs whatever its size: docs/real-stack.md), and a
       round that took ``d`` seconds is followed by ``d`` seconds without one
       (``every_s`` > 0: Delta takes at most half of the driver's time from the stream);
       sooner when more than ``max_lag`` batches wait or :meth:`flush` asks.

    Exactly once: a table's commit of version ``v`` holds every batch up to ``v`` that
    has rows for it, so a batch at or below the app's last version in a table is in it
    already and is left out of that table's next commit (a batch a crash left pending,
    queued again by :meth:`recover` before the process's first batch, or a replay); the
    rest share one commit. :func:`delta_append` itself skips a commit whose version is not
    above the app's last (the appender is the app's only writer, so it never has to).
    :meth:`close` appends everything still pending. At most
    ``max_lag`` batches wait (:meth:`submit` blocks beyond), so readers of the tables
    lag by ``every_s`` or two rounds at most. A failed append fails the next :meth:`submit`.
    ``clock``: monotonic seconds; ``committed(table)``: the app's last version in
    ``table`` or ``None`` (default: read with delta-rs; both injected by tests).
    """

    def __init__(
        self,
        spark: SparkSession,
        root: str | Path,
        pending: str | Path,
        *,
        app_id: str,
        run_id: str,
        max_lag: int = 4,
        every_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        committed: Callable[[str], int | None] | None = None,
    ) -> None:
        self.spark, self.root, self.pending = spark, str(root), Path(pending)
        self.app_id, self.run_id, self.max_lag = app_id, run_id, max_lag
        self.every_s, self._clock = every_s, clock
        self.committed = committed or self._committed
        self._queue: list[_Pending] = []
        self._busy = False
        self._hurry = 0
        """Callers of :meth:`flush` waiting: append what is queued without waiting."""
        self._next_round = clock() + every_s
        """``clock()`` before which no round starts (but to hurry)."""
        self._error: BaseException | None = None
        self._recovered = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="delta-appender", daemon=True)
        self._thread.start()
        self.appends = 0
        """Delta commit rounds done (each covers one or more batches)."""

    # ------------------------------------------------------------------ the stream's side

    def recover(self, before: int | None = None) -> list[int]:
        """Queue the saved batches of an earlier process (ids below ``before``, if given;
        the others are about to be saved again); their ids, oldest first."""
        with self._cond:
            if self._recovered:
                return []
            self._recovered = True
        found = self._saved()
        ids = [b for b in found if before is None or b < before]
        for b in ids:
            with open(self.pending / str(b), "rb") as f:
                self._put(_Pending(b, pickle.load(f)))
        if ids:
            log.info("Delta appends of batches %s were pending: queued again", ids)
        return ids

    def submit(self, batch_id: int, appends: Sequence[Append]) -> None:
        """Save the batch's rows (step 1) and queue them (step 2); blocks while more than
        ``max_lag`` batches wait. Raises the error of a failed earlier append."""
        self._raise()
        self.recover(before=batch_id)
        data = {a.table: to_arrow(table_spec(a.table), a.data, self.run_id) for a in appends}
        self._save(batch_id, data)
        self._put(_Pending(batch_id, data))
        with self._cond:
            while len(self._queue) > self.max_lag and self._error is None:
                self._cond.wait()
        self._raise()

    def flush(self) -> None:
        """Wait until every queued batch is appended (raises a failed append's error)."""
        self.recover()
        with self._cond:
            self._hurry += 1
            self._cond.notify_all()
            try:
                while (self._queue or self._busy) and self._error is None:
                    self._cond.wait()
            finally:
                self._hurry -= 1
        self._raise()

    def close(self) -> None:
        """:meth:`flush`, then stop the background thread."""
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._cond.notify_all()
            self._thread.join(timeout=60)

    @property
    def lag(self) -> int:
        """Batches saved but not yet appended."""
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    # ------------------------------------------------------------------ internals

    def _saved(self) -> list[int]:
        if not self.pending.is_dir():
            return []
        return sorted(int(p.name) for p in self.pending.iterdir() if p.name.isdigit())

    def _save(self, batch_id: int, data: dict[str, pa.Table]) -> None:
        self.pending.mkdir(parents=True, exist_ok=True)
        tmp = self.pending / f".{batch_id}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(data, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.pending / str(batch_id))

    def _put(self, item: _Pending) -> None:
        with self._cond:
            if self._queue and item.batch <= self._queue[-1].batch:
                raise RuntimeError(
                    f"batch {item.batch} queued after batch {self._queue[-1].batch}: "
                    "Delta appends must follow the batch order"
                )
            self._queue.append(item)
            self._cond.notify_all()

    def _raise(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"a Delta append failed: {self._error}") from self._error

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed and not self._due():
                    wait = self._next_round - self._clock()
                    self._cond.wait(wait if self._queue else None)
                if not self._queue:
                    return
                group, self._queue = self._queue, []
                self._busy = True
                start = self._clock()
                self._next_round = start + self.every_s
            try:
                self._append(group)
            except BaseException as exc:  # kept for the stream's thread to raise
                log.exception("Delta append of batches %s failed", [p.batch for p in group])
                with self._cond:
                    self._error, self._busy = exc, False
                    self._cond.notify_all()
                return
            with self._cond:
                end = self._clock()
                if self.every_s > 0:  # as long without a round as the round took
                    self._next_round = max(self._next_round, end + (end - start))
                self._busy = False
                self.appends += 1
                self._cond.notify_all()

    def _due(self) -> bool:
        """Whether a round starts now (with the lock held): batches wait and their round's
        time has come, or too many wait, or a :meth:`flush` waits for them."""
        if not self._queue:
            return False
        late = len(self._queue) > self.max_lag or self._hurry > 0
        return late or self._clock() >= self._next_round

    def _committed(self, table: str) -> int | None:
        """The app's last version in ``table`` (``None``: none, or no table), read with
        delta-rs (:func:`table_state`): its log in milliseconds, no Spark job."""
        return table_state(str(Path(self.root) / table_spec(table).name), self.app_id)[1]

    def _append(self, group: list[_Pending]) -> None:
        t0 = time.perf_counter()
        version = group[-1].batch
        appends, left_out = [], 0
        for name in dict.fromkeys(n for item in group for n in item.data):
            done = self.committed(name)
            rows = [
                item.data[name]
                for item in group
                if name in item.data and (done is None or item.batch > done)
            ]
            left_out += sum(1 for item in group if name in item.data) - len(rows)
            if rows:
                appends.append(Append(name, pa.concat_tables(rows)))
        delta_appends(
            self.spark, self.root, appends, app_id=self.app_id, version=version, run_id=self.run_id
        )
        for item in group:
            (self.pending / str(item.batch)).unlink(missing_ok=True)
        log.info(
            "delta: batches %d-%d (%d) appended as version %d in %.3f s%s",
            group[0].batch,
            version,
            len(group),
            version,
            time.perf_counter() - t0,
            f" ({left_out} of their tables' rows in the tables already)" if left_out else "",
        )
