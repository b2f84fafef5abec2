"""Validation of a trace file: every row parsed, bad rows named by ``file:line``.

:func:`validate_trace` reads a CSV or JSON-lines trace once (formats in
:mod:`skewlab.workload.trace`) and returns a :class:`TraceCheck`: the valid
rows counted, every bad row as ``file:line: reason`` (not UTF-8, a CSV error
such as a field over the csv module's limit, a missing column, a key empty or
over :data:`MAX_KEY_BYTES`, a timestamp that is not a finite number or goes
back, a bad size, JSON that is not an object of the allowed fields). A file
that cannot be used at all raises :class:`TraceError` (one line).
"""

from __future__ import annotations

import codecs
import csv
import functools
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from skewlab.errors import ConfigError

__all__ = [
    "BadRow",
    "Row",
    "TraceCheck",
    "TraceError",
    "check_values",
    "checked",
    "scan",
    "validate_trace",
]

FORMATS = ("auto", "csv", "jsonl")
_TS_NAMES = ("timestamp", "ts")
IGNORED_COLUMNS = frozenset({"value"})
"""Columns (CSV header) and fields (JSON lines) a trace may carry and replay leaves out: the
event's value, which no grouping reads."""
_COLUMNS = {"key", "size", *_TS_NAMES, *IGNORED_COLUMNS}

MAX_KEY_BYTES = 1024
"""Longest key in UTF-8 bytes; the live pipeline quarantines longer keys (the same
limit as :data:`skewlab.pipeline.events.MAX_KEY_BYTES`), so a trace row refuses them."""
MAX_SPAN_S = 253_402_300_799.0
"""Largest event time (``timestamp - first timestamp``) the pipeline represents
(:data:`skewlab.pipeline.events.MAX_TS`)."""
MAX_SIZE = 2**63 - 1
"""Largest size in bytes (an int64 column)."""
LISTED = 100
"""Bad rows a :class:`TraceCheck` keeps (all are counted)."""
SHOWN = 3
"""Bad rows an error line names."""

Row = tuple[str, float | None, int | None]
"""``(key, timestamp or None, size or None)`` of one trace row."""


class TraceError(ConfigError):
    """A trace cannot be replayed; the one-line message names ``file:line`` and the reason."""


@dataclass(frozen=True)
class BadRow:
    """One row that cannot be replayed: ``file:line`` and why."""

    path: str
    line: int
    reason: str

    @property
    def where(self) -> str:
        """``file:line`` of the row."""
        return f"{self.path}:{self.line}"

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True)
class TraceCheck:
    """What :func:`validate_trace` found: ``rows`` valid rows and ``bad_rows`` bad ones,
    the first :data:`LISTED` of them in ``bad`` in file order."""

    path: str
    format: str
    rows: int
    bad_rows: int
    bad: tuple[BadRow, ...]

    def __post_init__(self) -> None:
        if self.rows < 0 or self.bad_rows < len(self.bad) or len(self.bad) > LISTED:
            raise ConfigError(
                f"trace check of {self.path}: counts do not fit ({self.rows} rows, "
                f"{self.bad_rows} bad, {len(self.bad)} listed)"
            )

    @property
    def ok(self) -> bool:
        """Every row is valid."""
        return self.bad_rows == 0

    def describe(self) -> str:
        """One line: the counts and the first :data:`SHOWN` bad rows."""
        head = f"trace {self.path}: {self.bad_rows} bad row(s) of {self.rows + self.bad_rows}"
        if not self.bad:
            return head
        more = self.bad_rows - SHOWN
        shown = "; ".join(str(b) for b in self.bad[:SHOWN])
        return f"{head}: {shown}" + (f"; and {more} more" if more > 0 else "")


class _Bad(Exception):
    """A row-level problem (the reason, without ``file:line``)."""


def _show(raw: Any, limit: int = 40) -> str:
    text = repr(raw)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


