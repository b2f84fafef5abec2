"""The wire format of an input event and its validation.

An event on topic ``events`` is a JSON object ``{"key": str, "ts": float,
"seq": int, "payload": str}``: ``ts`` is the producer's wall time in seconds,
``seq`` the event's position in the produced stream. :func:`decode` never
raises on bad input: each record either decodes into values the whole pipeline
represents exactly (Arrow strings, int64, finite float64, int64 window
milliseconds) or gets a reason from :data:`REASONS`, and the caller sends
rejects to the ``quarantine`` table.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import numpy as np

DEFAULT_MAX_BYTES = 64 * 1024
"""Records above this size are quarantined as ``too-large``."""

MAX_KEY_BYTES = 1024
"""Keys longer than this (UTF-8 bytes) are quarantined as ``key-too-large``: a key is a
Kafka record key, a Delta column value and a hash input for every event of it."""

MAX_TS = 253_402_300_799.0
"""The largest accepted ``ts`` (9999-12-31T23:59:59 UTC). Any ``0 <= ts <= MAX_TS`` is
an exact float64, and its window start in milliseconds (``floor(ts / w) * w * 1000``,
at most ``ts * 1000`` ~ 2.5e14) fits int64 for every window ``w`` above 1e-280 s."""

MAX_INT64 = 2**63 - 1
"""The largest accepted ``seq`` (and routed ``size``): the Arrow / Delta column is int64."""

REASONS = (
    "too-large",
    "not-utf8",
    "not-json",
    "not-object",
    "missing-key",
    "bad-key",
    "key-too-large",
    "bad-ts",
    "bad-seq",
    "bad-payload",
    "empty",
)
"""Every reason a record can be quarantined for.

