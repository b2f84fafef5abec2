"""Replay of a user's trace file (CSV or JSON lines), streamed row by row.

Accepted formats (chosen by ``format``, or by extension when ``"auto"``:
``.jsonl`` / ``.ndjson`` / ``.json`` are JSON lines, anything else CSV):

- **CSV**: columns ``key[,timestamp][,size]``. If the first row consists only
  of column names (``key``, ``timestamp`` or ``ts``, ``size``) it is a header
  and fixes the columns (in any order); otherwise columns are positional.
  Every row must have as many fields as the first one. Blank lines are skipped.
- **JSON lines**: one object per line with ``"key"`` (string or integer) and
  optionally ``"timestamp"`` (or ``"ts"``, seconds) and ``"size"`` (bytes).
  Whether rows carry a timestamp / size is fixed by the first row.

Timestamps are seconds; the stream's event time is ``timestamp - first
timestamp`` and must never decrease. Without timestamps, ``ts = seq / rate``.
Without sizes, every event is ``size`` bytes. A malformed row raises
:class:`~skewlab.errors.ConfigError` naming ``file:line`` and the problem.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

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

FORMATS = ("auto", "csv", "jsonl")
_TS_NAMES = ("timestamp", "ts")
_COLUMNS = {"key", "size", *_TS_NAMES}

Row = tuple[str, float | None, int | None]
"""``(key, timestamp or None, size or None)`` of one trace row."""


def _parse_ts(raw: Any, where: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ConfigError(f"{where}: timestamp must be a number of seconds, got {raw!r}")
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{where}: timestamp must be a number of seconds, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{where}: timestamp must be finite, got {raw!r}")
    return value


def _parse_size(raw: Any, where: str) -> int:
    if isinstance(raw, bool | float):
        raise ConfigError(f"{where}: size must be an integer number of bytes >= 0, got {raw!r}")
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where}: size must be an integer number of bytes >= 0, got {raw!r}"
        ) from None
    if value < 0:
        raise ConfigError(f"{where}: size must be an integer number of bytes >= 0, got {raw!r}")
    return value


def _parse_key(raw: Any, where: str) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ConfigError(f"{where}: key must be a string or an integer, got {raw!r}")
    key = str(raw).strip()
    if not key:
        raise ConfigError(f"{where}: key is empty")
    return key


def _check_order(ts: float | None, prev: float, where: str) -> float:
    """Timestamps never decrease; returns the new previous timestamp."""
    if ts is None:
        return prev
    if ts < prev:
        raise ConfigError(f"{where}: timestamp {ts} is before the previous row's {prev}")
    return ts


def _csv_rows(path: str) -> Iterator[Row]:
    prev = -math.inf
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        columns: dict[str, int] | None = None
        width = -1
        for fields in reader:
            where = f"{path}:{reader.line_num}"
            if not fields or (len(fields) == 1 and not fields[0].strip()):
                continue
            if width < 0:
                width = len(fields)
                names = [x.strip().lower() for x in fields]
                if "key" in names and set(names) <= _COLUMNS and len(set(names)) == len(names):
                    columns = {n: i for i, n in enumerate(names)}
                    continue
                if width > 3:
                    raise ConfigError(
                        f"{where}: {width} fields; expected key[,timestamp][,size] "
                        f"or a header naming key, timestamp, size"
                    )
                columns = {"key": 0, "timestamp": 1, "size": 2}
                columns = {k: i for k, i in columns.items() if i < width}
            if len(fields) != width:
                raise ConfigError(f"{where}: {len(fields)} fields, expected {width}")
            assert columns is not None
            key = _parse_key(fields[columns["key"]], where)
            ts_col = next((columns[n] for n in _TS_NAMES if n in columns), None)
            ts = None if ts_col is None else _parse_ts(fields[ts_col].strip(), where)
            size_col = columns.get("size")
            size = None if size_col is None else _parse_size(fields[size_col].strip(), where)
            prev = _check_order(ts, prev, where)
            yield key, ts, size


def _jsonl_rows(path: str) -> Iterator[Row]:
    has_ts: bool | None = None
    has_size: bool | None = None
    prev = -math.inf
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            where = f"{path}:{lineno}"
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"{where}: not valid JSON ({e.msg})") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{where}: expected a JSON object, got {type(obj).__name__}")
            if "key" not in obj:
                raise ConfigError(f'{where}: missing "key"')
            unknown = set(obj) - _COLUMNS
            if unknown:
                raise ConfigError(
                    f"{where}: unknown field(s) {', '.join(sorted(unknown))}; "
                    f"allowed: key, timestamp (or ts), size"
                )
            ts_name = next((n for n in _TS_NAMES if n in obj), None)
            if has_ts is None:
                has_ts, has_size = ts_name is not None, "size" in obj
            if has_ts != (ts_name is not None):
                raise ConfigError(
                    f"{where}: timestamp {'missing' if has_ts else 'present'} but the first row "
                    f"{'has' if has_ts else 'has none'}"
                )
            if has_size != ("size" in obj):
                raise ConfigError(
                    f"{where}: size {'missing' if has_size else 'present'} but the first row "
                    f"{'has' if has_size else 'has none'}"
                )
            key = _parse_key(obj["key"], where)
            ts = None if ts_name is None else _parse_ts(obj[ts_name], where)
            size = _parse_size(obj["size"], where) if has_size else None
            prev = _check_order(ts, prev, where)
            yield key, ts, size


@dataclass(frozen=True, kw_only=True)
class TraceWorkload:
    """Replays ``path`` (see module doc for formats); ``seed`` is unused (kept for the contract).

    ``events(n)`` yields exactly the first ``n`` rows; if the file has fewer,
    ``loop=True`` replays it again (event time continuing after the previous
    pass by one mean inter-arrival gap) and ``loop=False`` raises
    :class:`ConfigError` once it runs out. Only one chunk of rows is held.
    """

    name: ClassVar[str] = "trace"
    path: str
    seed: int = 0
    format: str = "auto"
    size: int = DEFAULT_SIZE
    loop: bool = False

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_size(self.size)
        if self.format not in FORMATS:
            raise ConfigError(
                f"trace: format must be one of {', '.join(FORMATS)}, got {self.format!r}"
            )
        if not isinstance(self.path, str) or not os.path.isfile(self.path):
            raise ConfigError(f"trace: file not found: {self.path!r}")
        if not isinstance(self.loop, bool):
            raise ConfigError(f"trace: loop must be true or false, got {self.loop!r}")

    def resolved_format(self) -> str:
        if self.format != "auto":
            return self.format
        ext = os.path.splitext(self.path)[1].lower()
        return "jsonl" if ext in (".jsonl", ".ndjson", ".json") else "csv"

    def rows(self) -> Iterator[Row]:
        """The file's rows, parsed and validated, one at a time."""
        if self.resolved_format() == "jsonl":
            return _jsonl_rows(self.path)
        return _csv_rows(self.path)

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
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
        extras = []
        if self.format != "auto":
            extras.append(f"format={self.format}")
        if self.size != DEFAULT_SIZE:
            extras.append(f"size={self.size}")
        if self.loop:
            extras.append("loop=true")
        if not extras:
            return f"trace:{self.path}"
        return f"trace:path={self.path}," + ",".join(extras)

    PARAMS: ClassVar[dict[str, type]] = {"path": str, "format": str, "size": int, "loop": bool}

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> TraceWorkload:
        """Build from ``<path>`` or ``path=<path>[,format=csv|jsonl][,size=..][,loop=true]``."""
        joined = ",".join(args)
        if not joined.lower().startswith("path="):
            if not joined.strip():
                raise ConfigError("trace: give the file, e.g. trace:/data/events.csv")
            return cls(path=joined.strip(), seed=seed)
        positional, params = parse_params(cls.name, args, cls.PARAMS)
        if positional:
            raise ConfigError(
                f"trace: unexpected {positional[0]!r}; use path=..,format=..,size=..,loop=.."
            )
        if "format" in params:
            params["format"] = params["format"].lower()
        return cls(seed=seed, **params)
