"""Trace files into a :class:`~skewlab.advise.base.Stream`: CSV, JSON lines, Parquet.

CSV and JSON lines are read by the trace replay's own scanner
(:func:`skewlab.workload.trace_check.scan`), so a file ``advise`` accepts is a file
``skewlab simulate`` / ``skewlab run --workload trace:FILE`` replay, with the same
rule for every row. Parquet columns go through the same row rules
(:func:`~skewlab.workload.trace_check.check_values`). Formats: docs/advise.md.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from skewlab.advise.base import AdviseError, Stream, stream_of
from skewlab.errors import ConfigError
from skewlab.workload.trace_check import (
    BadRow,
    Row,
    TraceError,
    check_values,
    format_of,
    scan,
)

__all__ = ["TRACE_FORMATS", "count_rows", "read_trace", "trace_format", "write_trace_csv"]

TRACE_FORMATS = ("auto", "csv", "jsonl", "parquet")
"""``--format`` values; ``auto`` picks by extension (.parquet / .pq, .jsonl / .ndjson / .json,
else CSV)."""

_TS_COLUMNS = ("timestamp", "ts")


def trace_format(path: str, fmt: str = "auto") -> str:
    """The format of ``path``: ``fmt`` if explicit, else by its extension.

    Raises :class:`ConfigError` naming the allowed formats for an unknown ``fmt``.
    """
    if fmt not in TRACE_FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(TRACE_FORMATS)}, got {fmt!r}")
    if fmt != "auto":
        return fmt
    if os.path.splitext(path)[1].lower() in (".parquet", ".pq"):
        return "parquet"
    return format_of(path, "auto")


def read_trace(
    path: str,
    fmt: str = "auto",
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> Stream:
    """Every row of the trace at ``path``, valid rows as a :class:`Stream`, bad ones counted.

    ``limit`` keeps the first ``limit`` valid rows; ``progress(rows read)`` as in
    :func:`~skewlab.advise.base.stream_of`. Raises :class:`TraceError` (one line) when
    the file is missing or unreadable, or has no valid row.
    """
    if not os.path.isfile(path):
        raise TraceError(f"trace: file not found: {path!r}")
    kind = trace_format(path, fmt)
    rows = _parquet_rows(path) if kind == "parquet" else scan(path, kind)
    try:
        stream = stream_of(path, _first(rows, limit), progress=progress)
    except OSError as e:
        raise TraceError(f"trace {path}: cannot read it ({e.strerror or e})") from None
    except AdviseError as e:
        raise TraceError(str(e)) from None
    return stream


def count_rows(path: str, fmt: str = "auto") -> int:
    """About how many rows ``path`` holds, cheaply, for progress: a Parquet file's row count,
    else its line count (a header line included)."""
    if trace_format(path, fmt) == "parquet":
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    lines = 0
    last = b"\n"
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            lines += block.count(b"\n")
            last = block[-1:]
    return lines + (last != b"\n")


def _first(rows: Iterator[Row | BadRow], limit: int | None) -> Iterator[Row | BadRow]:
    if limit is None:
        yield from rows
        return
    kept = 0
    for item in rows:
        if kept >= limit:
            return
        if not isinstance(item, BadRow):
            kept += 1
        yield item


def _parquet_rows(path: str) -> Iterator[Row | BadRow]:
    """The rows of a Parquet file's ``key`` and optional ``timestamp``/``ts`` and ``size``
    columns (other columns, such as ``value``, are not read); row numbers from 1."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:  # pragma: no cover - pyarrow is pinned in requirements
        raise ConfigError(f"reading Parquet needs pyarrow ({e})") from None
    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise TraceError(f"trace {path}: not a readable Parquet file ({e})") from None
    names = [n.lower() for n in pf.schema_arrow.names]
    if "key" not in names:
        raise TraceError(
            f"trace {path}: no 'key' column; columns are {', '.join(pf.schema_arrow.names)}"
        )
    real = dict(zip(names, pf.schema_arrow.names))
    ts_name = next((real[n] for n in _TS_COLUMNS if n in real), None)
    size_name = real.get("size")
    wanted = [real["key"], *(n for n in (ts_name, size_name) if n is not None)]
    return check_values(path, _parquet_values(pf, wanted, ts_name, size_name))


def _parquet_values(
    pf: Any, columns: list[str], ts_name: str | None, size_name: str | None
) -> Iterator[tuple[int, Any, Any, Any]]:
    import pyarrow as pa
    import pyarrow.compute as pc

    line = 0
    for batch in pf.iter_batches(batch_size=65_536, columns=columns):
        keys = batch.column(0).to_pylist()
        ts: list[Any] = [None] * len(keys)
        sizes: list[Any] = [None] * len(keys)
        if ts_name is not None:
            col = batch.column(columns.index(ts_name))
            if pa.types.is_timestamp(col.type):
                unit = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[col.type.unit]
                col = pc.multiply(col.cast(pa.int64()).cast(pa.float64()), unit)
            ts = [_missing(v, "timestamp") for v in col.to_pylist()]
        if size_name is not None:
            sizes = [
                _missing(v, "size") for v in batch.column(columns.index(size_name)).to_pylist()
            ]
        for k, t, s in zip(keys, ts, sizes):
            line += 1
            yield line, k, t, s


def _missing(value: Any, what: str) -> Any:
    """A null cell of a column the file has is a bad value, not an absent column."""
    return f"<null {what}>" if value is None else value


def write_trace_csv(stream: Stream, path: Path, events: int, timestamps: bool = True) -> Path:
    """Write the first ``events`` events of ``stream`` as a CSV trace with a header,
    ``key,timestamp,size`` (without ``timestamps``, or for a stream without them,
    ``key,size``): what ``--workload trace:FILE`` replays. Returns the absolute path."""
    keys = stream.vocab.keys
    ids = stream.ids[:events].tolist()
    sizes = stream.sizes[:events].tolist()
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        if timestamps and stream.ts is not None:
            w.writerow(["key", "timestamp", "size"])
            for i, t, z in zip(ids, stream.ts[:events].tolist(), sizes):
                w.writerow([keys[i], repr(t), z])
        else:
            w.writerow(["key", "size"])
            for i, z in zip(ids, sizes):
                w.writerow([keys[i], z])
    return path.resolve()
