"""The second Kafka client: kafka-python (pure Python, ~20x slower to produce than confluent).

Same contract as :mod:`skewlab.io.kafka.confluent`: lazy producer / consumer / admin,
group-less reads with ``assign`` + ``seek``, end offsets from ListOffsets. The
consumer's assignment is always cleared before a new one, because kafka-python keeps a
partition's cached high watermark across re-assignment and a stale one would fake an
end. A call that waits on the broker checks between slices that it is still there
(:mod:`skewlab.io.kafka._common`).

``KafkaSettings.extra`` keys use Kafka's dotted names (``linger.ms``); they are
mapped to kafka-python's keyword names (``linger_ms``), numbers and booleans parsed,
and each key goes only to the client classes that know it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from skewlab.errors import ConfigError
from skewlab.io.kafka._common import SLICE_S, ClientBase
from skewlab.io.kafka.base import Headers, KafkaError, KafkaSettings, Record

log = logging.getLogger(__name__)

PRODUCER_DEFAULTS: dict[str, Any] = {
    "linger_ms": 5,
    "batch_size": 262_144,
    "allow_auto_create_topics": False,
}
"""``allow_auto_create_topics`` off: see ``confluent.PRODUCER_DEFAULTS``."""
CONSUMER_DEFAULTS: dict[str, Any] = {
    "group_id": None,
    "allow_auto_create_topics": False,
    "enable_auto_commit": False,
    "auto_offset_reset": "none",
    "fetch_max_wait_ms": 20,
}
FETCH_BATCH = 10_000
POLL_MS = 100
ADMIN_TIMEOUT_S = 30.0


def kafka_python_config(extra: Mapping[str, str], known: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted Kafka names -> kafka-python keywords known to one client class, values parsed."""
    out: dict[str, Any] = {}
    for key, raw in extra.items():
        name = key.replace(".", "_")
        if name in known:
            out[name] = _parse(raw)
    return out


def _never_auto_create(cluster: Any) -> None:
    """Make a client's metadata requests say ``allow_auto_topic_creation=False``.

    kafka-python 3.0.12 accepts ``allow_auto_create_topics`` on its producer and
    consumer but builds their ``ClusterMetadata`` without it (``kafka/net/manager.py``),
    so every metadata request asks the broker to create the topic: a consumer that
    had looked a topic up re-created it within 0.25 s of its deletion.
    """
    cluster.config["allow_auto_create_topics"] = False


