"""The input events of a run, decoded for the ``events`` suite.

No Delta table keeps the input events one by one (``key_loads`` and
``results`` aggregate them), so :func:`run_events` reads them back from the
run's ``events`` topic, which lives from the run's start until its ``stop``
phase (after the quality check, unless a user stopped the run early): the
run's handle (``<home>/runs/<run_id>/handle.json``) names the broker, the topic
and the client, and its produce report the number of events sent.

Up to ``limit`` records are read: all of them when the topic holds no more
(then the frame must hold every event the run's producer sent plus the valid
foreign ones, without the producer's mark: what the route job read), else the
same prefix of every partition (a sample, in offset order per partition).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from skewlab.errors import ConfigError, SkewlabError
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaSettings
from skewlab.pipeline import events as wire
from skewlab.rundir import RunDir

if TYPE_CHECKING:
    from skewlab.io.kafka.base import KafkaClient

log = logging.getLogger(__name__)

EVENTS_LIMIT = 200_000
"""Most records :func:`run_events` reads (beyond it: a per-partition prefix sample)."""


class EventsUnavailable(SkewlabError):
    """The run's input events cannot be read back (no handle, topic gone, broker down)."""


@dataclass(frozen=True)
class RunEvents:
    """Decoded events read back from a run's topic, and how much of the topic they are.

    ``total``: records in the topic; ``read``: records read (``== total``: the
    whole topic); ``rejected``: records read that do not decode (the route job
    quarantines them); ``produced``: events the run's producer sent (None if
    unknown); ``foreign``: valid records read without the run's producer mark
    (written into the topic from outside the run); ``frame``: the valid records
    read, :data:`EVENTS_COLUMNS` order.
    """

    topic: str
    frame: pd.DataFrame
    total: int
    read: int
    rejected: int
    produced: int | None = None
    foreign: int = 0
    foreign_rows: frozenset[tuple[int, int]] = frozenset()
    """``(partition, offset)`` of the valid foreign records (their ``ts`` is the writer's)."""

    @property
    def full(self) -> bool:
        """True when every record of the topic was read (a full count, not a sample)."""
        return self.read == self.total

    @property
    def expected_rows(self) -> int | None:
        """Valid events the frame must hold (only if the whole topic): every one the run's
        producer sent, plus the foreign ones the topic holds (the route job read them too)."""
        if not self.full or self.produced is None:
            return None
        return self.produced + self.foreign

    def note(self) -> str:
        """What the ``events`` suite validated, in words (sample or full count, rows)."""
        what = (
            f"full count: all {self.total:,} records of topic {self.topic}"
            if self.full
            else f"sample: the first {self.read:,} of {self.total:,} records of topic "
            f"{self.topic} (the same prefix of every partition)"
        )
        return (
            f"{what}; {len(self.frame):,} valid events validated ({self.foreign:,} foreign), "
            f"{self.rejected:,} rejected"
        )


def events_frame(records: Iterable[tuple[int, int, bytes | None]]) -> pd.DataFrame:
    """Decoded input events from ``(partition, offset, value)`` records.

    Records the route job would quarantine are left out (the ``quarantine``
    suite covers them); the rest become rows of :data:`EVENTS_COLUMNS`.
    """
    parts: list[int] = []
    offsets: list[int] = []
    values: list[bytes | None] = []
    for partition, offset, value in records:
        parts.append(int(partition))
        offsets.append(int(offset))
        values.append(value)
    dec = wire.decode(values)
    return pd.DataFrame(
        {
            "partition": pd.Series([parts[i] for i in dec.index], dtype="int64"),
            "offset": pd.Series([offsets[i] for i in dec.index], dtype="int64"),
            "key": pd.Series(dec.keys, dtype="object"),
            "ts": pd.Series(dec.ts, dtype="float64"),
            "seq": pd.Series(dec.seq, dtype="int64"),
        }
    )


def read_topic(client: KafkaClient, topic: str, limit: int | None = None) -> RunEvents:
    """Up to ``limit`` records of ``topic`` (None: all), as :class:`RunEvents`.

    Over the limit, every partition contributes the same number of its first
    records (``limit // partitions``, fewer if it holds fewer).
    """
    if limit is not None and (isinstance(limit, bool) or limit < 1):
        raise ConfigError(f"events limit must be an integer >= 1, got {limit!r}")
    begins = client.begin_offsets(topic)
    ranges = {p: (begins.get(p, 0), end) for p, end in sorted(client.end_offsets(topic).items())}
    total = sum(max(0, end - begin) for begin, end in ranges.values())
    if limit is not None and total > limit:
        share = max(1, limit // max(1, len(ranges)))
        ranges = {p: (b, min(e, b + share)) for p, (b, e) in ranges.items()}
    records: list[tuple[int, int, bytes | None]] = []
    own: set[tuple[int, int]] = set()
    for p, (begin, end) in ranges.items():
        if end > begin:
            for r in client.fetch(topic, p, begin, end):
                records.append((p, r.offset, r.value))
                if wire.marked(r.headers, topic):
                    own.add((p, r.offset))
    frame = events_frame(records)
    foreign = frozenset(
        (int(p), int(o)) for p, o in zip(frame["partition"], frame["offset"]) if (p, o) not in own
    )
    return RunEvents(
        topic,
        frame,
        total,
        len(records),
        len(records) - len(frame),
        foreign=len(foreign),
        foreign_rows=foreign,
    )


def read_events(client: KafkaClient, topic: str) -> pd.DataFrame:
    """Every record of ``topic`` (all partitions, begin to end) as :func:`events_frame`."""
    return read_topic(client, topic).frame


def run_events(home: Path, run_id: str, limit: int | None = EVENTS_LIMIT) -> RunEvents:
    """The input events of run ``run_id`` under data dir ``home``, read from its topic.

    Raises :class:`EventsUnavailable` (its message is the reason) when the run
    has no handle, the handle names no broker or topic, or the topic cannot be
    read (deleted by the run's ``stop`` phase, broker stopped).
    """

    path = RunDir.at(home, run_id).handle
    try:
        handle = json.loads(path.read_text())
    except FileNotFoundError:
        raise EventsUnavailable(
            f"run has no handle ({path}): its events topic is unknown"
        ) from None
    except (OSError, ValueError) as exc:
        raise EventsUnavailable(f"run handle {path} is unreadable: {exc}") from exc
    bootstrap, topic = handle.get("bootstrap"), handle.get("events_topic")
    if not bootstrap or not topic:
        raise EventsUnavailable(f"run handle {path} names no broker or events topic")
    produced = (handle.get("produced") or {}).get("events")
    client_name = (handle.get("settings") or {}).get("client") or "confluent"
    try:
        client = connect(KafkaSettings(bootstrap, client_name))
    except SkewlabError as exc:
        raise EventsUnavailable(f"cannot reach broker {bootstrap}: {exc}") from exc
    try:
        if topic not in client.list_topics():
            raise EventsUnavailable(f"events topic {topic} is gone (deleted when the run stopped)")
        got = read_topic(client, topic, limit)
    except EventsUnavailable:
        raise
    except SkewlabError as exc:
        raise EventsUnavailable(f"cannot read events topic {topic} on {bootstrap}: {exc}") from exc
    finally:
        client.close()
    out = dataclasses.replace(got, produced=produced)
    log.info("events of %s: %s", run_id, out.note())
    return out