``not-utf8``: the bytes are not UTF-8; ``not-json``: not JSON (or nested too deeply,
or a number beyond Python's digit limit); ``bad-key``: not a non-empty string, or a
string UTF-8 cannot encode (a lone surrogate such as ``"\\ud800"``); ``bad-ts``: not
a number in ``[0, MAX_TS]`` (``Infinity``, ``NaN``, ``1e300``, a 401-digit integer);
``bad-seq``: not an integer in ``[0, MAX_INT64]``; ``bad-payload``: a ``payload`` that
is not a string UTF-8 can encode."""


def encode(key: str, ts: float, seq: int, payload: str = "") -> bytes:
    """One event as UTF-8 JSON bytes."""
    return json.dumps(
        {"key": key, "ts": ts, "seq": seq, "payload": payload}, separators=(",", ":")
    ).encode("utf-8")


def padding(size: int, key: str) -> str:
    """A payload that brings an encoded event to about ``size`` bytes."""
    overhead = 48 + len(key)
    return "x" * max(0, size - overhead)


class RoutedEncoder:
    """Encodes routed events fast: each key is JSON-escaped once, then reused.

    A routed event is the input event without its payload, carrying the input's
    ``size`` (what the workers sum). Invariant: ``encode(...)`` equals
    :func:`encode_routed` byte for byte.
    """

    def __init__(self, max_keys: int = 100_000) -> None:
        self._keys: dict[str, str] = {}
        self._max = max_keys

    def encode(self, key: str, ts: float, seq: int, size: int) -> bytes:
        """The routed event's JSON bytes (same as :func:`encode_routed`); the escape cache
        is cleared when it holds ``max_keys`` keys."""
        js = self._keys.get(key)
        if js is None:
            if len(self._keys) >= self._max:
                self._keys.clear()
            js = self._keys[key] = json.dumps(key)
        return f'{{"key":{js},"ts":{ts!r},"seq":{seq},"size":{size}}}'.encode()


def encode_routed(key: str, ts: float, seq: int, size: int) -> bytes:
    """A routed event (see :class:`RoutedEncoder`)."""
    return json.dumps(
        {"key": key, "ts": ts, "seq": seq, "size": size}, separators=(",", ":")
    ).encode("utf-8")


@dataclass(slots=True)
class Decoded:
    """Columns of the valid records and the rejects (index into the input, reason)."""

    index: list[int] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    ts: list[float] = field(default_factory=list)
    seq: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    rejects: list[tuple[int, str]] = field(default_factory=list)


def _utf8_len(text: str) -> int | None:
    """Bytes of ``text`` in UTF-8, ``None`` if it cannot be encoded (lone surrogates)."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _finite_ts(ts: object) -> bool:
    if isinstance(ts, bool) or not isinstance(ts, int | float):
        return False
    # int vs float comparisons are exact in Python, so a 401-digit int is simply > MAX_TS.
    return 0 <= ts <= MAX_TS and (isinstance(ts, int) or math.isfinite(ts))


def _int64(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT64


def _reason(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return "not-object"
    if "key" not in obj or obj["key"] is None:
        return "missing-key"
    key = obj["key"]
    if not isinstance(key, str) or not key:
        return "bad-key"
    n = _utf8_len(key)
    if n is None:
        return "bad-key"
    if n > MAX_KEY_BYTES:
        return "key-too-large"
    if not _finite_ts(obj.get("ts")):
        return "bad-ts"
    if not _int64(obj.get("seq")):
        return "bad-seq"
    payload = obj.get("payload", "")
    if not isinstance(payload, str) or _utf8_len(payload) is None:
        return "bad-payload"
    return None


def decode(
    values: Sequence[bytes | None], max_bytes: int = DEFAULT_MAX_BYTES, routed: bool = False
) -> Decoded:
    """Decode record values; invalid ones become ``rejects`` with a reason, in input order.

    Contract: never raises for any ``bytes`` / ``None`` values. Every index lands in
    exactly one of ``index`` or ``rejects``; an accepted record has a non-empty key of
    at most :data:`MAX_KEY_BYTES` UTF-8 bytes, ``0 <= ts <= MAX_TS`` (finite),
    ``0 <= seq <= MAX_INT64`` and equals its JSON values exactly (an integer ``ts``
    below ``MAX_TS`` is an exact float). ``routed=True`` reads records of ``routed``
    (:func:`encode_routed`): their ``size`` (an int64) is the size of the input event
    they stand for.
    """
    out = Decoded()
    for i, raw in enumerate(values):
        if raw is None or len(raw) == 0:
            out.rejects.append((i, "empty"))
            continue
        if len(raw) > max_bytes:
            out.rejects.append((i, "too-large"))
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            out.rejects.append((i, "not-utf8"))
            continue
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            out.rejects.append((i, "not-json"))
            continue
        reason = _reason(obj)
        if reason is not None:
            out.rejects.append((i, reason))
            continue
        out.index.append(i)
        out.keys.append(obj["key"])
        out.ts.append(float(obj["ts"]))
        out.seq.append(int(obj["seq"]))
        size = obj.get("size") if routed else None
        out.sizes.append(size if _int64(size) else len(raw))
    return out


_NUMBER = r"(?:0|[1-9][0-9]{0,11})(?:\.[0-9]{1,30})?"
_INT = r"(?:0|[1-9][0-9]{0,17})"
_TEXT = r'[^"\\\x00-\x1f]'
_CANONICAL = (
    rf'^\{{"key":"(?P<key>{_TEXT}+)","ts":(?P<ts>{_NUMBER}),"seq":(?P<seq>{_INT})'
    rf'(?:,"payload":"{_TEXT}*")?\}}$'
)
_CANONICAL_ROUTED = (
    rf'^\{{"key":"(?P<key>{_TEXT}+)","ts":(?P<ts>{_NUMBER}),"seq":(?P<seq>{_INT})'
    rf',"size":(?P<size>{_INT})\}}$'
)
"""The shapes :func:`encode` / :func:`encode_routed` write for an ASCII key without
escapes: every record they match is valid, with values the regex groups give exactly
(a ``ts`` of at most 12 integer digits, an int64 ``seq`` / ``size`` of at most 18)."""


def decode_arrow(values: Any, max_bytes: int = DEFAULT_MAX_BYTES, routed: bool = False) -> Any:
    """:func:`decode` for an Arrow binary array, vectorised; one output row per input row.

    Returns a ``pyarrow.Table`` with columns ``key`` (string), ``ts`` (float64),
    ``seq`` (int64), ``size`` (int64) and ``reason`` (string): a valid record has a
    null ``reason`` and the values :func:`decode` gives it; a rejected one has null
    key / ts / seq, its reason, and ``size`` = its byte length (0 for null).

    Contract: row for row the same verdict, values and reason as :func:`decode`.
    Records in the canonical shape (:data:`_CANONICAL`: ASCII, no escapes, plain
    numbers) are parsed by Arrow kernels (regex extract, string -> number casts,
    which round exactly as Python's ``float``); every other record goes through
    :func:`decode` itself.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(values, pa.binary())
    if values.type != pa.binary():
        values = values.cast(pa.binary())
    n = len(values)
    lengths = pc.fill_null(pc.binary_length(values), 0).cast(pa.int64())
    text = values.view(pa.string())
    ascii_ok = pc.and_(
        pc.and_(pc.is_valid(values), pc.less_equal(lengths, max_bytes)),
        pc.fill_null(pc.string_is_ascii(pc.fill_null(text, "\x80")), False),
    )
    cand = np.flatnonzero(ascii_ok.to_numpy(zero_copy_only=False))
    pattern = _CANONICAL_ROUTED if routed else _CANONICAL
    parts = pc.extract_regex(text.take(pa.array(cand, pa.int64())), pattern)
    matched = parts.is_valid()
    cand, parts = cand[matched.to_numpy(zero_copy_only=False)], parts.filter(matched)
    key = parts.field("key")
    ts = pc.cast(parts.field("ts"), pa.float64())
    good = pc.and_(pc.less_equal(pc.binary_length(key), MAX_KEY_BYTES), pc.less_equal(ts, MAX_TS))
    fast = cand[good.to_numpy(zero_copy_only=False)]
    parts, key, ts = parts.filter(good), key.filter(good), ts.filter(good)
    seq = pc.cast(parts.field("seq"), pa.int64())
    size_fast = (
        pc.cast(parts.field("size"), pa.int64())
        if routed
        else lengths.take(pa.array(fast, pa.int64()))
    )
    fast_cols = [key, ts, seq, size_fast]
    if len(fast) == n:
        return pa.table(
            [*fast_cols, pa.nulls(n, pa.string())], names=["key", "ts", "seq", "size", "reason"]
        )
    slow = np.setdiff1d(np.arange(n, dtype=np.int64), fast, assume_unique=True)
    slow_values = values.take(pa.array(slow, pa.int64())).to_pylist()
    dec = decode(slow_values, max_bytes=max_bytes, routed=routed)
    m = len(slow)
    s_key: list[str | None] = [None] * m
    s_ts: list[float | None] = [None] * m
    s_seq: list[int | None] = [None] * m
    s_size = [len(v) if v is not None else 0 for v in slow_values]
    s_reason: list[str | None] = [None] * m
    for j, i in enumerate(dec.index):
        s_key[i], s_ts[i], s_seq[i], s_size[i] = dec.keys[j], dec.ts[j], dec.seq[j], dec.sizes[j]
    for i, r in dec.rejects:
        s_reason[i] = r
    both = pa.table(
        {
            "key": pa.chunked_array([fast_cols[0], pa.array(s_key, pa.string())]),
            "ts": pa.chunked_array([fast_cols[1], pa.array(s_ts, pa.float64())]),
            "seq": pa.chunked_array([fast_cols[2], pa.array(s_seq, pa.int64())]),
            "size": pa.chunked_array([fast_cols[3], pa.array(s_size, pa.int64())]),
            "reason": pa.chunked_array(
                [pa.nulls(len(fast), pa.string()), pa.array(s_reason, pa.string())]
            ),
        }
    )
    order = np.empty(n, dtype=np.int64)
    order[np.concatenate([fast, slow])] = np.arange(n, dtype=np.int64)
    return both.take(pa.array(order)).combine_chunks()


SRC_HEADER = "skewlab.src"
"""Header of a routed record naming its source ``"<partition>:<offset>"`` in ``events``."""


def src_header(partition: int, offset: int) -> tuple[str, bytes]:
    """The header a routed record carries so a worker can drop replays."""
    return (SRC_HEADER, f"{partition}:{offset}".encode("ascii"))


def parse_src(headers: Sequence[tuple[str, bytes]]) -> tuple[int, int]:
    """(partition, offset) from a routed record's headers; ValueError if absent."""
    for name, value in headers:
        if name == SRC_HEADER:
            p, _, o = value.decode("ascii").partition(":")
            return int(p), int(o)
    raise ValueError(f"routed record has no {SRC_HEADER!r} header")


PRODUCER_HEADER = "skewlab.producer"
"""Header of an input event sent by a run's own producer: the run's ``events`` topic (unique
to the run). A record of ``events`` without it was written from outside the run."""


def producer_mark(topic: str) -> tuple[str, bytes]:
    """The header a run's producer puts on each event it sends to ``topic``."""
    return (PRODUCER_HEADER, topic.encode("utf-8"))


def marked(headers: Sequence[tuple[str, bytes | None]] | None, topic: str) -> bool:
    """Whether a record of ``topic`` with ``headers`` came from the run's own producer."""
    want = topic.encode("utf-8")
    return any(n == PRODUCER_HEADER and v == want for n, v in headers or ())


SET_HEADER = "skewlab.set"
"""Header of a routed record of a moved key: ``"<set id>:<source worker>"``."""

EOS_HEADER = "skewlab.eos"
"""Header of an end-of-set marker: ``"<set id>:<next worker>:<splitter>"`` (record key = key)."""

HANDOFF_HEADER = "skewlab.handoff"
"""Header of a hand-off record: ``"<set id>:<from worker>"``; value = the state JSON."""

END_HEADER = "skewlab.end"
"""Header of the end-of-stream record the route job sends every worker when it stops."""


def header(headers: Sequence[tuple[str, bytes]], name: str) -> str | None:
    """The value of header ``name`` as text, or ``None``."""
    for n, v in headers:
        if n == name:
            return v.decode("ascii")
    return None