def _parse(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    low = raw.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


class KafkaPythonClient(ClientBase):
    """:class:`~skewlab.io.kafka.base.KafkaClient` on kafka-python; see the module docstring."""

    def __init__(self, settings: KafkaSettings) -> None:
        super().__init__(settings)
        self._producer: KafkaProducer | None = None
        self._consumer: KafkaConsumer | None = None
        self._admin: KafkaAdminClient | None = None
        self._group_consumers: dict[str, KafkaConsumer] = {}

    # ------------------------------------------------------------ lazy clients

    def _kwargs(self, role: str, cls: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords of a new kafka-python client; first a check that the broker is there
        (kafka-python's constructors wait 30 s for a bootstrap server that is down)."""
        self._require_broker(f"connect a kafka-python {role}")
        return {
            **defaults,
            "bootstrap_servers": self.settings.bootstrap.split(","),
            **kafka_python_config(self._extra[role], cls.DEFAULT_CONFIG),
        }

    @property
    def producer(self) -> KafkaProducer:
        """The producer, created on first use."""
        if self._producer is None:
            self._producer = KafkaProducer(
                **self._kwargs("producer", KafkaProducer, PRODUCER_DEFAULTS)
            )
            _never_auto_create(self._producer._metadata)
        return self._producer

    @property
    def consumer(self) -> KafkaConsumer:
        """The group-less consumer, created on first use."""
        if self._consumer is None:
            self._consumer = KafkaConsumer(
                **self._kwargs("consumer", KafkaConsumer, CONSUMER_DEFAULTS)
            )
            _never_auto_create(self._consumer._client.cluster)
        return self._consumer

    @property
    def admin(self) -> KafkaAdminClient:
        """The admin client, created on first use."""
        if self._admin is None:
            self._admin = KafkaAdminClient(**self._kwargs("admin", KafkaAdminClient, {}))
        return self._admin

    # ------------------------------------------------------------------- admin

    def create_topic(self, name: str, partitions: int, exist_ok: bool = True) -> None:
        """Create ``name`` with ``partitions`` partitions; wait until its metadata shows them."""
        if partitions < 1:
            raise ConfigError(f"partitions must be >= 1, got {partitions}")
        try:
            self.admin.create_topics({name: {"num_partitions": partitions}}, wait_for_metadata=True)
        except kerrors.TopicAlreadyExistsError as exc:
            if not exist_ok:
                raise KafkaError(f"create topic {name!r} on {self._where()}: exists") from exc
        except kerrors.KafkaError as exc:
            raise self._error(f"create topic {name!r}", exc) from exc

    def delete_topic(self, name: str, missing_ok: bool = True) -> None:
        """Delete ``name``; wait until it is gone from the topic list."""
        try:
            self.admin.delete_topics([name])
        except kerrors.UnknownTopicOrPartitionError as exc:
            if not missing_ok:
                raise KafkaError(f"delete topic {name!r} on {self._where()}: unknown") from exc
        except kerrors.KafkaError as exc:
            raise self._error(f"delete topic {name!r}", exc) from exc
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while name in self.list_topics():
            if time.monotonic() > deadline:
                raise KafkaError(f"topic {name!r} did not disappear on {self._where()}")
            time.sleep(0.05)

    def list_topics(self) -> list[str]:
        """Names of the non-internal topics, sorted."""
        try:
            return sorted(t for t in self.admin.list_topics() if not t.startswith("__"))
        except kerrors.KafkaError as exc:
            raise self._error("list topics", exc) from exc

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``; :class:`KafkaError` if it does not exist."""
        try:
            described = self.admin.describe_topics([topic])
        except kerrors.KafkaError as exc:
            raise self._error(f"describe topic {topic!r}", exc) from exc
        for meta in described:
            if meta["name"] == topic and meta["error_code"] == 0 and meta["partitions"]:
                return len(meta["partitions"])
        raise KafkaError(f"topic {topic!r} does not exist on {self._where()}")

    # ----------------------------------------------------------------- produce

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Queue one record (failures surface at :meth:`flush`)."""
        try:
            future = self.producer.send(
                topic,
                value=value,
                key=key,
                partition=partition,
                headers=list(headers) if headers else None,
            )
        except (kerrors.KafkaError, AssertionError, ValueError) as exc:
            raise self._error(f"produce to {topic!r}", exc) from exc
        future.add_errback(self._on_failure, topic, partition)

    def _on_failure(self, topic: str, partition: int | None, exc: BaseException) -> None:
        self._failures.append(f"{topic}[{partition}]: {exc}")

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait for every queued record; :class:`KafkaError` on a failed delivery or timeout,
        :class:`~skewlab.io.kafka.base.BrokerUnavailableError` (within about a second) when
        the broker is gone."""
        if self._producer is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self._producer.flush(timeout=max(0.01, min(SLICE_S, deadline - time.monotonic())))
                break
            except kerrors.KafkaTimeoutError as exc:
                self._require_broker("flush")
                if time.monotonic() >= deadline:
                    raise KafkaError(
                        f"records still queued after {timeout_s} s ({self._where()})"
                    ) from exc
        self._raise_failures()

    # ----------------------------------------------------------------- offsets

    def _tps(self, topic: str) -> list[TopicPartition]:
        return [TopicPartition(topic, p) for p in range(self.partitions(topic))]

    def begin_offsets(self, topic: str) -> dict[int, int]:
        """The first available offset per partition."""
        try:
            got = self.consumer.beginning_offsets(
                self._tps(topic), timeout_ms=ADMIN_TIMEOUT_S * 1e3
            )
        except kerrors.KafkaError as exc:
            raise self._error(f"list offsets of {topic!r}", exc) from exc
        return {tp.partition: int(off) for tp, off in got.items()}

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The end (high watermark) per partition, from ListOffsets."""
        try:
            got = self.consumer.end_offsets(self._tps(topic), timeout_ms=ADMIN_TIMEOUT_S * 1e3)
        except kerrors.KafkaError as exc:
            raise self._error(f"list offsets of {topic!r}", exc) from exc
        return {tp.partition: int(off) for tp, off in sorted(got.items())}

    def _assign(self, positions: Mapping[TopicPartition, int]) -> KafkaConsumer:
        consumer = self.consumer
        consumer.assign([])  # drop cached partition state (high watermarks) first
        consumer.assign(list(positions))
        for tp, off in positions.items():
            consumer.seek(tp, off)
        return consumer

    # ------------------------------------------------------------------- fetch

    def _fetch(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float
    ) -> Iterator[Record]:
        if start == end:
            return
        tp = TopicPartition(topic, partition)
        consumer = self._assign({tp: start})
        nxt = start
        stall_deadline = time.monotonic() + timeout_s
        check_at = time.monotonic() + SLICE_S
        try:
            while nxt < end:
                try:
                    batch = consumer.poll(
                        timeout_ms=POLL_MS, max_records=min(FETCH_BATCH, end - nxt)
                    )
                except kerrors.KafkaError as exc:
                    raise self._error(f"fetch {topic}[{partition}] at {nxt}", exc) from exc
                records = batch.get(tp, [])
                for rec in records:
                    if rec.offset < nxt:
                        continue
                    if rec.offset >= end:
                        nxt = end
                        break
                    yield _record(rec)
                    nxt = rec.offset + 1
                now = time.monotonic()
                if records:
                    stall_deadline = now + timeout_s
                    check_at = now + SLICE_S
                elif consumer.position(tp) >= end:  # only non-records (markers) left before end
                    nxt = end
                elif now > stall_deadline:
                    raise self._stalled(topic, partition, start, end, nxt, timeout_s)
                elif now > check_at:
                    self._require_broker(f"fetch {topic}[{partition}] [{start}, {end}) at {nxt}")
                    check_at = now + SLICE_S
        finally:
            consumer.assign([])

    # ----------------------------------------------------------------- commits

    def _group_consumer(self, group: str) -> KafkaConsumer:
        """A consumer with ``group_id = group`` that never subscribes, one per group."""
        consumer = self._group_consumers.get(group)
        if consumer is None:
            kwargs = self._kwargs("consumer", KafkaConsumer, CONSUMER_DEFAULTS)
            kwargs["group_id"] = group
            consumer = self._group_consumers[group] = KafkaConsumer(**kwargs)
            _never_auto_create(consumer._client.cluster)
        return consumer

    def _commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """A synchronous commit, retried in slices (the same offsets again: harmless) with
        the broker checked between them."""
        data = {TopicPartition(topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        doing = f"commit {topic} for group {group!r}"
        deadline = time.monotonic() + ADMIN_TIMEOUT_S
        while True:
            slice_ms = max(10.0, min(SLICE_S, deadline - time.monotonic()) * 1e3)
            try:
                self._group_consumer(group).commit(data, timeout_ms=slice_ms)
                return
            except kerrors.KafkaTimeoutError as exc:
                self._require_broker(doing)
                if time.monotonic() >= deadline:
                    raise KafkaError(f"{doing} on {self._where()}: {exc}") from exc
            except kerrors.KafkaError as exc:
                raise self._error(doing, exc) from exc

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """Committed offsets of ``group`` for ``topic``; partitions without one are left out."""
        consumer = self._group_consumer(group)
        out: dict[int, int] = {}
        try:
            for tp in self._tps(topic):
                off = consumer.committed(tp, timeout_ms=ADMIN_TIMEOUT_S * 1e3)
                if off is not None and off >= 0:
                    out[tp.partition] = int(off)
        except kerrors.KafkaError as exc:
            raise self._error(f"committed offsets of {topic} for group {group!r}", exc) from exc
        return out

    # ------------------------------------------------------------------- close

    def close(self, flush_s: float = 10.0) -> None:
        """Flush the producer for up to ``flush_s`` (best effort) and close every client
        that was created."""
        if self._producer is not None:
            producer, self._producer = self._producer, None
            try:
                producer.close(timeout=flush_s)
            except kerrors.KafkaTimeoutError:
                log.warning("closing producer: records still queued after %s s, dropped", flush_s)
                sender = getattr(producer, "_sender", None)  # close() flushes first, then stops
                if sender is not None:  # its sender thread: stop that one without sending
                    sender.force_close()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        for consumer in self._group_consumers.values():
            consumer.close()
        self._group_consumers.clear()
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def _record(rec: Any) -> Record:
    return Record(
        topic=rec.topic,
        partition=rec.partition,
        offset=rec.offset,
        key=rec.key,
        value=rec.value,
        headers=tuple((k, v if v is not None else b"") for k, v in (rec.headers or ())),
        timestamp_ms=int(rec.timestamp),
    )
