"""The user's stream held in memory, its bad rows counted, and replayed as a workload.

:class:`Stream` is what every source (a trace file, a Kafka topic sample, a Delta
table) becomes: the valid events as arrays over one key vocabulary, plus how many
rows were left out and the first of them. :class:`StreamWorkload` replays it into
the simulator exactly as recorded (same keys in the same order, same timestamps),
so every candidate strategy faces the same stream. The whole procedure:
docs/advise.md.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError, SkewlabError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.workload.base import EventChunk
from skewlab.workload.trace_check import BadRow, Row

__all__ = ["SHOWN_BAD", "AdviseError", "Stream", "StreamWorkload", "stream_of"]

SHOWN_BAD = 3
"""Bad rows a :class:`Stream` keeps to name (all are counted)."""

_BLOCK = 65_536
"""Keys encoded at a time while a stream is read."""


class AdviseError(SkewlabError):
    """The advice cannot be given (an empty stream, a source that cannot be read)."""


@dataclass(frozen=True, eq=False)
class Stream:
    """The valid events of one source, in source order.

    Invariants: ``ids``, ``sizes`` (and ``ts`` when not ``None``) have one entry per
    event; ``ids`` index ``vocab.keys``; ``ts`` (seconds, from the first event) never
    decreases. ``bad_rows`` counts every row left out, ``bad`` names the first
    :data:`SHOWN_BAD` of them (``file:line: reason``). ``source`` says where it came
    from (a path, ``kafka:topic``, ``delta:path``).
    """

    source: str
    ids: np.ndarray
    vocab: KeyVocab
    ts: np.ndarray | None
    sizes: np.ndarray
    bad_rows: int = 0
    bad: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        n = self.ids.size
        if self.sizes.size != n or (self.ts is not None and self.ts.size != n):
            raise ConfigError(f"stream {self.source}: columns differ in length")
        if n == 0:
            raise AdviseError(
                f"{self.source}: no valid event"
                + (f" ({self.bad_rows} bad rows, the first: {self.bad[0]})" if self.bad else "")
            )

    def __len__(self) -> int:
        return int(self.ids.size)

    @property
    def keys(self) -> int:
        """Distinct keys."""
        return len(self.vocab)

    @property
    def span_s(self) -> float:
        """Seconds from the first to the last timestamp (0 without timestamps)."""
        if self.ts is None or self.ts.size < 2:
            return 0.0
        return float(self.ts[-1] - self.ts[0])

    def native_rate(self) -> float | None:
        """Events per second the timestamps give (``None``: no timestamps, or all equal)."""
        span = self.span_s
        if span <= 0:
            return None
        return (len(self) - 1) / span

    def counts(self) -> np.ndarray:
        """Events per key id (``counts()[i]`` is the load of ``vocab.keys[i]``)."""
        return np.bincount(self.ids, minlength=len(self.vocab))

    def describe_bad(self) -> str:
        """One line: how many rows were left out and the first ones (empty if none)."""
        if not self.bad_rows:
            return ""
        shown = "; ".join(self.bad)
        more = self.bad_rows - len(self.bad)
        return f"{self.bad_rows} bad row(s) left out of {self.bad_rows + len(self)}: {shown}" + (
            f"; and {more} more" if more > 0 else ""
        )


def stream_of(
    source: str,
    items: Iterable[Row | BadRow],
    default_size: int = 100,
    progress: Callable[[int], None] | None = None,
) -> Stream:
    """Collect checked rows (``(key, ts, size)`` or :class:`BadRow`) into a :class:`Stream`.

    Timestamps are kept only when every valid row has one; they are shifted so the
    first event is at 0. A row without a size gets ``default_size`` bytes.
    ``progress(rows)`` is called with the rows read so far (valid and bad) every
    65,536 rows and at the end.
    """
    vocab = KeyVocab()
    blocks: list[np.ndarray] = []
    keys: list[str] = []
    tss: list[float | None] = []
    sizes: list[int] = []
    bad_rows = 0
    bad: list[str] = []
    seen = 0
    for item in items:
        seen += 1
        if progress is not None and seen % _BLOCK == 0:
            progress(seen)
        if isinstance(item, BadRow):
            bad_rows += 1
            if len(bad) < SHOWN_BAD:
                bad.append(str(item))
            continue
        key, ts, size = item
        keys.append(key)
        tss.append(ts)
        sizes.append(default_size if size is None else size)
        if len(keys) == _BLOCK:
            blocks.append(vocab.encode(keys))
            keys = []
    if keys:
        blocks.append(vocab.encode(keys))
    if progress is not None:
        progress(seen)
    ids = np.concatenate(blocks) if blocks else np.zeros(0, dtype=np.int64)
    ts_arr: np.ndarray | None = None
    if tss and all(t is not None for t in tss):
        ts_arr = np.asarray(tss, dtype=np.float64)
        ts_arr -= ts_arr[0]
    return Stream(
        source=source,
        ids=ids.astype(np.int64, copy=False),
        vocab=vocab,
        ts=ts_arr,
        sizes=np.asarray(sizes, dtype=np.int64),
        bad_rows=bad_rows,
        bad=tuple(bad),
    )


@dataclass(frozen=True, eq=False)
class StreamWorkload:
    """A :class:`Stream` replayed as a workload: its events in order, as recorded.

    ``rate`` scales time: with ``rate`` given the timestamps (or, without them, the
    sequence) are stretched so the stream arrives at ``rate`` events/s on average,
    keeping its bursts; ``None`` keeps the recorded timestamps (and needs them).
    ``events(n)`` yields the first ``n`` events; asking for more than the stream
    holds raises :class:`ConfigError` (a replay never invents events).
    """

    name: ClassVar[str] = "advise-stream"
    stream: Stream
    rate: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rate is None and self.stream.native_rate() is None:
            raise ConfigError(
                f"{self.stream.source}: the stream has no usable timestamps; give --rate"
            )
        if self.rate is not None and not (self.rate > 0 and np.isfinite(self.rate)):
            raise ConfigError(f"rate must be a number > 0 events/s, got {self.rate!r}")

    @property
    def arrival_rate(self) -> float:
        """Mean events/s of the replay."""
        native = self.stream.native_rate()
        return float(self.rate if self.rate is not None else native)  # type: ignore[arg-type]

    def times(self) -> np.ndarray:
        """Every event's arrival time in seconds (non-decreasing, from 0)."""
        s = self.stream
        native = s.native_rate()
        if s.ts is not None and native is not None:
            if self.rate is None:
                return s.ts
            return s.ts * (native / self.rate)
        return np.arange(len(s), dtype=np.float64) / self.arrival_rate

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """The first ``n`` events in chunks of at most ``chunk`` (``rate`` is ignored: the
        replay's own times are used)."""
        if n > len(self.stream):
            raise ConfigError(
                f"{self.stream.source}: {n} events asked for, the stream has {len(self.stream)}"
            )
        return self._events(n, chunk)

    def _events(self, n: int, chunk: int) -> Iterator[EventChunk]:
        ts = self.times()
        s = self.stream
        for lo in range(0, n, chunk):
            hi = min(n, lo + chunk)
            yield EventChunk(lo, KeyBatch(s.ids[lo:hi], s.vocab), ts[lo:hi], s.sizes[lo:hi])

    def spec(self) -> str:
        """A description (a replay has no spec string that parses back)."""
        return f"stream:{self.stream.source}"
