"""What both Kafka client implementations share, whatever library they wrap.

:class:`ClientBase` holds the settings, the per-role ``extra`` config and the
list of failed deliveries, and gives both clients the same ``fetch`` range
check, the same error messages and the same broker liveness check; each
implementation supplies ``_fetch`` and ``_commit`` (after
:meth:`ClientBase.commit` validated its arguments).

Broker loss: a call that waits on the broker (a flush, an admin request, a fetch
without progress) waits in slices of :data:`SLICE_S`; after each slice without an
answer :meth:`ClientBase._require_broker` opens a TCP connection to each bootstrap
server and raises :class:`BrokerUnavailableError` when none accepts. A dead broker
is then an error in about a second instead of after the call's whole timeout (30 s
for admin calls, five minutes for a producer's delivery), and a slow but live
broker still gets the whole timeout. librdkafka's own log: :data:`LIBRDKAFKA_LOG`.
"""

from __future__ import annotations

import logging
import socket
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from pathlib import Path

from skewlab.errors import ConfigError
from skewlab.io.kafka.base import (
    BrokerUnavailableError,
    FetchedRange,
    KafkaError,
    KafkaSettings,
    Record,
    split_extra,
)

LIBRDKAFKA_LOG = logging.getLogger("skewlab.librdkafka")
"""Every client's librdkafka log (its ``logger``): kept out of the terminal's handlers
(no propagation), written only where :func:`log_librdkafka_to` says."""
LIBRDKAFKA_LOG.propagate = False
LIBRDKAFKA_LOG.addHandler(logging.NullHandler())
LIBRDKAFKA_LOG.setLevel(logging.INFO)


def log_librdkafka_to(path: Path | None) -> None:
    """Write librdkafka's log (of every client of this process, those made before too) to
    the file ``path`` from now on, appended; None: nowhere. Replaces the earlier file."""
    for handler in list(LIBRDKAFKA_LOG.handlers):
        if isinstance(handler, logging.FileHandler):
            LIBRDKAFKA_LOG.removeHandler(handler)
            handler.close()
    if path is not None:
        handler = logging.FileHandler(path, encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s librdkafka %(message)s"))
        LIBRDKAFKA_LOG.addHandler(handler)


SLICE_S = 1.0
"""How long a call waits on the broker before it checks that the broker is there."""
CONNECT_TIMEOUT_S = 1.0


def bootstrap_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]`` as pairs (a bracketed IPv6 host loses its brackets)."""
    out = []
    for item in bootstrap.split(","):
        item = item.strip()
        if "://" in item:
            item = item.split("://", 1)[1]
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"bootstrap server must be host:port, got {item!r}")
        out.append((host.strip("[]"), int(port)))
    return out


def any_reachable(addresses: list[tuple[str, int]], timeout_s: float = CONNECT_TIMEOUT_S) -> bool:
    """True if a TCP connection to one of ``addresses`` succeeds."""
    for host, port in addresses:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return True
        except OSError:
            continue
    return False


class ClientBase(ABC):
    """The library-independent part of a :class:`~skewlab.io.kafka.base.KafkaClient`."""

    def __init__(self, settings: KafkaSettings) -> None:
        self.settings = settings
        self._extra = split_extra(settings.extra)
        self._failures: list[str] = []
        self._addresses = bootstrap_addresses(settings.bootstrap)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.settings.bootstrap!r})"

    def fetch(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0
    ) -> Iterator[Record]:
        """Every record with ``start <= offset < end`` of one partition, in offset order.

        ``timeout_s`` bounds the time without progress; :class:`KafkaError` then.
        """
        if start < 0 or end < start:
            raise ConfigError(f"fetch range must satisfy 0 <= start <= end, got [{start}, {end})")
        return self._fetch(topic, partition, start, end, timeout_s)

    def fetch_range(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float = 30.0
    ) -> FetchedRange:
        """:meth:`fetch` as columns (``KafkaClient.fetch_range``); here from its records,
        an implementation may read the columns without building records."""
        recs = list(self.fetch(topic, partition, start, end, timeout_s))
        return FetchedRange.of_records(topic, partition, recs)

    @abstractmethod
    def _fetch(
        self, topic: str, partition: int, start: int, end: int, timeout_s: float
    ) -> Iterator[Record]:
        """:meth:`fetch` after its range check (a generator: nothing runs until iterated)."""

    def commit(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Commit ``{partition: next offset}`` for ``group`` (see the ``KafkaClient`` contract)."""
        if not group:
            raise ConfigError("commit needs a consumer group id, got an empty one")
        clean = {int(p): int(o) for p, o in offsets.items()}
        bad = {p: o for p, o in clean.items() if p < 0 or o < 0}
        if bad:
            raise ConfigError(f"committed partitions and offsets must be >= 0, got {bad}")
        if clean:
            self._commit(group, topic, clean)

    @abstractmethod
    def _commit(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """:meth:`commit` after its checks (``offsets`` non-empty)."""

    def _raise_failures(self) -> None:
        """Raise :class:`KafkaError` for the deliveries that failed since the last call."""
        failures, self._failures = self._failures, []
        if failures:
            raise KafkaError(
                f"{len(failures)} record(s) not delivered to {self._where()}; first: {failures[0]}"
            )

    def _stalled(
        self, topic: str, partition: int, start: int, end: int, nxt: int, timeout_s: float
    ) -> KafkaError:
        """The error of a fetch that made no progress for ``timeout_s``."""
        return KafkaError(
            f"fetch {topic}[{partition}] [{start}, {end}) stalled at offset {nxt} "
            f"for {timeout_s} s on {self._where()}"
        )

    def _where(self) -> str:
        return f"bootstrap {self.settings.bootstrap}"

    def broker_reachable(self) -> bool:
        """True if one of the bootstrap servers accepts a TCP connection."""
        return any_reachable(self._addresses)

    def _error(self, doing: str, exc: BaseException) -> KafkaError:
        """The error of a failed ``doing``: :class:`BrokerUnavailableError` when no bootstrap
        server answers, else :class:`KafkaError` with the library's message."""
        if not self.broker_reachable():
            return self._unavailable(doing)
        return KafkaError(f"{doing} on {self._where()}: {exc}")

    def _unavailable(self, doing: str) -> BrokerUnavailableError:
        return BrokerUnavailableError(
            f"{doing}: the Kafka broker at {self._where()} is unavailable "
            "(no bootstrap server accepts a connection: stopped or killed?)"
        )

    def _require_broker(self, doing: str) -> None:
        """Raise :class:`BrokerUnavailableError` for ``doing`` unless the broker answers."""
        if not self.broker_reachable():
            raise self._unavailable(doing)
