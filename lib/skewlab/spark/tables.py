"""Typed writers: the Delta rows of a micro-batch built column-wise from Arrow.

A :class:`TableWriter` takes its column names, order and types from a table's own
schema (:mod:`skewlab.io.delta.schemas`), so no writer indexes rows by hand and a
schema change shows up as a :class:`~skewlab.errors.ConfigError` naming the column.
:func:`key_loads`, :func:`partition_loads` and :func:`quarantine` are the route job's
three tables, aggregated with Arrow's group-by instead of per-row dicts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import (
    KEY_LOADS,
    PARTITION_LOADS,
    QUARANTINE,
    QUARANTINE_RAW_PREFIX,
    TableSpec,
)


@dataclass(frozen=True)
class TableWriter:
    """Builds tables with exactly ``spec.schema`` from named columns."""

    spec: TableSpec

    def build(self, run_id: str, rows: int, **columns: Any) -> pa.Table:
        """``rows`` rows: each column given as an array (cast safely to its field's type)
        or a scalar (repeated); ``run_id`` fills its column; a missing nullable column
        is null. Unknown or missing required columns raise :class:`ConfigError`."""
        fields = self.spec.schema
        unknown = sorted(set(columns) - set(fields.names))
        if unknown:
            raise ConfigError(f"table {self.spec.name!r}: unknown columns {unknown}")
        columns = {"run_id": run_id, **columns}
        arrays = []
        for f in fields:
            if f.name not in columns:
                if not f.nullable:
                    raise ConfigError(f"table {self.spec.name!r}: column {f.name!r} missing")
                arrays.append(pa.nulls(rows, f.type))
                continue
            value = columns[f.name]
            if isinstance(value, pa.ChunkedArray):
                value = value.combine_chunks()
            if isinstance(value, pa.Array | np.ndarray | list):
                arr = pa.array(value) if not isinstance(value, pa.Array) else value
                if len(arr) != rows:
                    raise ConfigError(
                        f"table {self.spec.name!r}: column {f.name!r} has {len(arr)} values, "
                        f"expected {rows}"
                    )
            else:
                arr = pa.array([value] * rows) if rows else pa.array([], f.type)
            arrays.append(arr if arr.type == f.type else pc.cast(arr, f.type, safe=True))
        return pa.Table.from_arrays(arrays, schema=fields)


KEY_LOADS_WRITER = TableWriter(KEY_LOADS)
PARTITION_LOADS_WRITER = TableWriter(PARTITION_LOADS)
QUARANTINE_WRITER = TableWriter(QUARANTINE)


def window_start_ms(ts: Any, window_s: float) -> np.ndarray:
    """``round(floor(ts / w) * w * 1000)`` per event (int64 ms; half to even, as ``round``)."""
    win = np.floor(np.asarray(ts, dtype=np.float64) / window_s) * window_s
    return np.round(win * 1000).astype(np.int64)


def key_loads(run_id: str, events: pa.Table, window_s: float) -> pa.Table:
    """``key_loads`` of routed events (columns ``ts``, ``key``, ``worker``, ``size``):
    count and bytes per (window, key, worker)."""
    t = pa.table(
        {
            "window_start": window_start_ms(events.column("ts").to_numpy(), window_s),
            "key": events.column("key"),
            "worker": events.column("worker"),
            "size": events.column("size"),
        }
    )
    agg = t.group_by(["window_start", "key", "worker"], use_threads=False).aggregate(
        [("size", "count"), ("size", "sum")]
    )
    return KEY_LOADS_WRITER.build(
        run_id,
        agg.num_rows,
        window_start=agg.column("window_start"),
        key=agg.column("key"),
        worker=agg.column("worker"),
        count=agg.column("size_count"),
        bytes=agg.column("size_sum"),
    )


def partition_loads(run_id: str, kl: pa.Table, topic: str, window_s: float) -> pa.Table:
    """``partition_loads`` of ``routed`` (partition = worker) from a batch's ``key_loads``."""
    agg = kl.group_by(["window_start", "worker"], use_threads=False).aggregate(
        [("bytes", "sum"), ("count", "sum")]
    )
    bytes_ = agg.column("bytes_sum")
    return PARTITION_LOADS_WRITER.build(
        run_id,
        agg.num_rows,
        window_start=agg.column("window_start"),
        topic=topic,
        partition=agg.column("worker"),
        bytes=bytes_,
        records=agg.column("count_sum"),
        bytes_per_s=pc.divide(pc.cast(bytes_, pa.float64()), window_s),
    )


def quarantine(run_id: str, rejects: pa.Table, topic: str, now_ms: int) -> pa.Table:
    """``quarantine`` rows of rejected input (``raw``, ``src_partition``, ``src_offset``,
    ``reason``), stamped ``now_ms``: the first :data:`QUARANTINE_RAW_PREFIX` bytes of each
    record, its length and the SHA-256 of all of it."""
    raw = pc.cast(rejects.column("raw"), pa.binary()).combine_chunks()
    digests = [None if v is None else hashlib.sha256(v).hexdigest() for v in raw.to_pylist()]
    return QUARANTINE_WRITER.build(
        run_id,
        rejects.num_rows,
        raw=pc.binary_slice(raw, 0, QUARANTINE_RAW_PREFIX),
        raw_bytes=pc.binary_length(raw),
        raw_sha256=pa.array(digests, pa.string()),
        topic=topic,
        partition=rejects.column("src_partition"),
        offset=rejects.column("src_offset"),
        reason=rejects.column("reason"),
        ts=now_ms,
    )
