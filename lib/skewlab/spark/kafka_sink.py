"""Kafka sink for Spark on the Python Data Source API (``format("skewlab-kafka")``).

Each row goes to an explicit partition (route job: partition = worker); delivery is
at-least-once. :func:`produce_table` sends an Arrow table from one process (the route
driver). Columns, options and delivery: docs/throughput.md, "skewlab.spark.kafka_sink".
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from skewlab.errors import ConfigError
from skewlab.io.kafka import connect, producer_fn
from skewlab.io.kafka.base import KafkaSettings

if TYPE_CHECKING:
    from pyspark.sql import Row
    from pyspark.sql.types import StructType

    from skewlab.io.kafka.base import KafkaClient, KafkaSettings

log = logging.getLogger(__name__)

OPTIONAL_COLUMNS = ("topic", "key", "headers")
REQUIRED_COLUMNS = ("partition", "value")


@dataclass(frozen=True)
class KafkaSinkOptions:
    """The sink's options and the positions of the columns it writes."""

    bootstrap: str
    topic: str | None
    client: str = "confluent"
    columns: Mapping[str, int] = field(default_factory=dict)
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in REQUIRED_COLUMNS if c not in self.columns]
        if missing:
            raise ConfigError(
                f"the Kafka sink needs columns {', '.join(REQUIRED_COLUMNS)}; missing: "
                f"{', '.join(missing)}"
            )
        if not self.topic and "topic" not in self.columns:
            raise ConfigError("the Kafka sink needs option 'topic' or a 'topic' column")
        self.settings()  # validates bootstrap

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema: StructType) -> KafkaSinkOptions:
        """Build from Spark's option map (keys case-insensitive) and the input schema."""
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        if "bootstrap" not in opts:
            raise ConfigError("option 'bootstrap' (host:port) is required")
        names = [f.name for f in schema.fields]
        wanted = (*REQUIRED_COLUMNS, *OPTIONAL_COLUMNS)
        return cls(
            bootstrap=opts["bootstrap"],
            topic=opts.get("topic") or None,
            client=opts.get("client", "confluent"),
            columns={n: i for i, n in enumerate(names) if n in wanted},
            extra={k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")},
        )

    def settings(self) -> KafkaSettings:
        """The client settings (bootstrap, implementation, extra config); raises
        :class:`ConfigError` on a bad bootstrap."""

        return KafkaSettings(bootstrap=self.bootstrap, client=self.client, extra=dict(self.extra))

    def connect(self) -> KafkaClient:
        """A new client; callers close it."""

        return connect(self.settings())


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """What one write task delivered: records per ``(topic, partition)``."""

    counts: tuple[tuple[str, int, int], ...]

    @property
    def records(self) -> int:
        """Records the task delivered, over all partitions."""
        return sum(n for _, _, n in self.counts)


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _headers(value: Any) -> list[tuple[str, bytes]] | None:
    """Headers from an array of (key, value) structs or a map; None if there are none."""
    if not value:
        return None
    items = value.items() if isinstance(value, dict) else ((h[0], h[1]) for h in value)
    return [(str(k), _bytes(v) or b"") for k, v in items]


def write_rows(opts: KafkaSinkOptions, rows: Iterator[Row]) -> KafkaCommitMessage:
    """Produce every row to its explicit partition, flush, then report what was sent."""
    cols = opts.columns
    i_part, i_value = cols["partition"], cols["value"]
    i_topic, i_key, i_headers = (cols.get(c) for c in OPTIONAL_COLUMNS)
    counts: dict[tuple[str, int], int] = {}
    client = opts.connect()
    try:
        for row in rows:
            topic = (row[i_topic] if i_topic is not None else None) or opts.topic
            partition = row[i_part]
            if topic is None or partition is None:
                raise ConfigError(f"row without topic or partition: {row!r}")
            client.produce(
                topic,
                _bytes(row[i_value]),
                key=_bytes(row[i_key]) if i_key is not None else None,
                partition=int(partition),
                headers=_headers(row[i_headers]) if i_headers is not None else None,
            )
            counts[(topic, int(partition))] = counts.get((topic, int(partition)), 0) + 1
        client.flush()
    finally:
        client.close()
    return KafkaCommitMessage(tuple((t, p, n) for (t, p), n in sorted(counts.items())))


HEADER_PREFIX = "header:"
"""Column-name prefix of a header column in :func:`produce_table`'s input."""


def produce_table(client: KafkaClient, topic: str, table: Any) -> int:
    """Queue every row of ``table`` (an Arrow table) to ``topic``, in row order.

    Columns: ``partition`` (int, required), ``value`` (binary, required), ``key``
    (binary, optional), ``header:<name>`` (binary, optional, null = header absent).
    Everything is prepared by Arrow; the loop calls ``client.produce`` once per row.
    Does not flush (the caller flushes once, then commits). Returns the row count.
    """
    names = table.column_names
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ConfigError(f"produce_table needs columns {REQUIRED_COLUMNS}; missing {missing}")
    n = table.num_rows
    parts = pylist(table.column("partition"))
    values = pylist(table.column("value"))
    keys = pylist(table.column("key")) if "key" in names else [None] * n
    hnames = [c[len(HEADER_PREFIX) :] for c in names if c.startswith(HEADER_PREFIX)]
    hcols = [table.column(HEADER_PREFIX + h) for h in hnames]
    produce = producer_fn(client)
    if len(hcols) == 1 and hcols[0].null_count == 0:
        name = hnames[0]
        rows = zip(parts, values, keys, pylist(hcols[0]))
        producer = getattr(client, "producer", None)
        if getattr(produce, "__name__", "") == "direct" and producer is not None:
            # The routed records' shape, on librdkafka: the call inline; a full queue or
            # an error goes through ``direct`` (retried / raised as there).
            from confluent_kafka import KafkaException

            raw, poll = producer.produce, producer.poll
            for i, (p, v, k, h) in enumerate(rows, 1):
                try:
                    raw(topic, v, k, p, headers=[(name, h)])
                except BufferError:  # a full queue: drain, then as ``direct`` does
                    poll(0.05)
                    produce(topic, v, k, p, [(name, h)])
                except KafkaException:
                    produce(topic, v, k, p, [(name, h)])
                if not i % 1000:
                    poll(0)
            return n
        for p, v, k, h in rows:
            produce(topic, v, k, p, [(name, h)])
        return n
    hlists = [pylist(c) for c in hcols]
    for i in range(n):
        hdrs = [(h, col[i]) for h, col in zip(hnames, hlists) if col[i] is not None]
        produce(topic, values[i], keys[i], parts[i], hdrs or None)
    return n


def pylist(col: Any) -> list[Any]:
    """``col.to_pylist()`` of an Arrow column, through numpy where that keeps the values
    (no nulls, or a binary / string column, whose nulls numpy keeps as ``None``):
    15-40x faster per value (docs/throughput.md, Session 5)."""
    import pyarrow as pa

    t = col.type
    binary = pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
    if col.null_count and not (binary or pa.types.is_large_string(t)):
        out: list[Any] = col.to_pylist()
    else:
        out = col.to_numpy(zero_copy_only=False).tolist()
    return out


def _total(messages: list[WriterCommitMessage | None]) -> int:
    return sum(m.records for m in messages if isinstance(m, KafkaCommitMessage))


class KafkaStreamWriter(DataSourceStreamWriter):
    """Streaming sink: at-least-once (docs/throughput.md, "skewlab.spark.kafka_sink")."""

    def __init__(self, opts: KafkaSinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> KafkaCommitMessage:
        """Executor side: produce the task's rows and flush (:func:`write_rows`); raises
        :class:`ConfigError` on a row without topic or partition."""
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log how many records batch ``batchId`` put in Kafka (they are already flushed)."""
        log.info("batch %d: %d records in Kafka", batchId, _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Log a warning only: records already flushed stay in Kafka (the replay resends)."""
        # Records already flushed cannot be taken back; the replay will send them again.
        log.warning("batch %d aborted after %d records reached Kafka", batchId, _total(messages))


class KafkaBatchWriter(DataSourceWriter):
    """Batch sink (``df.write.format("skewlab-kafka")``), same delivery as the stream."""

    def __init__(self, opts: KafkaSinkOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Row]) -> KafkaCommitMessage:
        """Executor side: produce the task's rows and flush (:func:`write_rows`); raises
        :class:`ConfigError` on a row without topic or partition."""
        return write_rows(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log how many records the write put in Kafka (they are already flushed)."""
        log.info("batch write: %d records in Kafka", _total(messages))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Log a warning only: records already flushed stay in Kafka."""
        log.warning("batch write aborted after %d records reached Kafka", _total(messages))
