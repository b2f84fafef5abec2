"""The Delta tables of skewlab: one pyarrow schema per table of ARCHITECTURE.md.

Every table carries ``run_id`` (and is partitioned by it); times are ``int64`` ms since the
epoch, latencies ``float64`` ms, structured values JSON. The conventions in full:
docs/io.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from skewlab.errors import ConfigError, UnknownNameError


def _req(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=False)


def _opt(name: str, type_: pa.DataType) -> pa.Field:
    return pa.field(name, type_, nullable=True)


RUN_ID = _req("run_id", pa.string())
I64 = pa.int64()
F64 = pa.float64()
STR = pa.string()
BIN = pa.binary()


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One Delta table: its name, schema, partition columns and grain.

    Invariant: ``run_id`` is a non-null column of ``schema`` and every name in
    ``partition_by`` is a column of ``schema``.
    """

    name: str
    schema: pa.Schema
    grain: str
    partition_by: tuple[str, ...] = ("run_id",)

    def __post_init__(self) -> None:
        names = self.schema.names
        if "run_id" not in names or self.schema.field("run_id").nullable:
            raise ConfigError(f"table {self.name!r}: needs a non-null 'run_id' column")
        missing = [c for c in self.partition_by if c not in names]
        if missing:
            raise ConfigError(f"table {self.name!r}: partition columns {missing} not in schema")
        if len(set(names)) != len(names):
            raise ConfigError(f"table {self.name!r}: duplicate column names in {names}")


def _spec(name: str, grain: str, *fields: pa.Field) -> TableSpec:
    return TableSpec(name=name, schema=pa.schema([RUN_ID, *fields]), grain=grain)


QUARANTINE = _spec(
    "quarantine",
    "one rejected input record and why",
    _opt("raw", BIN),
    _req("topic", STR),
    _req("partition", I64),
    _req("offset", I64),
    _req("reason", STR),
    _req("ts", I64),
    _opt("raw_bytes", I64),
    _opt("raw_sha256", STR),
)
"""``raw`` keeps at most the first :data:`QUARANTINE_RAW_PREFIX` bytes of the record;
``raw_bytes`` is the record's whole length and ``raw_sha256`` the hex SHA-256 of all
its bytes, so a poison record of any size costs a bounded row and can still be matched
against the topic (rows written before these columns read them as null)."""

QUARANTINE_RAW_PREFIX = 4096
"""Bytes of a rejected record kept in ``quarantine.raw``."""

KEY_LOADS = _spec(
    "key_loads",
    "window x key x worker",
    _req("window_start", I64),
    _req("key", STR),
    _req("worker", I64),
    _req("count", I64),
    _req("bytes", I64),
)

PARTITION_LOADS = _spec(
    "partition_loads",
    "window x topic-partition",
    _req("window_start", I64),
    _req("topic", STR),
    _req("partition", I64),
    _req("bytes", I64),
    _req("records", I64),
    _req("bytes_per_s", F64),
)

ASSIGNMENTS = _spec(
    "assignments",
    "assignment version x key",
    _req("version", I64),
    _req("key", STR),
    _req("worker", I64),
    _opt("set_id", I64),
    _req("reason", STR),
    _opt("effective_ms", I64),
)
"""``effective_ms``: event time (ms) from which the version routes; null = from the start."""

HANDOFFS = _spec(
    "handoffs",
    "one key's state handed from the holder of message set s-1 to the holder of set s",
    _req("key", STR),
    _req("set_id", I64),
    _req("from_worker", I64),
    _req("to_worker", I64),
    _req("value", BIN),
    _req("tuples", I64),
    _req("bytes", I64),
    _opt("sent_ms", I64),
    _opt("applied_ms", I64),
)
"""``sent_ms``: when the old holder sent the state (the hand-off record's Kafka timestamp);
``applied_ms``: wall time (ms) the new holder applied it (null: from before a restart)."""

CONSUMER_ASSIGNMENTS = _spec(
    "consumer_assignments",
    "autoscaler iteration x consumer x topic-partition",
    _req("iteration", I64),
    _req("consumer", STR),
    _req("topic", STR),
    _req("partition", I64),
    _req("action", STR),
)

OPERATOR_STATE = _spec(
    "operator_state",
    "checkpoint x operator instance x key",
    _req("checkpoint", I64),
    _req("instance", I64),
    _req("key", STR),
    _req("value", BIN),
    _req("tau", I64),
    _opt("buffered", BIN),
)

PARTIALS = _spec(
    "partials",
    "window x key x worker",
    _req("window_start", I64),
    _req("key", STR),
    _req("worker", I64),
    _req("count", I64),
    _req("sum", F64),
)

RESULTS = _spec(
    "results",
    "window x key",
    _req("window_start", I64),
    _req("key", STR),
    _req("count", I64),
    _req("sum", F64),
)

LATENCY = _spec(
    "latency",
    "window x worker",
    _req("window_start", I64),
    _req("worker", I64),
    _req("p50", F64),
    _req("p90", F64),
    _req("p99", F64),
    _req("max", F64),
    _req("n", I64),
    _opt("sample_ms", BIN),
)

WORKER_PROGRESS = _spec(
    "worker_progress",
    "worker x flush: the routed offset a flush reflects and the replay watermarks",
    _req("worker", I64),
    _req("routed_offset", I64),
    _req("watermarks", STR),
)

DECISIONS = _spec(
    "decisions",
    "one rebalance / autoscale / scale-out decision",
    _req("ts", I64),
    _req("loop", STR),
    _req("policy", STR),
    _req("detail", STR),
    _req("cost", F64),
    _opt("imbalance_before", F64),
    _opt("imbalance_after", F64),
    _req("reason", STR),
)

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        QUARANTINE,
        KEY_LOADS,
        PARTITION_LOADS,
        ASSIGNMENTS,
        CONSUMER_ASSIGNMENTS,
        OPERATOR_STATE,
        PARTIALS,
        RESULTS,
        LATENCY,
        WORKER_PROGRESS,
        DECISIONS,
        HANDOFFS,
    )
}
"""Every table by name (the literal registry of STYLE.md rule 2)."""


def table_spec(name: str) -> TableSpec:
    """The :class:`TableSpec` called ``name``; :class:`UnknownNameError` lists the valid ones."""
    try:
        return TABLES[name]
    except (KeyError, TypeError):
        raise UnknownNameError("delta table", name, list(TABLES)) from None
