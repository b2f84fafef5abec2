"""Turn user data into a pyarrow Table of a table's exact schema, or say why not.

Accepted shapes: a ``pyarrow.Table`` / ``RecordBatch`` (or anything exporting
an Arrow stream, e.g. a pandas DataFrame), a list of row dicts, or a dict of
columns. Integer widths and string/binary flavours are cast safely (an
``int32`` partition becomes ``int64``; ``1.5`` never becomes ``1``). Every
failure is a :class:`~skewlab.errors.ConfigError` naming the table and column.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import TableSpec

TableData = pa.Table | pa.RecordBatch | Sequence[Mapping[str, Any]] | Mapping[str, Any]
"""What :meth:`DeltaStore.append` accepts (plus any object with ``__arrow_c_stream__``)."""


def _columns_from_rows(spec: TableSpec, rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    names = spec.schema.names
    known = set(names)
    cols: dict[str, list[Any]] = {n: [] for n in names}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigError(
                f"table {spec.name!r}: row {i} is a {type(row).__name__}, expected a dict"
            )
        extra = set(row) - known
        if extra:
            raise ConfigError(
                f"table {spec.name!r}: unexpected column {sorted(extra)[0]!r} in row {i}; "
                f"columns are {names}"
            )
        for n in names:
            cols[n].append(row.get(n))
    present = {n for row in rows for n in row}
    return {n: v for n, v in cols.items() if n in present or not rows}


def _compatible(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether a safe cast from ``src`` to ``dst`` keeps the meaning (no str -> int)."""
    t = pa.types
    if t.is_null(src) or src == dst:
        return True
    if t.is_integer(dst):
        return t.is_integer(src) or t.is_floating(src)
    if t.is_floating(dst):
        return t.is_integer(src) or t.is_floating(src)
    if t.is_string(dst) or t.is_large_string(dst):
        return t.is_string(src) or t.is_large_string(src) or t.is_string_view(src)
    if t.is_binary(dst) or t.is_large_binary(dst):
        return (
            t.is_binary(src)
            or t.is_large_binary(src)
            or t.is_binary_view(src)
            or t.is_fixed_size_binary(src)
        )
    return False


def _array(spec: TableSpec, name: str, values: Any, n_rows: int) -> pa.Array | pa.ChunkedArray:
    field = spec.schema.field(name)
    try:
        # Infer first, then cast safely: pa.array(values, type=int64) would
        # silently truncate 1.5 to 1.
        arr = values if isinstance(values, pa.Array | pa.ChunkedArray) else pa.array(values)
        if not _compatible(arr.type, field.type):
            raise TypeError(f"values of type {arr.type}")
        if arr.type != field.type:
            arr = pc.cast(arr, field.type, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError) as exc:
        raise ConfigError(
            f"table {spec.name!r}: column {name!r} does not fit type {field.type}: {exc}"
        ) from None
    if len(arr) != n_rows:
        raise ConfigError(
            f"table {spec.name!r}: column {name!r} has {len(arr)} values, expected {n_rows}"
        )
    if not field.nullable and arr.null_count:
        raise ConfigError(
            f"table {spec.name!r}: column {name!r} is required but has {arr.null_count} null(s)"
        )
    return arr


def _as_columns(spec: TableSpec, data: Any) -> dict[str, Any]:
    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if not isinstance(data, pa.Table) and hasattr(data, "__arrow_c_stream__"):
        data = pa.table(data)
    if isinstance(data, pa.Table):
        return {n: data.column(n) for n in data.column_names}
    if isinstance(data, Mapping):
        return dict(data)
    if isinstance(data, Sequence) and not isinstance(data, str | bytes):
        return _columns_from_rows(spec, data)
    raise ConfigError(
        f"table {spec.name!r}: data must be a pyarrow Table, a list of dicts or a dict of "
        f"columns, got {type(data).__name__}"
    )


def to_arrow(spec: TableSpec, data: Any, run_id: str | None = None) -> pa.Table:
    """``data`` as a ``pyarrow.Table`` with exactly ``spec.schema`` (column order too).

    Rules, in order: unknown columns are an error; if ``run_id`` is given it
    fills a missing ``run_id`` column (a present one must hold only that value);
    missing nullable columns become nulls; missing required columns, values that
    do not cast safely and nulls in required columns are errors.
    """
    cols = _as_columns(spec, data)
    names = spec.schema.names
    extra = [c for c in cols if c not in names]
    if extra:
        raise ConfigError(
            f"table {spec.name!r}: unexpected column {extra[0]!r}; columns are {names}"
        )
    lengths = {len(v) for v in cols.values() if hasattr(v, "__len__")}
    if len(lengths) > 1:
        raise ConfigError(f"table {spec.name!r}: columns have different lengths {sorted(lengths)}")
    n_rows = lengths.pop() if lengths else 0
    if run_id is not None:
        if not run_id:
            raise ConfigError(f"table {spec.name!r}: run_id must be a non-empty string")
        if "run_id" not in cols:
            cols["run_id"] = [run_id] * n_rows
    arrays = []
    for field in spec.schema:
        if field.name in cols:
            arrays.append(_array(spec, field.name, cols[field.name], n_rows))
        elif field.nullable:
            arrays.append(pa.nulls(n_rows, type=field.type))
        else:
            raise ConfigError(f"table {spec.name!r}: required column {field.name!r} is missing")
    table = pa.Table.from_arrays(arrays, schema=spec.schema)
    if run_id is not None and n_rows:
        others = pc.unique(table.column("run_id")).to_pylist()
        if others != [run_id]:
            raise ConfigError(
                f"table {spec.name!r}: column 'run_id' holds {others}, expected only {run_id!r}"
            )
    return table
