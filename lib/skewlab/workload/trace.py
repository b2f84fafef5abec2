"""Replay of a user's trace file (CSV or JSON lines), validated up front, streamed row by row.

CSV rows are ``key[,timestamp][,size]`` (optional header); JSON lines carry ``"key"`` and
optionally ``"timestamp"``/``"ts"`` and ``"size"``. Every row is checked when the workload is
built; bad rows refuse the trace (``bad="fail"``) or are left out (``bad="skip"``). The full
format and checking rules: docs/workload.md, "Trace replay".
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.workload._common import (
    DEFAULT_SIZE,
    check_seed,
    check_size,
    check_stream_args,
    parse_params,
)
from skewlab.workload.base import EventChunk
from skewlab.workload.trace_check import (
    FORMATS,
    BadRow,
    Row,
    TraceCheck,
    TraceError,
    checked,
    format_of,
    scan,
)

__all__ = ["TraceWorkload", "check_events"]

log = logging.getLogger(__name__)

ON_BAD = ("fail", "skip")
"""What a replay does with bad rows: refuse the trace, or leave them out."""


@dataclass(frozen=True, kw_only=True)
class TraceWorkload:
    """Replays ``path`` (formats: docs/workload.md); ``seed`` is unused (kept for the contract).

    Building it validates the whole file
    (:func:`~skewlab.workload.trace_check.validate_trace`, once per file version): a file
    with bad rows raises :class:`~skewlab.workload.trace_check.TraceError` naming the first
    ones unless ``bad="skip"``, which replays only the valid rows. ``events(n)``
    yields exactly the first ``n`` (valid) rows; if the file has fewer,
    ``loop=True`` replays it again (event time continuing after the previous
    pass by one mean inter-arrival gap) and ``loop=False`` raises
    :class:`ConfigError` once it runs out (:meth:`check_length` says so up
    front). Only one chunk of rows is held.
    """

    name: ClassVar[str] = "trace"
    path: str
    seed: int = 0
    format: str = "auto"
    size: int = DEFAULT_SIZE
    loop: bool = False
    bad: str = "fail"

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_size(self.size)
        if self.format not in FORMATS:
            raise ConfigError(
                f"trace: format must be one of {', '.join(FORMATS)}, got {self.format!r}"
            )
        if not isinstance(self.path, str) or not os.path.isfile(self.path):
            raise TraceError(f"trace: file not found: {self.path!r}")
        if not isinstance(self.loop, bool):
            raise ConfigError(f"trace: loop must be true or false, got {self.loop!r}")
        if self.bad not in ON_BAD:
            raise ConfigError(f"trace: bad must be one of {', '.join(ON_BAD)}, got {self.bad!r}")
        check = self.check()
        if not check.ok and self.bad == "fail":
            raise TraceError(
                f"{check.describe()}; fix them, or add bad=skip to replay the "
                f"{check.rows} valid rows without them"
            )

    def check(self) -> TraceCheck:
        """The file's :class:`TraceCheck` (validated once per version of the file)."""
        return checked(self.path, self.format)

    def check_length(self, n: int) -> None:
        """Raise :class:`TraceError` if ``n`` events need more valid rows than the file has
        and it does not loop (what ``events(n)`` would find out only at its end)."""
        rows = self.check().rows
        if n > rows and not self.loop:
            raise TraceError(
                f"{self.path}: trace has {rows} valid events but {n} were asked for; "
                "ask for fewer or set loop=true (trace:path=FILE,loop=true)"
            )

    def resolved_format(self) -> str:
        """``"csv"`` or ``"jsonl"``: ``format``, or what the extension picks for ``auto``."""
        return format_of(self.path, self.format)

    def rows(self) -> Iterator[Row]:
        """The file's valid rows, one at a time (bad rows skipped with ``bad="skip"``,
        else the first one raises :class:`TraceError`: the file changed since it was checked)."""
        first: BadRow | None = None
        skipped = 0
        for item in scan(self.path, self.format):
            if isinstance(item, BadRow):
                if self.bad == "fail":
                    raise TraceError(str(item))
                first = first or item
                skipped += 1
                continue
            yield item
        if first is not None:
            log.warning("trace %s: %d bad row(s) left out (bad=skip), the first: %s",
                        self.path, skipped, first)  # fmt: skip

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """The first ``n`` valid rows as chunks of at most ``chunk`` events.

        ``ts`` is the row's timestamp minus the first one (plus the loop offset of later passes),
        or ``seq / rate`` for rows without timestamps. Raises :class:`ConfigError` on bad
        arguments, and while streaming if the file runs out with ``loop=False``.
        """
        check_stream_args(n, chunk, rate)
        return self._events(n, chunk, float(rate))

    def _passes(self, n: int) -> Iterator[tuple[float, Row]]:
        """``(time offset of the pass, row)`` until ``n`` rows, looping if allowed."""
        offset = 0.0
        done = 0
        while done < n:
            first = last = None
            count = 0
            for row in self.rows():
                if row[1] is not None:
                    if first is None:
                        first = row[1]
                    last = row[1]
                count += 1
                yield offset, row
                done += 1
                if done >= n:
                    return
            if count == 0:
                raise ConfigError(f"{self.path}: trace is empty")
            if not self.loop:
                raise ConfigError(
                    f"{self.path}: trace has {count} events but {n} were asked for; "
                    f"ask for fewer or set loop=true"
                )
            if first is not None and last is not None:
                span = last - first
                offset += span + (span / (count - 1) if count > 1 else 1.0)

    def _events(self, n: int, chunk: int, rate: float) -> Iterator[EventChunk]:
        vocab = KeyVocab()
        keys: list[str] = []
        tss: list[float] = []
        sizes: list[int] = []
        seq0 = 0
        origin: float | None = None
        for offset, (key, ts, size) in self._passes(n):
            if ts is not None:
                if origin is None:
                    origin = ts
                tss.append(ts - origin + offset)
            keys.append(key)
            sizes.append(self.size if size is None else size)
            if len(keys) == chunk:
                yield self._chunk(seq0, keys, tss, sizes, vocab, rate)
                seq0 += len(keys)
                keys, tss, sizes = [], [], []
        if keys:
            yield self._chunk(seq0, keys, tss, sizes, vocab, rate)

    @staticmethod
    def _chunk(
        seq0: int, keys: list[str], tss: list[float], sizes: list[int], vocab: KeyVocab, rate: float
    ) -> EventChunk:
        if tss:
            ts = np.asarray(tss, dtype=np.float64)
        else:
            ts = np.arange(seq0, seq0 + len(keys), dtype=np.int64) / rate
        return EventChunk(
            seq0, KeyBatch(vocab.encode(keys), vocab), ts, np.asarray(sizes, dtype=np.int64)
        )

    def spec(self) -> str:
        """``trace:<path>``, or ``trace:path=<path>,...`` with the non-default params."""
        extras = []
        if self.format != "auto":
            extras.append(f"format={self.format}")
        if self.size != DEFAULT_SIZE:
            extras.append(f"size={self.size}")
        if self.loop:
            extras.append("loop=true")
        if self.bad != "fail":
            extras.append(f"bad={self.bad}")
        if not extras:
            return f"trace:{self.path}"
        return f"trace:path={self.path}," + ",".join(extras)

    PARAMS: ClassVar[dict[str, type]] = {
        "path": str,
        "format": str,
        "size": int,
        "loop": bool,
        "bad": str,
    }

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> TraceWorkload:
        """Build from ``<path>`` or
        ``path=<path>[,format=csv|jsonl][,size=..][,loop=true][,bad=fail|skip]``."""
        joined = ",".join(args)
        if not joined.lower().startswith("path="):
            if not joined.strip():
                raise ConfigError("trace: give the file, e.g. trace:/data/events.csv")
            return cls(path=joined.strip(), seed=seed)
        positional, params = parse_params(cls.name, args, cls.PARAMS)
        if positional:
            raise ConfigError(
                f"trace: unexpected {positional[0]!r}; use path=..,format=..,size=..,loop=..,bad=.."
            )
        for name in ("format", "bad"):
            if name in params:
                params[name] = params[name].lower()
        return cls(seed=seed, **params)


def check_events(workload: object, n: int) -> None:
    """Refuse a run of ``n`` events that ``workload`` cannot supply (a trace shorter than
    ``n`` valid rows that does not loop: :meth:`TraceWorkload.check_length`); any other
    workload generates as many events as asked and passes."""
    if isinstance(workload, TraceWorkload):
        workload.check_length(n)
