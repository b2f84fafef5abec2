"""Render validated read requests as SQL for delta-rs' embedded query engine.

Reads go through ``deltalake.QueryBuilder`` (DataFusion inside delta-rs), not
``DeltaTable.to_pyarrow_table``: on this machine a process that read through
the pyarrow dataset path aborts at interpreter exit ("terminate called without
an active exception", exit 134) in about half of the runs even with pyarrow
23, while the QueryBuilder path exits cleanly. Column names are checked
against the table schema and always quoted (``count``, ``offset``, ``key`` are
SQL keywords); values are rendered as SQL literals, never pasted as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import TableSpec

Filter = tuple[str, str, Any]
"""``(column, op, value)``; op is one of :data:`OPS`; ``in`` / ``not in`` take a list."""

OPS = ("=", "==", "!=", "<", "<=", ">", ">=", "in", "not in")


def ident(name: str) -> str:
    """A double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """``value`` as a SQL literal (str, bytes, bool, int, finite float)."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ConfigError(f"filter value must be finite, got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bytes):
        return "X'" + value.hex() + "'"
    raise ConfigError(f"unsupported filter value {value!r} of type {type(value).__name__}")


def _check_column(spec: TableSpec, column: str) -> None:
    if column not in spec.schema.names:
        raise ConfigError(
            f"table {spec.name!r}: unknown column {column!r}; columns are {spec.schema.names}"
        )


def where_clause(spec: TableSpec, run_id: str | None, filters: Sequence[Filter] | None) -> str:
    """``WHERE ...`` (or ``""``) for ``run_id`` equality AND every filter."""
    parts: list[str] = []
    if run_id is not None:
        parts.append(f"{ident('run_id')} = {literal(run_id)}")
    for item in filters or ():
        if not (isinstance(item, tuple | list) and len(item) == 3):
            raise ConfigError(f"a filter is (column, op, value), got {item!r}")
        column, op, value = item
        _check_column(spec, column)
        op = str(op).lower().strip()
        if op not in OPS:
            raise ConfigError(f"unknown filter op {op!r}; valid: {', '.join(OPS)}")
        if op in ("in", "not in"):
            values = list(value)
            if not values:
                parts.append("FALSE" if op == "in" else "TRUE")
                continue
            rendered = ", ".join(literal(v) for v in values)
            parts.append(f"{ident(column)} {op.upper()} ({rendered})")
        else:
            if value is None:
                raise ConfigError(f"filter on {column!r}: compare with None is not supported")
            sql_op = "=" if op == "==" else op
            parts.append(f"{ident(column)} {sql_op} {literal(value)}")
    return (" WHERE " + " AND ".join(parts)) if parts else ""


def select_sql(
    spec: TableSpec,
    alias: str,
    run_id: str | None = None,
    columns: Sequence[str] | None = None,
    filters: Sequence[Filter] | None = None,
) -> str:
    """``SELECT <columns in schema order> FROM alias WHERE ...``."""
    cols = list(columns) if columns is not None else spec.schema.names
    if not cols:
        raise ConfigError(f"table {spec.name!r}: columns must not be empty")
    for c in cols:
        _check_column(spec, c)
    return (
        f"SELECT {', '.join(ident(c) for c in cols)} FROM {ident(alias)}"
        f"{where_clause(spec, run_id, filters)}"
    )
