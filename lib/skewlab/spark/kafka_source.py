"""Kafka source for Spark on the Python Data Source API (``format("skewlab-kafka")``).

Details: docs/live-run.md, "skewlab.spark.kafka_source".
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)

from skewlab.errors import ConfigError
from skewlab.io.kafka import connect, fetch_range
from skewlab.io.kafka.base import KafkaSettings
from skewlab.pipeline.events import DEFAULT_MAX_BYTES
from skewlab.spark.route import DECODED_SCHEMA, decode_batch

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

    from skewlab.io.kafka.base import FetchedRange, KafkaClient, KafkaSettings, Record

log = logging.getLogger(__name__)

NAME = "skewlab-kafka"

SCHEMA = (
    "topic string, partition int, offset long, timestamp_ms long, key binary, value binary, "
    "headers array<struct<key: string, value: binary>>"
)
"""DDL schema of the rows the source yields (one row per Kafka record)."""

FIELDS: tuple[str, ...] = (
    "topic",
    "partition",
    "offset",
    "timestamp_ms",
    "key",
    "value",
    "headers",
)
"""The columns of :data:`SCHEMA`; option ``fields`` (comma separated) keeps a subset, in
this order, and the reader builds only those (the route job reads three)."""

DECODE_FIELDS: tuple[str, ...] = ("partition", "offset", "value")
"""The columns option ``decode`` reads (whatever ``fields`` says)."""

Offsets = dict[str, int]
"""A source offset: next offset to read (exclusive end of the batch) per partition."""


def _options(options: Mapping[str, str]) -> dict[str, str]:
    """Spark's options are case-insensitive: normalise the keys to lower case."""
    return {str(k).lower(): str(v) for k, v in options.items()}


