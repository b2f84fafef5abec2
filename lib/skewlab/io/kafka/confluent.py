"""The default Kafka client: confluent-kafka (librdkafka).

Fast paths: the producer batches (``linger.ms`` 5, up to 10,000 records a batch,
idempotent so retries never duplicate) and reports only failed deliveries; fetch
reads with ``consume(num_messages=...)`` in batches sized to what is left of the
range. The consumer never joins a group: ranges are read with ``assign`` at an
offset, and ``enable.partition.eof`` tells where a partition ends.

One client serves one thread; one :meth:`ConfluentClient.fetch` at a time.
Every call that waits on the broker waits in slices and checks between them that the
broker is still there (:mod:`skewlab.io.kafka._common`): a killed broker is a
:class:`~skewlab.io.kafka.base.BrokerUnavailableError` in about a second.
librdkafka's own log (``%4|...``) and error callbacks go to ``LIBRDKAFKA_LOG`` (a run's
``kafka.log``, :func:`~skewlab.io.kafka._common.log_librdkafka_to`), never to the terminal.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from contextlib import contextmanager
from typing import Any, TypeVar

from confluent_kafka import Consumer, KafkaException, Message, Producer, TopicPartition
from confluent_kafka import KafkaError as RdKafkaError
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from skewlab.errors import ConfigError
from skewlab.io.kafka._common import LIBRDKAFKA_LOG, SLICE_S, ClientBase
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
default partitions), also on a cluster whose brokers allow auto-creation."""
CONSUMER_DEFAULTS: dict[str, Any] = {
    "group.id": "skewlab-reader",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",
    "fetch.wait.max.ms": 20,
    "queued.min.messages": 100_000,
}
EOF_CONSUMER: dict[str, Any] = {"fetch.wait.max.ms": 1}
"""Overrides of :meth:`ConfluentClient.fetch_available`'s consumer: the broker must not
hold a fetch at the partition's end (its end-of-partition event comes at once)."""
GROUP_CONSUMER: dict[str, Any] = {"session.timeout.ms": 6000}
"""Overrides of the consumers that only commit (:meth:`ConfluentClient._group_consumer`;
they never join their group): closing one whose commit the broker never answered waits
for this long (45 s at librdkafka's default)."""
FETCH_BATCH = 10_000
POLL_S = 0.1
EOF_POLL_S = 0.01
"""A read to the partition's end (:meth:`ConfluentClient.fetch_available`) waits this long
per ``consume``, not :data:`POLL_S`: librdkafka's ``consume`` of N messages waits its whole
timeout when fewer are there, so every worker read that found records ended 0.1 s after its
end-of-partition event (docs/real-stack.md, session 31)."""
ADMIN_TIMEOUT_S = 30.0
RETRIED = frozenset(
    {
        RdKafkaError._TIMED_OUT,
        RdKafkaError._TRANSPORT,
        RdKafkaError._ALL_BROKERS_DOWN,
        RdKafkaError.REQUEST_TIMED_OUT,
        # the group coordinator is moving or still loading __consumer_offsets (a fresh
        # broker's first group request: seen as a failed committed() in a DAG task)
        RdKafkaError.NOT_COORDINATOR,
        RdKafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        RdKafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)
"""librdkafka errors that mean "no answer yet": check the broker, then wait again."""

LEADER_MOVING = frozenset(
    {RdKafkaError.NOT_LEADER_FOR_PARTITION, RdKafkaError.LEADER_NOT_AVAILABLE}
)
"""ListOffsets errors of a partition whose leadership the broker is still applying (just
after the topic's creation, or a restart): asked again until the admin timeout."""

T = TypeVar("T")


class ConfluentClient(ClientBase):
    """:class:`~skewlab.io.kafka.base.KafkaClient` on confluent-kafka; see the module docstring."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__(settings)
        self._producer: Producer | None = None
        self._admin: AdminClient | None = None
        self._admin_handed_over = False
        """Whether the admin client has had its first metadata answer (:meth:`_hand_over`)."""
        self._group_consumers: dict[str, Consumer] = {}
        self._commits: dict[str, tuple[RdKafkaError | None, list[TopicPartition]]] = {}
        """group -> the outcome of its last commit (``on_commit``)."""
        self._unpolled = 0
        self._all_down = False
        """Set by librdkafka's "all brokers are down" error, cleared by :meth:`_check_down`."""
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
            "logger": LIBRDKAFKA_LOG,
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

        Why not a long-lived one: librdkafka 2.16 crashed (SIGSEGV in
        ``rd_kafka_metadata_cache_find``) when a consumer that had seen a topic
        refreshed its metadata after the topic was deleted, and runs delete their
        topics. A consumer per call never outlives its topic; creating one costs
        about a millisecond, no broker round trip.
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
        if err.code() == RdKafkaError._ALL_BROKERS_DOWN:
            self._all_down = True
        # librdkafka's own report (it retries): its log, not the terminal's; a lost broker
        # is told in one line by whoever waits on it (BrokerUnavailableError)
        LIBRDKAFKA_LOG.warning("kafka client error (%s): %s", self.settings.bootstrap, err)

    def _check_down(self, doing: str) -> None:
        """After librdkafka said all brokers are down (its error callback, served by
        ``poll``): check the bootstrap servers once
        (:class:`~skewlab.io.kafka.base.BrokerUnavailableError` if none answers). A producer
        whose records only queue up (nothing waits on the broker until a flush) learns of a
        dead broker here, at its next ``poll``, about a second after the broker went."""
        if self._all_down:
            self._all_down = False
            self._require_broker(doing)

    def _on_delivery(self, err: RdKafkaError | None, msg: Message) -> None:
        if err is not None:
            self._failures.append(f"{msg.topic()}[{msg.partition()}]: {err.str()}")

    def _wait(
        self, doing: str, call: Callable[[float], T], timeout_s: float = ADMIN_TIMEOUT_S
    ) -> T:
        """``call(slice_s)`` until it answers, checking the broker between slices.

        A slice that ends without an answer (a future's ``TimeoutError``, or a
        librdkafka error in :data:`RETRIED`) checks the bootstrap servers
        (:class:`~skewlab.io.kafka.base.BrokerUnavailableError` if none answers) and
        waits again, up to ``timeout_s`` in all (then :class:`KafkaError`); any other
        librdkafka error is raised as it is.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                return call(max(0.01, min(SLICE_S, left)))
            except TimeoutError:
                pass
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, RdKafkaError) or err.code() not in RETRIED:
                    raise
            self._require_broker(doing)
            if time.monotonic() >= deadline:
                raise KafkaError(f"{doing} on {self._where()}: no answer in {timeout_s} s")

    def _result(self, doing: str, future: Future[Any]) -> Any:
        """The result of an admin request's future (:meth:`_wait`)."""
        return self._wait(doing, lambda slice_s: future.result(timeout=slice_s))

    # ------------------------------------------------------------------- admin

    def create_topic(self, name: str, partitions: int, exist_ok: bool = True) -> None:
        """Create ``name`` with ``partitions`` partitions; wait until its metadata shows them."""
        if partitions < 1:
            raise ConfigError(f"partitions must be >= 1, got {partitions}")
        self._drop_kept(name)
        futures = self.admin.create_topics(
            [NewTopic(name, num_partitions=partitions)], request_timeout=ADMIN_TIMEOUT_S
        )
        try:
            self._result(f"create topic {name!r}", futures[name])
        except KafkaException as exc:
            err = exc.args[0]
            if not (exist_ok and err.code() == RdKafkaError.TOPIC_ALREADY_EXISTS):
                raise KafkaError(f"create topic {name!r} on {self._where()}: {err.str()}") from exc
        self._await_topic(name, present=True)

    def delete_topic(self, name: str, missing_ok: bool = True) -> None:
        """Delete ``name``; wait until it is gone from the metadata."""
        self._drop_kept(name)
        futures = self.admin.delete_topics([name], request_timeout=ADMIN_TIMEOUT_S)
        try:
            self._result(f"delete topic {name!r}", futures[name])
        except KafkaException as exc:
            err = exc.args[0]
            if not (missing_ok and err.code() == RdKafkaError.UNKNOWN_TOPIC_OR_PART):
                raise KafkaError(f"delete topic {name!r} on {self._where()}: {err.str()}") from exc
        self._await_topic(name, present=False)

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
            admin = self.admin
            meta = self._wait("list topics", lambda slice_s: admin.list_topics(timeout=slice_s))
            self._admin_handed_over = True  # a metadata answer: the hand-over is done
            return dict(meta.topics)
        except KafkaException as exc:
            raise KafkaError(f"list topics on {self._where()}: {exc}") from exc

    def _await_topic(self, name: str, present: bool, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            meta = self._metadata().get(name)
            listed = meta is not None and meta.error is None and len(meta.partitions) > 0
            led = listed and all(
                p.leader >= 0 and p.error is None
                for p in meta.partitions.values()  # type: ignore[union-attr]
            )
            if led if present else not listed:
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
        full_since: float | None = None
        while True:
            try:
                producer.produce(topic, value, **kwargs)
                break
            except BufferError:
                full_since = self._queue_full(f"produce to {topic!r}", full_since)
                producer.poll(0.05)
            except KafkaException as exc:
                raise KafkaError(f"produce to {topic!r} on {self._where()}: {exc}") from exc
        self._unpolled += 1
        if self._unpolled >= 1000:
            producer.poll(0)
            self._unpolled = 0
            self._check_down(f"produce to {topic!r}")

    def _queue_full(self, doing: str, since: float | None) -> float:
        """The producer's queue is full: when it has been for :data:`SLICE_S`, check the
        broker (it drains the queue). Returns when the current full spell began."""
        now = time.monotonic()
        if since is None:
            return now
        if now - since >= SLICE_S:
            self._require_broker(doing)
            return now
        return since

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued record; :class:`KafkaError` on a failed delivery or timeout,
        :class:`~skewlab.io.kafka.base.BrokerUnavailableError` (within about a second) when
        the broker is gone."""
        if self._producer is None:
            return
        producer = self._producer
        deadline = time.monotonic() + timeout_s
        while True:
            left = producer.flush(max(0.0, min(SLICE_S, deadline - time.monotonic())))
            if not left or time.monotonic() >= deadline:
                break
            self._require_broker(f"flush {left} record(s)")
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
            tp = TopicPartition(topic, p)
            try:
                low, high = self._wait(
                    f"list offsets of {topic}[{p}]",
                    lambda slice_s, tp=tp: consumer.get_watermark_offsets(  # type: ignore[misc]
                        tp, timeout=slice_s, cached=False
                    ),
                )
            except KafkaException as exc:
                raise KafkaError(f"list offsets of {topic}[{p}] on {self._where()}: {exc}") from exc
            out[p] = (int(low), int(high))
        return out

    def begin_offsets(self, topic: str) -> dict[int, int]:
        """The first available offset per partition."""
        return {p: low for p, (low, _high) in self._watermarks(topic).items()}

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The end (high watermark) per partition: one ListOffsets request on the admin
        client."""
        return self._reported_ends(topic)

    def end_offset(self, topic: str, partition: int) -> int:
        """:meth:`end_offsets` of one partition (a ListOffsets of that partition alone)."""
        return self._reported_ends(topic, [partition])[partition]

    def _reported_ends(self, topic: str, parts: list[int] | None = None) -> dict[int, int]:
        """ListOffsets(latest) of ``parts`` (default: every partition of ``topic``), one
        admin request, sorted by partition."""
        ps = list(range(self.partitions(topic)) if parts is None else parts)
        out: dict[int, int] = {}
        self._hand_over(topic)
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while ps:
            futures = self.admin.list_offsets(
                {TopicPartition(topic, p): OffsetSpec.latest() for p in ps},
                request_timeout=ADMIN_TIMEOUT_S,
            )
            again = []
            for tp, fut in futures.items():
                try:
                    got = self._result(f"list offsets of {topic}[{tp.partition}]", fut)
                    out[_int(tp.partition)] = int(got.offset)
                except KafkaException as exc:
                    err = exc.args[0] if exc.args else None
                    code = err.code() if isinstance(err, RdKafkaError) else None
                    if code in LEADER_MOVING and time.monotonic() < deadline:
                        again.append(_int(tp.partition))
                        continue
                    raise KafkaError(
                        f"list offsets of {topic}[{tp.partition}] on {self._where()}: {exc}"
                    ) from exc
            ps = again
            if ps:
                time.sleep(0.05)
        return dict(sorted(out.items()))

    def _hand_over(self, topic: str) -> None:
        """Before the admin client's first ListOffsets: one metadata request of ``topic``.

        librdkafka (2.16 here) sends a new client's first requests to the bootstrap
        server and, once the first metadata answer names the brokers, closes that
        connection for the named broker's. A ListOffsets whose leader look-up was in
        flight on the closing connection fails it and is looked up again only by a timer:
        the first ``end_offset`` of a new client took 1.0 or 3.0 s in about 1 of 25
        clients against the embedded broker (a worker's first read, so the run's first
        events waited: docs/real-stack.md, "Session 35"). A metadata request waits for its
        own answer, so the hand-over happens here (or happened in :meth:`_metadata`); one
        that loses its connection to the hand-over (``_DESTROY``) is asked again at once."""
        if self._admin_handed_over:
            return
        admin = self.admin
        for _ in range(5):
            try:
                self._wait(f"metadata of {topic}", lambda s: admin.list_topics(topic, timeout=s))
                break
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if not isinstance(err, RdKafkaError) or err.code() != RdKafkaError._DESTROY:
                    raise KafkaError(f"metadata of {topic} on {self._where()}: {exc}") from exc
        self._admin_handed_over = True

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
        check_at = time.monotonic() + SLICE_S
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
                check_at = time.monotonic() + SLICE_S
            else:
                check_at = self._quiet(topic, partition, start, end, nxt, timeout_s, check_at)
                if time.monotonic() > stall_deadline:
                    raise self._stalled(topic, partition, start, end, nxt, timeout_s)

    def _quiet(
        self,
        topic: str,
        partition: int,
        start: int,
        end: int,
        nxt: int,
        timeout_s: float,
        check_at: float,
    ) -> float:
        """A fetch got nothing: past ``check_at``, check the broker is there (raise
        :class:`~skewlab.io.kafka.base.BrokerUnavailableError` naming the fetch if not).
        Returns the time of the next check."""
        now = time.monotonic()
        if now < check_at:
            return check_at
        self._require_broker(f"fetch {topic}[{partition}] [{start}, {end}) at offset {nxt}")
        return now + SLICE_S

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
        """:meth:`fetch_range` of ``[start, min(limit, end))``, ``end`` the partition's end
        at the time of the call, in one read from ``start`` until librdkafka's
        end-of-partition event or ``limit``.

        After a read that found nothing, the partition's ListOffsets first, and nothing is
        read when ``start`` is at its end (an idle reader asks the broker one ListOffsets);
        after a read that found records, the read at once (more are likely). The read's
        consumer is kept between calls for this one partition (unassigned in between: it
        fetches nothing ahead); a call for another partition, an error, :meth:`close` and
        this client's ``create_topic`` / ``delete_topic`` of its topic close it (a consumer
        must not outlive its topic, :meth:`_reader`)."""
        if start < 0 or limit < start:
            raise ConfigError(f"fetch must satisfy 0 <= start <= limit, got [{start}, {limit})")
        msgs: list[Message] = []
        if start == limit:
            return _fetched(topic, partition, msgs)
        tp = (topic, partition)
        if tp not in self._busy and self.end_offset(topic, partition) <= start:
            return _fetched(topic, partition, msgs)
        consumer = self._kept_reader(topic, partition)
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            self._consume_batches(
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
        return _fetched(topic, partition, msgs)

    def _kept_reader(self, topic: str, partition: int) -> Consumer:
        """The consumer :meth:`fetch_available` keeps for ``partition`` of ``topic``."""
        kept = self._kept
        if kept is not None and kept[0] == (topic, partition):
            return kept[1]
        self._drop_kept()
        consumer = Consumer(self._config("consumer", {**CONSUMER_DEFAULTS, **EOF_CONSUMER}))
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
        check_at = time.monotonic() + SLICE_S
        eof: int | None = None
        poll_s = EOF_POLL_S if to_eof else POLL_S
        while nxt < end and eof is None:
            msgs = consumer.consume(num_messages=min(FETCH_BATCH, end - nxt), timeout=poll_s)
            if not msgs:
                check_at = self._quiet(topic, partition, start, end, nxt, timeout_s, check_at)
                if time.monotonic() > stall_deadline:
                    raise self._stalled(topic, partition, start, end, nxt, timeout_s)
                continue
            stall_deadline = time.monotonic() + timeout_s
            check_at = time.monotonic() + SLICE_S
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
            cfg = self._config("consumer", {**CONSUMER_DEFAULTS, **GROUP_CONSUMER})
            cfg["group.id"] = group
            cfg["on_commit"] = lambda err, tps: self._commits.__setitem__(group, (err, tps))
            consumer = self._group_consumers[group] = Consumer(cfg)
        return consumer

    def _commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """An asynchronous commit whose outcome (``on_commit``, served by ``poll``) is
        awaited in slices with the broker checked between them: librdkafka's synchronous
        commit waits 45 s for the coordinator of a dead broker."""
        tps = [TopicPartition(topic, p, o) for p, o in sorted(offsets.items())]
        doing = f"commit {topic} for group {group!r}"
        consumer = self._group_consumer(group)
        self._commits.pop(group, None)
        try:
            consumer.commit(offsets=tps, asynchronous=True)
        except KafkaException as exc:
            raise KafkaError(f"{doing} on {self._where()}: {exc}") from exc
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        check_at = time.monotonic() + SLICE_S
        while group not in self._commits:
            consumer.poll(0.01)
            now = time.monotonic()
            if now >= check_at:
                self._require_broker(doing)
                check_at = now + SLICE_S
            if now >= deadline:
                raise KafkaError(f"{doing} on {self._where()}: no answer in {ADMIN_TIMEOUT_S} s")
        err, done = self._commits.pop(group)
        if err is not None:
            raise KafkaError(f"{doing} on {self._where()}: {err}")
        failed = [tp for tp in done or () if tp.error is not None]
        if failed:
            raise KafkaError(
                f"commit {topic}[{failed[0].partition}] for group {group!r} on {self._where()}: "
                f"{failed[0].error}"
            )

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """Committed offsets of ``group`` for ``topic``; partitions without one are left out."""
        tps = [TopicPartition(topic, p) for p in range(self.partitions(topic))]
        consumer = self._group_consumer(group)
        try:
            got = self._wait(
                f"committed offsets of {topic} for group {group!r}",
                lambda slice_s: consumer.committed(tps, timeout=slice_s),
            )
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
        self._admin_handed_over = False


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
