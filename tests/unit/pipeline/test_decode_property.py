"""Decode never raises, and nothing it accepts can fail further down the route job.

Two properties, over arbitrary bytes and arbitrary JSON (with the issue's poison
records as explicit examples):

1. :func:`skewlab.pipeline.events.decode` returns for every input index exactly one
   outcome: accepted (with the JSON's values, exactly) or rejected with a reason of
   :data:`~skewlab.pipeline.events.REASONS`; a record valid by the wire format's
   rules is never rejected.
2. The route job's path, run without Spark: its ``mapInArrow`` decode function
   (:func:`skewlab.spark.route.decode_fn`, which builds the Arrow arrays), then
   every registered grouping through a :class:`~skewlab.pipeline.route.Splitter`
   (``route_batch`` at the events' ts) with a picklable state, then what the sink
   builds: int64 window milliseconds (``key_loads``), the Kafka key and the routed
   record, which decodes back to the same values.
"""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.pipeline import events
from skewlab.pipeline.route import Splitter, key_loads
from skewlab.pipeline.worker import window_start
from skewlab.spark.route import decode_fn

pytestmark = pytest.mark.unit

WORKERS = 4
MAX_BYTES = events.DEFAULT_MAX_BYTES

POISON: list[bytes] = [
    b'{"key":"poison","ts":Infinity,"seq":1}',
    b'{"key":"\\ud800","ts":1.0,"seq":1}',
    b'{"key":"poison","ts":' + b"9" * 401 + b',"seq":1}',
    b'{"key":"poison","ts":1.0,"seq":%d}' % 2**70,
    b'{"key":"poison","ts":1e300,"seq":1}',
]
"""The five records of issue 18 that stopped the route job."""

# ------------------------------------------------------------------ strategies

chars = st.one_of(
    st.characters(exclude_categories=()),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # lone surrogates
)
texts = st.text(chars, max_size=12)
numbers = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-(10**450), max_value=10**450),
    st.floats(),
    st.sampled_from(
        [
            math.inf,
            -math.inf,
            math.nan,
            1e300,
            -0.0,
            events.MAX_TS,
            math.nextafter(events.MAX_TS, math.inf),
            events.MAX_INT64,
            events.MAX_INT64 + 1,
        ]
    ),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, texts)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=8,
)
keys = st.one_of(
    texts,
    st.text(max_size=8, min_size=1),
    st.sampled_from(["\ud800", "a\udfffb", "k" * (events.MAX_KEY_BYTES + 1), "é" * 600]),
    scalars,
)
event_like = st.fixed_dictionaries(
    {},
    optional={
        "key": keys,
        "ts": st.one_of(numbers, st.floats(0, 4e9), scalars),
        "seq": st.one_of(numbers, st.integers(0, 2**40), scalars),
        "payload": st.one_of(texts, json_values),
        "size": numbers,
    },
)


def serialize(obj: Any, ascii_only: bool) -> bytes:
    """JSON as Python writes it (``Infinity``, ``NaN``); surrogates written raw when not
    escaped, which makes the bytes invalid UTF-8."""
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------ the oracle


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def valid_by_spec(obj: Any) -> bool:
    """The wire format's rules, written from the module doc (not from the code)."""
    if not isinstance(obj, dict):
        return False
    key, ts, seq = obj.get("key"), obj.get("ts"), obj.get("seq")
    payload = obj.get("payload", "")
    return (
        isinstance(key, str)
        and len(key) > 0
        and _encodable(key)
        and len(key.encode("utf-8")) <= events.MAX_KEY_BYTES
        and type(ts) in (int, float)
        and 0 <= ts <= events.MAX_TS  # False for NaN, exact for any int
        and type(seq) is int
        and 0 <= seq <= events.MAX_INT64
        and isinstance(payload, str)
        and _encodable(payload)
    )


def check_decoded(values: list[bytes | None], out: events.Decoded) -> None:
    """Every index accepted or rejected (once, with a known reason); accepted values fit."""
    rejected = [i for i, _ in out.rejects]
    assert sorted(out.index + rejected) == list(range(len(values)))
    assert all(reason in events.REASONS for _, reason in out.rejects)
    assert len(out.keys) == len(out.ts) == len(out.seq) == len(out.sizes) == len(out.index)
    for key, ts, seq in zip(out.keys, out.ts, out.seq):
        assert isinstance(key, str) and 0 < len(key.encode("utf-8")) <= events.MAX_KEY_BYTES
        assert isinstance(ts, float) and math.isfinite(ts) and 0 <= ts <= events.MAX_TS
        assert isinstance(seq, int) and 0 <= seq <= events.MAX_INT64


# ------------------------------------------------------------------ the route job's path


