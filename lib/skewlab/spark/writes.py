"""The route job's writes through Spark's own connectors: Kafka records and Delta appends.

:func:`kafka_write` sends an Arrow table of records with Spark's Kafka sink
(``format("kafka")``: a ``partition`` column picks each record's partition, a
``headers`` column carries its headers); :func:`delta_append` appends an Arrow table to
a Delta table with delta-spark, exactly once per ``(app_id, version)`` through Delta's
idempotent writes (``txnAppId`` / ``txnVersion``: the app transaction is recorded in
the same commit as the data, and a replayed version is skipped). :func:`delta_appends`
runs several appends at once (each is a few small Spark jobs; see docs/real-stack.md).

The rows are built on the driver (the route job routes there); these functions only
hand them to Spark's writers.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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
    from pyspark.sql import SparkSession

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


def kafka_write(
    spark: SparkSession, bootstrap: str, topic: str, records: pa.Table, **kafka: str
) -> None:
    """Send ``records`` to ``topic`` with Spark's Kafka sink, in row order.

    One Spark task writes them all (``coalesce(1)``), so the records of each partition
    arrive in the order of the table. Delivery is at least once (Spark's sink); the
    route job's readers drop the copies of a replayed batch. ``kafka``: extra producer
    settings (``linger.ms="5"`` becomes option ``kafka.linger.ms``).
    """
    if records.num_rows == 0:
        return
    writer = (
        spark.createDataFrame(kafka_frame(records))
        .coalesce(1)
        .write.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("topic", topic)
    )
    for key, value in kafka.items():
        writer = writer.option(f"kafka.{key}", value)
    writer.save()


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

    The data is cast to the table's schema first (:func:`~skewlab.io.delta.convert.to_arrow`:
    a bad batch fails before any I/O); a missing table is created partitioned by
    ``run_id``, and a table made before a nullable column joined the spec gains it
    (``mergeSchema``: older rows read it as null). Delta skips the write when
    ``version`` is not above the last version committed for ``app_id``, so a replayed
    micro-batch adds nothing.
    """
    spec = table_spec(table)
    arrow = to_arrow(spec, data, run_id)
    (
        spark.createDataFrame(arrow)
        .write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", str(version))
        .option("mergeSchema", "true")
        .partitionBy(*spec.partition_by)
        .save(str(Path(root) / spec.name))
    )


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
