"""The default Kafka client: confluent-kafka (librdkafka).

Fast paths: the producer batches (``linger.ms`` 5, up to 10,000 records a batch,
idempotent so retries never duplicate) and reports only failed deliveries; fetch
reads with ``consume(num_messages=...)`` in batches sized to what is left of the
range. The consumer never joins a group: ranges are read with ``assign`` at an
offset, and ``enable.partition.eof`` tells where a partition ends.

One client serves one thread; one :meth:`ConfluentClient.fetch` at a time (a new
fetch or :meth:`~ConfluentClient.end_offsets` re-assigns the consumer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from skewlab.errors import ConfigError
from skewlab.io.kafka._common import ClientBase
from skewlab.io.kafka.base import FetchedRange, Headers, KafkaError, KafkaSettings, Record

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger.ms": 5,
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "enable.idempotence": True,
    "delivery.report.only.error": True,
    "allow.auto.create.topics": False,
}
"""Topics are created only by :meth:`ConfluentClient.create_topic`, with their
partition count: a client's metadata request must never make one (with the broker's
default partitions). Tansu honours the request's auto-create flag: a kafka-python
consumer (auto-creation on by default) that had read a topic re-created it within 0.25 s
of its deletion, so a deleted topic came back."""
CONSUMER_DEFAULTS: dict[str, Any] = {
    "group.id": "skewlab-reader",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "fetch.wait.max.ms": 20,
    "queued.min.messages": 100_000,
}
PROBE_CONSUMER: dict[str, Any] = {"fetch.wait.max.ms": 1}
"""Overrides of the end-of-partition probe's consumer (:meth:`ConfluentClient._read_to_eof`)."""
FETCH_BATCH = 10_000
PROBE_BATCH = 1_000
POLL_S = 0.1
ADMIN_TIMEOUT_S = 30.0