def route_path(values: list[bytes | None], window_s: float) -> tuple[int, int]:
    """The route job's decode + grouping + sink values for ``values``, without Spark.

    Returns (accepted, quarantined); raises whatever the real path would raise.
    """
    n = len(values)
    batch = pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([0] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "value": pa.array(values, pa.binary()),
        }
    )
    decoded = pa.Table.from_batches(list(decode_fn(MAX_BYTES)(iter([batch]))))
    ok = decoded.column("reason").is_null().to_pylist()
    good = decoded.filter(pa.array(ok, pa.bool_()))
    bad = decoded.filter(pa.array([not x for x in ok], pa.bool_()))
    # quarantine rows: a reason, and the raw bytes (null only for a null value)
    assert bad.column("reason").null_count == 0
    assert bad.column("raw").null_count == sum(v is None for v in values)
    keys = good.column("key").to_pylist()
    ts = good.column("ts").to_numpy(zero_copy_only=False)
    seqs = good.column("seq").to_pylist()
    sizes = good.column("size").to_numpy(zero_copy_only=False)
    encoder = events.RoutedEncoder()
    for name in GROUPING_NAMES:
        splitter = Splitter(make_grouping(name, workers=WORKERS))
        workers = splitter.route(keys, ts) if keys else np.empty(0, np.int64)
        assert ((workers >= 0) & (workers < WORKERS)).all()
        pickle.loads(pickle.dumps(splitter.state()))  # the Spark state store pickles it
        rows = key_loads(window_s, ts, keys, workers, sizes)
        pa.array([round(r["window_start"] * 1000) for r in rows], pa.int64())
        pa.array([r["key"] for r in rows], pa.string())
    for k, t, q, z in zip(keys, ts.tolist(), seqs, sizes.tolist()):
        k.encode()  # the Kafka record key of the routed record
        pa.array([round(window_start(t, window_s) * 1000)], pa.int64())  # a worker's window
        back = events.decode([encoder.encode(k, t, q, z)], routed=True)
        assert (back.keys, back.ts, back.seq, back.sizes) == ([k], [t], [q], [z])
    return len(keys), bad.num_rows


windows = st.sampled_from([0.001, 1.0, 15.0, 3600.0, 86400.0 * 365])
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@given(raw=st.lists(st.one_of(st.none(), st.binary(max_size=120)), max_size=6), window_s=windows)
@example(raw=POISON, window_s=15.0)
@FAST
def test_arbitrary_bytes_decode_and_route_without_raising(raw, window_s):
    out = events.decode(raw)
    check_decoded(raw, out)
    accepted, quarantined = route_path(raw, window_s)
    assert (accepted, quarantined) == (len(out.index), len(out.rejects))


@given(
    objs=st.lists(st.one_of(event_like, json_values), min_size=1, max_size=5),
    ascii_only=st.booleans(),
    window_s=windows,
)
@example(objs=[{"key": "\ud800", "ts": 1.0, "seq": 1}], ascii_only=True, window_s=15.0)
@example(objs=[{"key": "k", "ts": 1.0, "seq": 1, "payload": "\ud800"}], ascii_only=True, window_s=1)
@example(objs=[{"key": "k", "ts": math.inf, "seq": 1}], ascii_only=True, window_s=0.001)
@example(objs=[{"key": "k", "ts": 1e300, "seq": 2**70}], ascii_only=True, window_s=0.001)
@FAST
def test_arbitrary_json_is_accepted_exactly_or_quarantined(objs, ascii_only, window_s):
    raw: list[bytes | None] = [serialize(o, ascii_only) for o in objs]
    out = events.decode(raw)
    check_decoded(raw, out)
    for j, i in enumerate(out.index):
        obj = objs[i]
        assert valid_by_spec(obj)
        assert (out.keys[j], out.ts[j], out.seq[j]) == (obj["key"], obj["ts"], obj["seq"])
    for i, reason in out.rejects:
        small = len(raw[i] or b"") <= MAX_BYTES
        utf8 = _encodable(json.dumps(objs[i], ensure_ascii=False))
        assert not (valid_by_spec(objs[i]) and small and utf8), (objs[i], reason)
    route_path(raw, window_s)


def test_the_five_poison_records_are_quarantined_with_their_reasons():
    good = events.encode("k", 1.0, 1)
    out = events.decode([good, *POISON, good])
    assert out.index == [0, 6]
    assert out.rejects == [
        (1, "bad-ts"),
        (2, "bad-key"),
        (3, "bad-ts"),
        (4, "bad-seq"),
        (5, "bad-ts"),
    ]
    assert route_path([good, *POISON, good], 15.0) == (2, 5)


def test_deep_nesting_is_not_json_not_a_recursion_error():
    deep = b"[" * 50_000 + b"]" * 50_000
    assert events.decode([deep], max_bytes=len(deep)).rejects == [(0, "not-json")]


def test_a_megabyte_key_is_key_too_large_even_when_the_record_size_allows_it():
    raw = events.encode("k" * 1_000_000, 1.0, 1)
    assert events.decode([raw]).rejects == [(0, "too-large")]
    assert events.decode([raw], max_bytes=2_000_000).rejects == [(0, "key-too-large")]
    edge = events.encode("é" * (events.MAX_KEY_BYTES // 2), 1.0, 1)
    assert events.decode([edge]).rejects == []


def test_window_milliseconds_fit_int64_at_the_largest_ts_for_tiny_windows():
    for w in (1e-280, 1e-9, 1e-3, 15.0, 1e9):
        ms = window_start(events.MAX_TS, w) * 1000
        assert math.isfinite(ms) and round(ms) <= events.MAX_INT64
        pa.array([round(ms)], pa.int64())