def parse_offsets(text: str, what: str) -> Offsets:
    """Parse ``{"0": 12, ...}`` into an :data:`Offsets` dict; :class:`ConfigError` if bad."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{what} must be 'earliest', 'latest' or JSON like {{\"0\": 12}}, got {text!r}"
        ) from exc
    if not isinstance(raw, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw.values()
    ):
        raise ConfigError(f"{what} JSON must map partition -> offset >= 0, got {text!r}")
    try:
        return {str(int(p)): int(v) for p, v in raw.items()}
    except ValueError as exc:
        raise ConfigError(f"{what} JSON keys must be partition numbers, got {text!r}") from exc


@dataclass(frozen=True)
class KafkaSourceOptions:
    """The source's options, validated once where the query is defined."""

    bootstrap: str
    topic: str
    client: str = "confluent"
    starting: str = "earliest"
    ending: str = "latest"
    max_events_per_trigger: int | None = None
    fetch_batch_size: int = 10_000
    extra: Mapping[str, str] = field(default_factory=dict)
    fields: tuple[str, ...] = FIELDS
    max_tasks: int | None = None
    decode: str | None = None
    """Option ``decode``: ``events`` yields the route job's decoded rows
    (:data:`skewlab.spark.route.DECODED_SCHEMA`, from ``partition``, ``offset`` and
    ``value``) instead of the record columns, decoded in the reading task."""
    max_event_bytes: int | None = None
    """Option ``maxEventBytes`` (with ``decode``): larger values are rejected."""
    """At most this many Spark tasks per batch (option ``maxTasks``): the partitions'
    ranges are dealt to the tasks round-robin and each task reads its ranges one after
    the other. ``None``: one task per partition with records."""

    def __post_init__(self) -> None:
        if not self.topic:
            raise ConfigError("option 'topic' is required")
        for what, value, words in (
            ("startingOffsets", self.starting, ("earliest", "latest")),
            ("endingOffsets", self.ending, ("latest",)),
        ):
            if value not in words:
                parse_offsets(value, what)
        if self.max_events_per_trigger is not None and self.max_events_per_trigger < 1:
            raise ConfigError(
                f"maxEventsPerTrigger must be >= 1, got {self.max_events_per_trigger}"
            )
        if self.fetch_batch_size < 1:
            raise ConfigError(f"fetchBatchSize must be >= 1, got {self.fetch_batch_size}")
        if self.decode not in (None, "events"):
            raise ConfigError(f"option 'decode' must be 'events', got {self.decode!r}")
        if self.decode is not None and self.fields != DECODE_FIELDS:
            raise ConfigError(f"option 'decode' reads the fields {DECODE_FIELDS}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise ConfigError(f"maxTasks must be >= 1, got {self.max_tasks}")
        unknown = [f for f in self.fields if f not in FIELDS]
        if unknown or not self.fields:
            raise ConfigError(
                f"option 'fields' must name some of {', '.join(FIELDS)}; got {self.fields}"
            )
        self.settings()  # validates bootstrap

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaSourceOptions:
        """Build from Spark's option map (keys case-insensitive)."""
        opts = _options(options)
        if "bootstrap" not in opts:
            raise ConfigError("option 'bootstrap' (host:port) is required")
        decode = opts.get("decode") or None
        return cls(
            bootstrap=opts["bootstrap"],
            topic=opts.get("topic", ""),
            client=opts.get("client", "confluent"),
            starting=opts.get("startingoffsets", "earliest").strip(),
            ending=opts.get("endingoffsets", "latest").strip(),
            max_events_per_trigger=_int_option(opts, "maxeventspertrigger"),
            fetch_batch_size=_int_option(opts, "fetchbatchsize") or 10_000,
            extra={k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")},
            fields=DECODE_FIELDS if decode else _fields_option(opts.get("fields")),
            max_tasks=_int_option(opts, "maxtasks"),
            decode=decode,
            max_event_bytes=_int_option(opts, "maxeventbytes"),
        )

    def settings(self) -> KafkaSettings:
        """The client settings (bootstrap, implementation, extra config)."""

        return KafkaSettings(bootstrap=self.bootstrap, client=self.client, extra=dict(self.extra))

    def connect(self) -> KafkaClient:
        """A new client; callers close it."""

        return connect(self.settings())


def _ddl_columns(ddl: str) -> list[str]:
    """Top-level column definitions of a DDL string (commas inside ``<>`` kept)."""
    out, depth, cur = [], 0, ""
    for ch in ddl:
        depth += (ch == "<") - (ch == ">")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


def fields_schema(fields: Sequence[str]) -> str:
    """The DDL schema of the rows read: :data:`SCHEMA` restricted to ``fields``."""
    parts = dict(zip(FIELDS, _ddl_columns(SCHEMA), strict=True))
    return ", ".join(parts[f] for f in fields)


def _fields_option(value: str | None) -> tuple[str, ...]:
    if value is None or not value.strip():
        return FIELDS
    wanted = {f.strip().lower() for f in value.split(",") if f.strip()}
    unknown = sorted(wanted - set(FIELDS))
    if unknown:
        raise ConfigError(f"option 'fields': unknown {unknown}; valid: {', '.join(FIELDS)}")
    return tuple(f for f in FIELDS if f in wanted)


def _int_option(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts or opts[key] == "":
        return None
    try:
        return int(opts[key])
    except ValueError as exc:
        raise ConfigError(f"option {key!r} must be an integer, got {opts[key]!r}") from exc


@dataclass(frozen=True)
class KafkaRangePartition(InputPartition):
    """One Spark task: the records ``start <= offset < end`` of one Kafka partition."""

    topic: str
    partition: int
    start: int
    end: int


def cap_offsets(start: Offsets, end: Offsets, limit: int) -> Offsets:
    """Cap the range ``start -> end`` to ``limit`` records in total.

    Each partition gets ``floor(limit * lag_p / lag_total)`` records; the remainder goes
    one record each to the partitions with the largest lag (ties: lowest partition
    number), so the result is deterministic, never exceeds ``end`` and advances by
    exactly ``min(limit, lag_total)`` records.
    """
    lag = {p: max(0, e - start.get(p, e)) for p, e in end.items()}
    total = sum(lag.values())
    if total <= limit:
        return dict(end)
    out = {p: start.get(p, e) for p, e in end.items()}
    given = 0
    for p in sorted(lag, key=int):
        share = lag[p] * limit // total
        out[p] += share
        given += share
    for p in sorted(lag, key=lambda q: (-lag[q], int(q))):
        if given >= limit:
            break
        if out[p] < end[p]:
            out[p] += 1
            given += 1
    return out


def _arrow_schema() -> pa.Schema:
    import pyarrow as pa

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp_ms", pa.int64()),
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("headers", pa.list_(header)),
        ]
    )


_GETTERS: dict[str, Callable[[Record], Any]] = {
    "topic": lambda r: r.topic,
    "partition": lambda r: r.partition,
    "offset": lambda r: r.offset,
    "timestamp_ms": lambda r: r.timestamp_ms,
    "key": lambda r: r.key,
    "value": lambda r: r.value,
    "headers": lambda r: [{"key": k, "value": v} for k, v in r.headers],
}


def records_to_batches(
    records: Iterator[Record], batch_size: int, fields: Sequence[str] = FIELDS
) -> Iterator[pa.RecordBatch]:
    """Pack fetched records into Arrow batches of at most ``batch_size`` rows, with the
    columns ``fields`` only (one list per column per batch, no per-row dicts but headers)."""
    import pyarrow as pa

    full = _arrow_schema()
    schema = pa.schema([full.field(f) for f in fields])
    getters = [_GETTERS[f] for f in fields]

    def batch(chunk: list[Record]) -> pa.RecordBatch:
        arrays = [pa.array([get(r) for r in chunk], type=f.type) for get, f in zip(getters, schema)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    chunk = list(itertools.islice(records, batch_size))
    while chunk:
        yield batch(chunk)
        chunk = list(itertools.islice(records, batch_size))


COLUMN_FIELDS = frozenset({"topic", "partition", "offset", "value"})
"""Fields a :class:`~skewlab.io.kafka.base.FetchedRange` gives without a record per message."""


def range_to_batches(
    rng: FetchedRange, batch_size: int, fields: Sequence[str] = FIELDS
) -> Iterator[pa.RecordBatch]:
    """:func:`records_to_batches` of a fetched range: from its columns when ``fields`` are
    all in :data:`COLUMN_FIELDS` (the route job's), else from its records."""
    import pyarrow as pa

    if not set(fields) <= COLUMN_FIELDS:
        yield from records_to_batches(iter(rng), batch_size, fields)
        return
    full = _arrow_schema()
    schema = pa.schema([full.field(f) for f in fields])
    for a in range(0, len(rng), batch_size):
        b = min(a + batch_size, len(rng))
        arrays = []
        for f in fields:
            if f == "topic":
                arrays.append(pa.array([rng.topic] * (b - a), pa.string()))
            elif f == "partition":
                arrays.append(pa.array(np.full(b - a, rng.partition, np.int32)))
            elif f == "offset":
                arrays.append(pa.array(rng.offsets[a:b], pa.int64()))
            else:
                arrays.append(pa.array(rng.values[a:b], pa.binary()))
        yield pa.RecordBatch.from_arrays(arrays, schema=schema)


@dataclass(frozen=True)
class KafkaRangesPartition(InputPartition):
    """One Spark task reading several ranges, in order (option ``maxTasks``)."""

    ranges: tuple[KafkaRangePartition, ...]


def read_range(
    opts: KafkaSourceOptions, part: KafkaRangePartition | KafkaRangesPartition
) -> Iterator[pa.RecordBatch]:
    """Executor side of both readers: fetch ``[start, end)`` of each range with a client
    of its own (one client per task)."""
    ranges = part.ranges if isinstance(part, KafkaRangesPartition) else (part,)
    client = opts.connect()
    try:
        for r in ranges:
            fetched = fetch_range(client, r.topic, r.partition, r.start, r.end)
            batches = range_to_batches(fetched, opts.fetch_batch_size, opts.fields)
            if opts.decode is None:
                yield from batches
                continue
            limit = opts.max_event_bytes or DEFAULT_MAX_BYTES
            for b in batches:
                yield decode_batch(b, limit)
    finally:
        client.close()


def plan_partitions(
    topic: str, start: Offsets, end: Offsets, max_tasks: int | None = None
) -> list[KafkaRangePartition] | list[KafkaRangesPartition]:
    """One :class:`KafkaRangePartition` per partition with records in ``[start, end)``;
    with ``max_tasks``, those ranges dealt round-robin (in partition order) into at most
    ``max_tasks`` :class:`KafkaRangesPartition` (every range in exactly one task)."""
    parts = []
    for p in sorted(end, key=int):
        lo = start.get(p, 0)
        if end[p] > lo:
            parts.append(KafkaRangePartition(topic, int(p), lo, end[p]))
    if max_tasks is None:
        return parts
    n = min(max_tasks, len(parts))
    return [KafkaRangesPartition(tuple(parts[i::n])) for i in range(n)]


class _BrokerView:
    """Driver-side offset look-ups with one lazily opened, never pickled client."""

    def __init__(self, opts: KafkaSourceOptions) -> None:
        self.opts = opts
        self._client: KafkaClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        return state

    def _kafka(self) -> KafkaClient:
        if self._client is None:
            self._client = self.opts.connect()
        return self._client

    def begin(self) -> Offsets:
        return {str(p): o for p, o in self._kafka().begin_offsets(self.opts.topic).items()}

    def end(self) -> Offsets:
        return {str(p): o for p, o in self._kafka().end_offsets(self.opts.topic).items()}

    def resolve(self, spec: str) -> Offsets:
        """``earliest`` / ``latest`` / JSON into concrete offsets of every partition."""
        if spec == "earliest":
            return self.begin()
        if spec == "latest":
            return self.end()
        given = parse_offsets(spec, "offsets")
        return {**self.begin(), **given}

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


class KafkaStreamReader(DataSourceStreamReader):
    """Micro-batch reader of one topic (batch steps: docs/live-run.md,
    "skewlab.spark.kafka_source").

    Invariant: every offset returned by :meth:`latestOffset` is >= the previous one per
    partition, and ``read`` yields exactly the records of its range in offset order.
    """

    def __init__(self, opts: KafkaSourceOptions) -> None:
        self.opts = opts
        self.broker = _BrokerView(opts)
        self._planned: Offsets | None = None
        self._initial_offsets: Offsets | None = None

    def _advance(self, offsets: Mapping[str, int]) -> None:
        """Remember the furthest end Spark has seen, partition by partition."""
        base = self._planned or {}
        self._planned = {p: max(int(o), base.get(p, 0)) for p, o in {**base, **offsets}.items()}

    def _initial(self) -> Offsets:
        """``startingOffsets`` resolved once, so both callers below see the same offsets."""
        if self._initial_offsets is None:
            self._initial_offsets = self.broker.resolve(self.opts.starting)
            log.info("initial offsets of %s: %s", self.opts.topic, self._initial_offsets)
        return self._initial_offsets

    def initialOffset(self) -> dict:
        """Offsets of a new query: ``startingOffsets`` resolved once against the broker, as
        JSON-able ``{"<partition>": <next offset>}`` for every partition of the topic."""
        return self._initial()

    def latestOffset(self) -> dict:
        """End of the next batch per partition: the broker's true end offsets (the client's
        ``end_offsets`` works around tansu's ListOffsets quirk), capped to
        ``maxEventsPerTrigger`` records after the furthest end seen, never behind it;
        partitions added since start at their earliest offset. Remembers the result."""
        # Spark 4.0 calls latestOffset() before initialOffset() on a new query, and
        # partitions(start, start) before latestOffset() on a restarted one: so an
        # unknown start here means a new query, which starts at startingOffsets.
        start = dict(self._planned or self._initial())
        end = self.broker.end()
        if set(end) - set(start):  # partitions added since: they start at their earliest
            start = {**self.broker.begin(), **start}
        if self.opts.max_events_per_trigger is not None:
            end = cap_offsets(start, end, self.opts.max_events_per_trigger)
        # Never plan behind the start (a partition's end cannot move back; if the
        # broker lost data, the next batch is simply empty there).
        end = {p: max(o, start.get(p, 0)) for p, o in end.items()}
        self._advance(end)
        return end

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The tasks reading ``[start, end)`` (see :func:`plan_partitions`; partitions
        missing from ``start`` read from their earliest offset); remembers ``end``."""
        self._advance(end)
        begin = self.broker.begin() if set(end) - set(start) else {}
        return plan_partitions(self.opts.topic, {**begin, **start}, end, self.opts.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: the Arrow batches of ``partition``'s ranges (:func:`read_range`)."""
        assert isinstance(partition, KafkaRangePartition | KafkaRangesPartition)
        return read_range(self.opts, partition)

    def commit(self, end: dict) -> None:
        """Spark finished the batch ending at ``end``: only remembered as the furthest end
        (Kafka consumer offsets are not committed; Spark's checkpoint holds the position)."""
        self._advance(end)

    def stop(self) -> None:
        """Close the driver's broker client, if one was opened."""
        self.broker.close()


class KafkaBatchReader(DataSourceReader):
    """Batch read of ``[startingOffsets, endingOffsets)``; ends resolved when planned."""

    def __init__(self, opts: KafkaSourceOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve ``startingOffsets`` and ``endingOffsets`` against the broker now and plan
        the tasks reading between them (:func:`plan_partitions`); raises
        :class:`ConfigError` on bad offsets JSON."""
        broker = _BrokerView(self.opts)
        try:
            start = broker.resolve(self.opts.starting)
            end = broker.resolve(self.opts.ending)
        finally:
            broker.close()
        return plan_partitions(self.opts.topic, start, end, self.opts.max_tasks)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Executor side: the Arrow batches of ``partition``'s ranges (:func:`read_range`)."""
        assert isinstance(partition, KafkaRangePartition | KafkaRangesPartition)
        return read_range(self.opts, partition)


class KafkaDataSource(DataSource):
    """``spark.readStream.format("skewlab-kafka")`` / ``df.writeStream.format(...)``.

    Reading: :class:`KafkaStreamReader` / :class:`KafkaBatchReader` (options:
    docs/live-run.md, "skewlab.spark.kafka_source"). Writing: :mod:`skewlab.spark.kafka_sink`
    (at-least-once).
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``"skewlab-kafka"``."""
        return NAME

    def schema(self) -> str:
        """DDL of the rows read: ``DECODED_SCHEMA`` with option ``decode``, else
        :data:`SCHEMA` restricted to option ``fields``; :class:`ConfigError` on unknown fields."""
        opts = _options(self.options)
        if opts.get("decode"):
            return DECODED_SCHEMA
        return fields_schema(_fields_option(opts.get("fields")))

    def reader(self, schema: StructType) -> DataSourceReader:
        """A :class:`KafkaBatchReader` (``spark.read``); :class:`ConfigError` on bad options."""
        return KafkaBatchReader(KafkaSourceOptions.from_options(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A :class:`KafkaStreamReader` (``spark.readStream``); :class:`ConfigError` on bad
        options."""
        return KafkaStreamReader(KafkaSourceOptions.from_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """A ``KafkaBatchWriter`` (``df.write``, append only: ``overwrite`` is ignored);
        :class:`ConfigError` on bad options or a schema without ``value``."""
        from skewlab.spark.kafka_sink import KafkaBatchWriter, KafkaSinkOptions

        return KafkaBatchWriter(KafkaSinkOptions.from_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """A ``KafkaStreamWriter`` (``df.writeStream``, at-least-once; ``overwrite`` is
        ignored); :class:`ConfigError` on bad options or a schema without ``value``."""
        from skewlab.spark.kafka_sink import KafkaSinkOptions, KafkaStreamWriter

        return KafkaStreamWriter(KafkaSinkOptions.from_options(self.options, schema))