def _parse_ts(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise _Bad(f"timestamp must be a number of seconds, got {_show(raw)}")
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        raise _Bad(f"timestamp must be a number of seconds, got {_show(raw)}") from None
    if not math.isfinite(value):
        raise _Bad(f"timestamp must be finite, got {_show(raw)}")
    return value


def _parse_size(raw: Any) -> int:
    problem = f"size must be an integer number of bytes in 0..2^63-1, got {_show(raw)}"
    if isinstance(raw, bool | float):
        raise _Bad(problem)
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise _Bad(problem) from None
    if not 0 <= value <= MAX_SIZE:
        raise _Bad(problem)
    return value


def _parse_key(raw: Any) -> str:
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise _Bad(f"key must be a string or an integer, got {_show(raw)}")
    try:
        key = str(raw).strip()
    except ValueError:  # an integer over Python's digit limit
        raise _Bad("key is an integer too long to write out") from None
    if not key:
        raise _Bad("key is empty")
    try:
        n = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise _Bad(f"key is not valid Unicode (a lone surrogate): {_show(key)}") from None
    if n > MAX_KEY_BYTES:
        raise _Bad(f"key is {n} bytes; at most {MAX_KEY_BYTES}")
    return key


class _Order:
    """Timestamps of the valid rows never decrease and stay within :data:`MAX_SPAN_S`."""

    def __init__(self) -> None:
        self.first: float | None = None
        self.prev = -math.inf

    def check(self, ts: float | None) -> None:
        if ts is None:
            return
        if ts < self.prev:
            raise _Bad(f"timestamp {ts} is before the previous row's {self.prev}")
        if self.first is not None and ts - self.first > MAX_SPAN_S:
            raise _Bad(f"timestamp {ts} is more than {MAX_SPAN_S:.0f} s after the first row's")

    def take(self, ts: float | None) -> None:
        if ts is not None:
            self.first = ts if self.first is None else self.first
            self.prev = ts


def _lines(path: str) -> Iterator[tuple[int, str | None, str]]:
    """``(line number, text or None, why not)`` of each physical line, decoded as UTF-8."""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if lineno == 1 and raw.startswith(codecs.BOM_UTF8):
                raw = raw[len(codecs.BOM_UTF8) :]
            try:
                yield lineno, raw.decode("utf-8"), ""
            except UnicodeDecodeError as e:
                bad = f"byte 0x{raw[e.start]:02x} at column {e.start + 1}"
                yield lineno, None, f"not valid UTF-8 ({bad})"


def _csv_scan(path: str) -> Iterator[Row | BadRow]:
    undecoded: list[BadRow] = []

    def text() -> Iterator[str]:
        for lineno, line, why in _lines(path):
            if line is None:
                undecoded.append(BadRow(path, lineno, why))
                yield "\n"  # a blank line in its place keeps the reader's line numbers
            else:
                yield line

    reader = csv.reader(text())
    columns: dict[str, int] = {}
    width = -1
    order = _Order()
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            yield from undecoded
            undecoded.clear()
            yield BadRow(path, reader.line_num, f"not valid CSV ({e})")
            continue
        yield from undecoded
        undecoded.clear()
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
                raise TraceError(
                    f"{where}: {width} fields; expected key[,timestamp][,size] "
                    f"or a header naming key, timestamp, size"
                )
            columns = {k: i for k, i in {"key": 0, "timestamp": 1, "size": 2}.items() if i < width}
        try:
            if len(fields) != width:
                raise _Bad(f"{len(fields)} fields, expected {width}")
            key = _parse_key(fields[columns["key"]])
            ts_col = next((columns[n] for n in _TS_NAMES if n in columns), None)
            ts = None if ts_col is None else _parse_ts(fields[ts_col].strip())
            size_col = columns.get("size")
            size = None if size_col is None else _parse_size(fields[size_col].strip())
            order.check(ts)
        except _Bad as e:
            yield BadRow(path, reader.line_num, str(e))
            continue
        order.take(ts)
        yield key, ts, size
    yield from undecoded


def _json_row(line: str) -> tuple[Row, str | None]:
    """One JSON line as a row and the name of its timestamp field; raises :class:`_Bad`."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise _Bad(f"not valid JSON ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # digit limit, nesting depth
        raise _Bad(f"not valid JSON ({type(e).__name__}: {_show(str(e), 60)})") from None
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object, got {type(obj).__name__}")
    if "key" not in obj:
        raise _Bad('missing "key"')
    unknown = set(obj) - _COLUMNS
    if unknown:
        raise _Bad(
            f"unknown field(s) {_show(', '.join(sorted(unknown)))}; "
            "allowed: key, timestamp (or ts), size, value"
        )
    ts_name = next((n for n in _TS_NAMES if n in obj), None)
    key = _parse_key(obj["key"])
    ts = None if ts_name is None else _parse_ts(obj[ts_name])
    size = _parse_size(obj["size"]) if "size" in obj else None
    return (key, ts, size), ts_name


def _jsonl_scan(path: str) -> Iterator[Row | BadRow]:
    shape: tuple[bool, bool] | None = None  # (has timestamp, has size), fixed by the first row
    order = _Order()
    for lineno, line, why in _lines(path):
        if line is None:
            yield BadRow(path, lineno, why)
            continue
        if not line.strip():
            continue
        try:
            row, ts_name = _json_row(line)
            has = (ts_name is not None, row[2] is not None)
            if shape is not None and has[0] != shape[0]:
                raise _Bad(
                    f"timestamp {'missing' if shape[0] else 'present'} but the first row "
                    f"{'has' if shape[0] else 'has none'}"
                )
            if shape is not None and has[1] != shape[1]:
                raise _Bad(
                    f"size {'missing' if shape[1] else 'present'} but the first row "
                    f"{'has' if shape[1] else 'has none'}"
                )
            order.check(row[1])
        except _Bad as e:
            yield BadRow(path, lineno, str(e))
            continue
        shape = has
        order.take(row[1])
        yield row


def check_values(path: str, items: Iterable[tuple[int, Any, Any, Any]]) -> Iterator[Row | BadRow]:
    """The rows of already-parsed ``(line, key, timestamp or None, size or None)`` values
    (a Parquet file's columns, a Kafka sample), checked by the same rules as a CSV or JSON
    line: a bad key, timestamp or size, or a timestamp going back, is a :class:`BadRow`
    naming ``path:line``."""
    order = _Order()
    for line, raw_key, raw_ts, raw_size in items:
        try:
            key = _parse_key(raw_key)
            ts = None if raw_ts is None else _parse_ts(raw_ts)
            size = None if raw_size is None else _parse_size(raw_size)
            order.check(ts)
        except _Bad as e:
            yield BadRow(path, line, str(e))
            continue
        order.take(ts)
        yield key, ts, size


def format_of(path: str, fmt: str) -> str:
    """``fmt`` if explicit, else by extension: ``jsonl`` for .jsonl/.ndjson/.json, else ``csv``.

    Raises :class:`ConfigError` if ``fmt`` is not one of :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"trace: format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if fmt != "auto":
        return fmt
    ext = os.path.splitext(path)[1].lower()
    return "jsonl" if ext in (".jsonl", ".ndjson", ".json") else "csv"


def scan(path: str, fmt: str) -> Iterator[Row | BadRow]:
    """The valid rows and the bad rows of the file, in file order."""
    return _jsonl_scan(path) if format_of(path, fmt) == "jsonl" else _csv_scan(path)


def validate_trace(path: str, format: str = "auto") -> TraceCheck:
    """Read ``path`` once and return its :class:`TraceCheck`.

    Raises :class:`TraceError` (one line) when the file cannot be used at all:
    not found or unreadable, empty, a first CSV row that is neither a header
    nor ``key[,timestamp][,size]``, or not one valid row (the first bad ones named).
    """
    fmt = format_of(path, format)
    if not os.path.isfile(path):
        raise TraceError(f"trace: file not found: {path!r}")
    rows = bad_rows = 0
    bad: list[BadRow] = []
    try:
        for item in scan(path, fmt):
            if isinstance(item, BadRow):
                bad_rows += 1
                if len(bad) < LISTED:
                    bad.append(item)
            else:
                rows += 1
    except OSError as e:
        raise TraceError(f"trace {path}: cannot read it ({e.strerror or e})") from None
    check = TraceCheck(path, fmt, rows, bad_rows, tuple(bad))
    if rows == 0:
        if bad_rows == 0:
            raise TraceError(f"{path}: trace is empty")
        raise TraceError(f"{check.describe()}; no valid row")
    return check


@functools.lru_cache(maxsize=16)
def _cached_check(path: str, fmt: str, stamp: tuple[int, int, int]) -> TraceCheck:
    return validate_trace(path, fmt)


def checked(path: str, format: str = "auto") -> TraceCheck:
    """:func:`validate_trace`, read once per version of the file (size, mtime, inode)."""
    try:
        st = os.stat(path)
    except OSError:
        return validate_trace(path, format)
    return _cached_check(path, format, (st.st_size, st.st_mtime_ns, st.st_ino))
