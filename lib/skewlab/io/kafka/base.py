"""The one small Kafka client interface skewlab uses.

Two implementations sit behind it (confluent-kafka, the default, and
kafka-python) and both pass one contract test suite against a real Apache Kafka
broker. A broker that stops answering is a :class:`BrokerUnavailableError` within
seconds (both clients check the bootstrap servers whenever a call waits), not a
call that waits out its whole timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, overload, runtime_checkable

from skewlab.errors import ConfigError, SkewlabError

Headers = Sequence[tuple[str, bytes]]


class KafkaError(SkewlabError):
    """A broker operation failed; the message names the operation and the broker."""


class BrokerUnavailableError(KafkaError):
    """No bootstrap server accepts a connection: the broker is down (stopped, killed,
    unreachable). The message names the operation and the bootstrap servers."""


@dataclass(frozen=True, slots=True)
class Record:
    """One fetched record."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp_ms: int = 0


class FetchedRange(Sequence[Record]):
    """A fetched range of one partition as columns, with no :class:`Record` per message.

    ``offsets``, ``values`` and ``headers`` (each record's header pairs as the client
    gave them, ``None`` for none; a pair's value may be ``None`` for a null header)
    are lists in offset order (``headers``: ``Sequence[tuple[str, bytes | None]] | None``
    per record). Indexing builds the :class:`Record` of one position on
    demand (``record_at``), so code that needs a whole record for a few positions
    (markers, hand-offs, an error line) still has one; ``rng[-1].offset`` works too.
    """

    __slots__ = ("headers", "offsets", "partition", "record_at", "topic", "values")

    def __init__(
        self,
        topic: str,
        partition: int,
        offsets: list[int],
        values: list[bytes | None],
        headers: list[Any],
        record_at: Callable[[int], Record],
    ) -> None:
        if not len(offsets) == len(values) == len(headers):
            raise ValueError(
                f"columns differ in length: {len(offsets)}, {len(values)}, {len(headers)}"
            )
        self.topic = topic
        self.partition = partition
        self.offsets = offsets
        self.values = values
        self.headers = headers
        self.record_at = record_at

    @classmethod
    def of_records(cls, topic: str, partition: int, recs: Sequence[Record]) -> FetchedRange:
        """The columns of records fetched one by one (any client, test fakes)."""
        recs = list(recs)
        return cls(
            topic,
            partition,
            [r.offset for r in recs],
            [r.value for r in recs],
            [r.headers for r in recs],
            recs.__getitem__,
        )

    def __len__(self) -> int:
        return len(self.offsets)

    @overload
    def __getitem__(self, i: int) -> Record: ...

    @overload
    def __getitem__(self, i: slice) -> list[Record]: ...

    def __getitem__(self, i: int | slice) -> Record | list[Record]:
        if isinstance(i, slice):
            return [self.record_at(j) for j in range(*i.indices(len(self)))]
        n = len(self.offsets)
        if not -n <= i < n:
            raise IndexError(f"record {i} of a fetched range of {n}")
        return self.record_at(i % n)

    def chunks(self, size: int) -> list[FetchedRange]:
        """The range cut into consecutive ranges of at most ``size`` records (no copy of a
        record; one range, this one, when it is no longer than ``size``)."""
        if size < 1:
            raise ValueError(f"size must be >= 1, got {size}")
        n = len(self.offsets)
        if n <= size:
            return [self]
        return [self._part(i, min(n, i + size)) for i in range(0, n, size)]

    def _part(self, start: int, stop: int) -> FetchedRange:
        at = self.record_at
        return FetchedRange(
            self.topic,
            self.partition,
            self.offsets[start:stop],
            self.values[start:stop],
            self.headers[start:stop],
            lambda j: at(start + j),
        )


@dataclass(frozen=True, slots=True)
class KafkaSettings:
    """Where the broker is and which client implementation talks to it."""

    bootstrap: str
    client: str = "confluent"
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.bootstrap or ":" not in self.bootstrap:
            raise ConfigError(f"bootstrap must be host:port[,host:port], got {self.bootstrap!r}")


@runtime_checkable
class KafkaClient(Protocol):
    """Admin, produce to an explicit partition, fetch a range, end offsets, commits."""

    def create_topic(self, name: str, partitions: int, exist_ok: bool = True) -> None:
        """Create ``name`` with ``partitions`` partitions; an existing one is an error only
        without ``exist_ok``."""
        ...

    def delete_topic(self, name: str, missing_ok: bool = True) -> None:
        """Delete ``name``; a missing topic is an error only without ``missing_ok``."""
        ...

    def list_topics(self) -> list[str]:
        """Names of the broker's topics."""
        ...

    def partitions(self, topic: str) -> int:
        """Number of partitions of ``topic``; :class:`KafkaError` if it does not exist."""
        ...

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Queue one record (buffered; :meth:`flush` waits for delivery)."""
        ...

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every queued record is acknowledged; raise on failure/timeout."""
        ...

    def begin_offsets(self, topic: str) -> dict[int, int]:
        """The first available offset per partition of ``topic``."""
        ...

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The end (last offset + 1, the high watermark) per partition."""
        ...

    def fetch(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0
    ) -> Iterator[Record]:
        """Every record with ``start <= offset < end`` of one partition, in offset order."""
        ...

    def fetch_range(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0
    ) -> FetchedRange:
        """The records of :meth:`fetch` as one :class:`FetchedRange` (columns, no
        per-message :class:`Record`): the hot path of a consumer that reads whole
        batches (the workers)."""
        ...

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Commit ``{partition: next offset to read}`` of ``topic`` for consumer group ``group``.

        Synchronous: when it returns the broker has stored the offsets. No group
        membership is needed (readers use manual assignment); a later commit of
        the same partition replaces the earlier one.
        """
        ...

    def committed(self, group: str, topic: str) -> dict[int, int]:
        """The offsets ``group`` committed for ``topic``: ``{partition: offset}``.

        Partitions without a committed offset are left out (empty: nothing committed).
        """
        ...

    def close(self, flush_s: float = 10.0) -> None:
        """Flush the producer for up to ``flush_s`` (best effort: what is still queued then
        is dropped, with a warning) and close every underlying client created. ``0``
        when the broker is known to be gone."""
        ...


ROLES = ("producer", "consumer", "admin")
"""The client roles ``KafkaSettings.extra`` keys may be prefixed with."""


def split_extra(extra: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Split ``KafkaSettings.extra`` into per-role configs (``producer``, ``consumer``, ``admin``).

    A key prefixed ``producer.``, ``consumer.`` or ``admin.`` goes only to that role (prefix
    removed); any other key goes to all three, where a role-specific value wins.
    """
    out: dict[str, dict[str, str]] = {role: {} for role in ROLES}
    for key, value in extra.items():
        role, _, rest = key.partition(".")
        if role in ROLES and rest:
            out[role][rest] = value
        else:
            for cfg in out.values():
                cfg.setdefault(key, value)
    return out