class ConfluentClient(ClientBase):
    """:class:`~skewlab.io.kafka.base.KafkaClient` on confluent-kafka; see the module docstring."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__(settings)
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._group_consumers: dict[str, Consumer] = {}
        self._unpolled = 0
        self._ends_seen: dict[tuple[str, int], tuple[int, int]] = {}
        """(topic, partition) -> (reported end, true end) of the last look-up (end_offsets)."""
        self._kept: tuple[tuple[str, int], Consumer] | None = None
        """:meth:`fetch_available`'s consumer and the partition it reads."""
        self._busy: set[tuple[str, int]] = set()
        """Partitions whose last :meth:`fetch_available` found records (read at once)."""

    # ------------------------------------------------------------ lazy clients

    def _config(self, role: str, defaults: Mapping[str, Any]) -> dict[str, Any]:
        return {
            **defaults,
            "bootstrap.servers": self.settings.bootstrap,
            "error_cb": self._on_client_error,
            **self._extra[role],
        }

    @property
    def producer(self) -> Producer:
        """The producer, created on first use."""
        if self._producer is None:
            cfg = self._config("producer", PRODUCER_DEFAULTS)
            cfg["on_delivery"] = self._on_delivery
            self._producer = Producer(cfg)
        return self._producer

    @contextmanager
    def _reader(self) -> Iterator[Consumer]:
        """A consumer for one look-up or fetch, closed right after.

        Why not the long-lived one: librdkafka 2.16 crashes (SIGSEGV in
        ``rd_kafka_metadata_cache_find``) when a consumer that has seen a topic
        refreshes its metadata after the topic was deleted on tansu, and runs
        delete their topics. A consumer per call never outlives its topic;
        creating one costs about a millisecond, no broker round trip.
        """
        consumer = Consumer(self._config("consumer", CONSUMER_DEFAULTS))
        try:
            yield consumer
        finally:
            consumer.close()

    @property
    def admin(self) -> AdminClient:
        """The admin client, created on first use."""
        if self._admin is None:
            self._admin = AdminClient(self._config("admin", {}))
        return self._admin

    def _on_client_error(self, err: RdKafkaError) -> None:
        log.warning("kafka client error (%s): %s", self.settings.bootstrap, err)

    def _on_delivery(self, err: RdKafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    # ------------------------------------------------------------------- admin

    def create_topic(self, name: str, partitions: int, exist_ok: bool = True) -> None:
        """Create ``name`` with ``partitions`` partitions; wait until its metadata shows them."""
        if partitions < 1:
            raise ConfigError(f"partitions must be >= 1, got {partitions}")
        self._forget_ends(name)
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions)], request_timeout=ADMIN_TIMEOUT_S
        )
        try:
            futures[name].result()
        except KafkaException as exc:
            err = exc.args[0]
            if not (exist_ok and err.code() == RdKafkaError.TOPIC_ALREADY_EXISTS):
                raise KafkaError(f"create topic {name!r} on {self._where()}: {err.str()}") from exc
        self._await_topic(name, present=True)

    def delete_topic(self, name: str, missing_ok: bool = True) -> None:
        """Delete ``name``; wait until it is gone from the metadata."""
        self._forget_ends(name)
        futures = self.admin.delete_topics([name], request_timeout=ADMIN_TIMEOUT_S)
        try:
            futures[name].result()
        except KafkaException as exc:
            err = exc.args[0]
            if not (missing_ok and err.code() == RdKafkaError.UNKNOWN_TOPIC_OR_PART):
                raise KafkaError(f"delete topic {name!r} on {self._where()}: {err.str()}") from exc
        self._await_topic(name, present=False)

    def _forget_ends(self, topic: str) -> None:
        self._drop_kept(topic)
        for key in [k for k in self._ends_seen if k[0] == topic]:
            del self._ends_seen[key]

    def list_topics(self) -> list[str]:
        """Names of the non-internal topics, sorted."""
        return sorted(t for t in self._metadata() if not t.startswith("__"))

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``; :class:`KafkaError` if it does not exist."""
        meta = self._metadata().get(topic)
        if meta is None or meta.error is not None:
            raise KafkaError(f"topic {topic!r} does not exist on {self._where()}")
        return len(meta.partitions)

    def _metadata(self) -> dict[str, Any]:
        try:
            return dict(self.admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics)
        except KafkaException as exc:
            raise KafkaError(f"list topics on {self._where()}: {exc}") from exc

    def _await_topic(self, name: str, present: bool, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            meta = self._metadata().get(name)
            there = meta is not None and meta.error is None and len(meta.partitions) > 0
            if there == present:
                return
            if time.monotonic() > deadline:
                state = "appear" if present else "disappear"
                raise KafkaError(f"topic {name!r} did not {state} on {self._where()}")
            time.sleep(0.05)

    # ----------------------------------------------------------------- produce

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Queue one record; a full local queue is drained by polling, never dropped."""
        kwargs: dict[str, Any] = {}
        if key is not None:
            kwargs["key"] = key
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        producer = self.producer
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
            except KafkaException as exc:
                raise KafkaError(f"produce to {topic!r} on {self._where()}: {exc}") from exc
        self._unpolled += 1
        if self._unpolled >= 1000:
            producer.poll(0)
            self._unpolled = 0

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued record; :class:`KafkaError` on a failed delivery or timeout."""
        if self._producer is None:
            return
        left = self._producer.flush(timeout_s)
        self._unpolled = 0
        self._raise_failures()
        if left:
            raise KafkaError(f"{left} record(s) still queued after {timeout_s} s ({self._where()})")

    # ----------------------------------------------------------------- offsets

    def _watermarks(
        self, topic: str, consumer: Consumer | None = None
    ) -> dict[int, tuple[int, int]]:
        if consumer is None:
            with self._reader() as reader:
                return self._watermarks(topic, reader)
        out = {}
        for p in range(self.partitions(topic)):
            try:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S, cached=False
                )
            except KafkaException as exc:
                raise KafkaError(f"list offsets of {topic}[{p}] on {self._where()}: {exc}") from exc
            out[p] = (int(low), int(high))
        return out

    def begin_offsets(self, topic: str) -> dict[int, int]:
        """The first available offset per partition."""
        return {p: low for p, (low, _high) in self._watermarks(topic).items()}

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The TRUE end per partition: the broker's reported ends (one ListOffsets on the
        admin client), then, for each partition whose reported end moved since the last
        call, one read from it to the partition's end (:meth:`_read_to_eof`).

        Why a reported end that did not move keeps its true end: tansu reports the base
        offset of the last record batch (:mod:`skewlab.io.kafka`), and every new batch
        starts at the old true end, past that base, so new records always move the
        reported end. Only ends past their reported end are kept (an empty partition,
        or a broker reporting true ends, is read again each time); this client's
        ``create_topic`` / ``delete_topic`` forget the topic's ends. An idle consumer
        asking every 50 ms (a worker) then costs the broker one ListOffsets request,
        not a new connection and a fetch per partition."""
        return self._true_ends(topic, self._reported_ends(topic))

    def end_offset(self, topic: str, partition: int) -> int:
        """:meth:`end_offsets` of one partition: one ListOffsets of that partition, and a
        read of it only if its reported end moved since the last look-up."""
        return self._true_ends(topic, self._reported_ends(topic, [partition]))[partition]

    def _true_ends(self, topic: str, reported: Mapping[int, int]) -> dict[int, int]:
        """The true ends of the partitions of ``reported`` (:meth:`end_offsets`)."""
        out: dict[int, int] = {}
        todo: dict[int, int] = {}
        for p, r in reported.items():
            hit = self._ends_seen.get((topic, p))
            if hit is not None and hit[0] == r:
                out[p] = hit[1]
            else:
                todo[p] = r
        if todo:
            for p, end in self._read_to_eof(topic, todo).items():
                out[p] = end
                if end > todo[p]:
                    self._ends_seen[(topic, p)] = (todo[p], end)
        return dict(sorted(out.items()))

    def _reported_ends(self, topic: str, parts: list[int] | None = None) -> dict[int, int]:
        """ListOffsets(latest) of ``parts`` (default: every partition of ``topic``), one
        admin request."""
        ps = range(self.partitions(topic)) if parts is None else parts
        futures = self.admin.list_offsets(
            {TopicPartition(topic, p): OffsetSpec.latest() for p in ps},
            request_timeout=ADMIN_TIMEOUT_S,
        )
        out = {}
        for tp, fut in futures.items():
            try:
                out[_int(tp.partition)] = int(fut.result().offset)
            except KafkaException as exc:
                raise KafkaError(
                    f"list offsets of {topic}[{tp.partition}] on {self._where()}: {exc}"
                ) from exc
        return out

    def _read_to_eof(self, topic: str, starts: Mapping[int, int] | None) -> dict[int, int]:
        """Read each partition from ``starts[p]`` (``None``: every partition from the
        broker's reported end) until librdkafka reports its end.

        The end-of-partition event comes at the fetch response's high watermark, which
        tansu reports truly (only its ListOffsets is low, see :mod:`skewlab.io.kafka`),
        so one round gives what :func:`~skewlab.io.kafka.resolve_true_ends` (the
        kafka-python client's way) confirms in two, the second probe finding nothing
        (55-60 ms a round, paid by every worker step and every micro-batch of the
        route job's source). Each end is also at least one past the last record seen
        and never below ``starts[p]``. The probe's consumer does not let the broker
        hold an empty fetch (``fetch.wait.max.ms`` 1: a partition at its end answers
        at once)."""
        cfg = self._config("consumer", {**CONSUMER_DEFAULTS, **PROBE_CONSUMER})
        consumer = Consumer(cfg)
        try:
            if starts is None:
                starts = {p: high for p, (_low, high) in self._watermarks(topic, consumer).items()}
            return self._to_eof(consumer, topic, starts)
        finally:
            consumer.close()

    def _to_eof(self, consumer: Consumer, topic: str, starts: Mapping[int, int]) -> dict[int, int]:
        ends = {int(p): int(o) for p, o in starts.items()}
        pending = set(ends)
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        if pending:
            consumer.assign([TopicPartition(topic, p, off) for p, off in ends.items()])
        while pending:
            if time.monotonic() > deadline:
                raise KafkaError(
                    f"end of {topic} partitions {sorted(pending)} not reached in "
                    f"{ADMIN_TIMEOUT_S} s on {self._where()}"
                )
            for msg in consumer.consume(num_messages=PROBE_BATCH, timeout=0.005):
                p, off = _int(msg.partition()), _int(msg.offset())
                err = msg.error()
                if err is None:
                    ends[p] = max(ends[p], off + 1)
                elif err.code() == RdKafkaError._PARTITION_EOF:
                    ends[p] = max(ends[p], off)
                    pending.discard(p)
                else:
                    raise KafkaError(f"probe end of {topic}[{p}] on {self._where()}: {err}")
        return ends

    # ------------------------------------------------------------------- fetch

    def _fetch(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float
    ) -> Iterator[Record]:
        if start == end:
            return
        with self._reader() as consumer:
            consumer.assign([TopicPartition(topic, partition, start)])
            yield from self._consume_range(consumer, topic, partition, start, end, timeout_s)

    def _consume_range(
        self, consumer: Consumer, topic: str, partition: int, start: int, end: int, timeout_s: float
    ) -> Iterator[Record]:
        nxt = start
        stall_deadline = time.monotonic() + timeout_s
        while nxt < end:
            msgs = consumer.consume(num_messages=min(FETCH_BATCH, end - nxt), timeout=POLL_S)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() != RdKafkaError._PARTITION_EOF:
                        raise KafkaError(
                            f"fetch {topic}[{partition}] at {nxt} on {self._where()}: {err}"
                        )
                    if _int(msg.offset()) >= end:  # nothing lies between here and ``end``
                        nxt = end
                    continue
                off = _int(msg.offset())
                if off < nxt:
                    continue
                if off >= end:
                    nxt = end
                    break
                yield _record(msg)
                nxt = off + 1
            if msgs:
                stall_deadline = time.monotonic() + timeout_s
            elif time.monotonic() > stall_deadline:
                raise self._stalled(topic, partition, start, end, nxt, timeout_s)

    def fetch_range(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0
    ) -> FetchedRange:
        """:meth:`fetch` as columns: librdkafka's messages are kept as they come and their
        offsets, values and headers read column by column; a :class:`Record` is built
        only for a position that is indexed."""
        if start < 0 or end < start:
            raise ConfigError(f"fetch range must satisfy 0 <= start <= end, got [{start}, {end})")
        msgs: list[Message] = []
        if start < end:
            with self._reader() as consumer:
                consumer.assign([TopicPartition(topic, partition, start)])
                self._consume_batches(consumer, topic, partition, start, end, timeout_s, msgs)
        return _fetched(topic, partition, msgs)

    def fetch_available(
        self, topic: str, partition: int, start: int, limit: int, timeout_s: float = 30.0
    ) -> FetchedRange:
        """:meth:`fetch_range` of ``[start, min(limit, true end))``, the true end as
        :meth:`end_offset` gives it at the time of the call, in one read from ``start``
        until librdkafka's end-of-partition event (the true end, :meth:`_read_to_eof`)
        or ``limit``, instead of a probe's consumer, then a fetch's.

        After a read that found nothing, the partition's ListOffsets first: a reported
        end that did not move keeps its true end (:meth:`end_offsets`), and nothing is
        read when ``start`` is there (an idle reader asks the broker one ListOffsets).
        The read's consumer is kept between calls for this one partition (unassigned
        in between: it fetches nothing ahead); a call for another partition, an error,
        :meth:`close` and this client's ``create_topic`` / ``delete_topic`` of its topic
        close it (a consumer must not outlive its topic, :meth:`_reader`)."""
        if start < 0 or limit < start:
            raise ConfigError(f"fetch must satisfy 0 <= start <= limit, got [{start}, {limit})")
        msgs: list[Message] = []
        if start == limit:
            return _fetched(topic, partition, msgs)
        tp = (topic, partition)
        reported: int | None = None
        if tp not in self._busy:
            reported = self._reported_ends(topic, [partition])[partition]
            hit = self._ends_seen.get(tp)
            if hit is not None and hit[0] == reported and hit[1] <= start:
                return _fetched(topic, partition, msgs)
        consumer = self._kept_reader(topic, partition)
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            eof = self._consume_batches(
                consumer, topic, partition, start, limit, timeout_s, msgs, to_eof=True
            )
            consumer.unassign()
        except BaseException:
            self._drop_kept()
            raise
        if msgs:
            self._busy.add(tp)
        else:
            self._busy.discard(tp)
        if eof is not None and reported is not None:
            end = max(eof, start, _int(msgs[-1].offset()) + 1 if msgs else 0)
            if end > reported:
                self._ends_seen[tp] = (reported, end)
        return _fetched(topic, partition, msgs)

    def _kept_reader(self, topic: str, partition: int) -> Consumer:
        """The consumer :meth:`fetch_available` keeps for ``partition`` of ``topic``."""
        kept = self._kept
        if kept is not None and kept[0] == (topic, partition):
            return kept[1]
        self._drop_kept()
        consumer = Consumer(self._config("consumer", {**CONSUMER_DEFAULTS, **PROBE_CONSUMER}))
        self._kept = ((topic, partition), consumer)
        return consumer

    def _drop_kept(self, topic: str | None = None) -> None:
        """Close the kept consumer (only if it reads ``topic``, when given)."""
        kept = self._kept
        if kept is not None and (topic is None or kept[0][0] == topic):
            self._kept = None
            self._busy.clear()
            kept[1].close()

    def _consume_batches(
        self,
        consumer: Consumer,
        topic: str,
        partition: int,
        start: int,
        end: int,
        timeout_s: float,
        out: list[Message],
        to_eof: bool = False,
    ) -> int | None:
        """``_consume_range`` a batch at a time: the records in ``[start, end)`` appended
        to ``out`` in offset order (same end-of-partition and stall rules). With
        ``to_eof``, also stop at the first end-of-partition event and return its offset
        (``None``: ``end`` was reached first)."""
        nxt = start
        stall_deadline = time.monotonic() + timeout_s
        eof: int | None = None
        while nxt < end and eof is None:
            msgs = consumer.consume(num_messages=min(FETCH_BATCH, end - nxt), timeout=POLL_S)
            if not msgs:
                if time.monotonic() > stall_deadline:
                    raise self._stalled(topic, partition, start, end, nxt, timeout_s)
                continue
            stall_deadline = time.monotonic() + timeout_s
            errs = [m for m in msgs if m.error() is not None]
            data = [m for m in msgs if m.error() is None] if errs else msgs
            for m in errs:
                err = m.error()
                assert err is not None
                if err.code() != RdKafkaError._PARTITION_EOF:
                    raise KafkaError(
                        f"fetch {topic}[{partition}] at {nxt} on {self._where()}: {err}"
                    )
            if data:
                lo, hi = _int(data[0].offset()), _int(data[-1].offset())
                if lo < nxt or hi >= end:  # outside the range (rare): record by record
                    data = [m for m in data if nxt <= _int(m.offset()) < end]
                out.extend(data)
                if data:
                    nxt = _int(data[-1].offset()) + 1
                if hi >= end:
                    nxt = end
            if any(_int(m.offset()) >= end for m in errs):  # nothing lies between here and end
                nxt = end
            if to_eof and errs:
                eof = max(_int(m.offset()) for m in errs)
        return eof

    # ----------------------------------------------------------------- commits

    def _group_consumer(self, group: str) -> Consumer:
        """A consumer carrying ``group.id = group`` (never subscribed), one per group."""
        consumer = self._group_consumers.get(group)
        if consumer is None:
            cfg = self._config("consumer", CONSUMER_DEFAULTS)
            cfg["group.id"] = group
            consumer = self._group_consumers[group] = Consumer(cfg)
        return consumer

    def _commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        try:
            done = self._group_consumer(group).commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            raise KafkaError(
                f"commit {topic} for group {group!r} on {self._where()}: {exc}"
            ) from exc
        failed = [tp for tp in done or () if tp.error is not None]
        if failed:
            raise KafkaError(
                f"commit {topic}[{failed[0].partition}] for group {group!r} on {self._where()}: "
                f"{failed[0].error}"
            )

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """Committed offsets of ``group`` for ``topic``; partitions without one are left out."""
        tps = [TopicPartition(topic, p) for p in range(self.partitions(topic))]
        try:
            got = self._group_consumer(group).committed(tps, timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:
            raise KafkaError(
                f"committed offsets of {topic} for group {group!r} on {self._where()}: {exc}"
            ) from exc
        return {_int(tp.partition): int(tp.offset) for tp in got if tp.offset >= 0}

    # ------------------------------------------------------------------- close

    def close(self, flush_s: float = 10.0) -> None:
        """Flush the producer for up to ``flush_s`` (best effort) and close every client
        that was created. The producer is closed, not only dropped: one still referenced
        elsewhere (a failed run's traceback) kept reconnecting to a dead broker until the
        process ended."""
        if self._producer is not None:
            producer, self._producer = self._producer, None
            left = producer.flush(flush_s)
            if left:
                log.warning(
                    "closing producer: %d record(s) or event(s) still queued, dropped", left
                )
                producer.purge()
            producer.close()
        self._drop_kept()
        for consumer in self._group_consumers.values():
            consumer.close()
        self._group_consumers.clear()
        self._admin = None


def _int(value: int | None) -> int:
    """Offsets and partitions of delivered messages are never None; -1 stands in."""
    return -1 if value is None else int(value)


def _bytes(value: str | bytes | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def _fetched(topic: str, partition: int, msgs: list[Message]) -> FetchedRange:
    """The columns of ``msgs`` (librdkafka's messages, kept as they came)."""
    return FetchedRange(
        topic,
        partition,
        [m.offset() for m in msgs],  # type: ignore[misc]
        [m.value() for m in msgs],
        [m.headers() for m in msgs],
        lambda i: _record(msgs[i]),
    )


def _record(msg: Message) -> Record:
    headers = msg.headers() or ()
    pairs = headers.items() if isinstance(headers, dict) else headers
    return Record(
        topic=msg.topic() or "",
        partition=_int(msg.partition()),
        offset=_int(msg.offset()),
        key=_bytes(msg.key()),
        value=_bytes(msg.value()),
        headers=tuple((k, _bytes(v) or b"") for k, v in pairs),
        timestamp_ms=int(msg.timestamp()[1]),
    )
