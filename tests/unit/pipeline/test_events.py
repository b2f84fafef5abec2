import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.pipeline import events

pytestmark = pytest.mark.unit


@given(
    key=st.text(min_size=1, max_size=40),
    ts=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    seq=st.integers(min_value=0, max_value=2**62),
    size=st.integers(min_value=0, max_value=500),
)
@settings(max_examples=60)
def test_round_trip(key, ts, seq, size):
    raw = events.encode(key, ts, seq, events.padding(size, key))
    out = events.decode([raw])
    assert out.rejects == []
    assert (out.keys, out.ts, out.seq, out.sizes) == ([key], [ts], [seq], [len(raw)])


def test_padding_brings_event_near_size():
    raw = events.encode("DE", 1.5, 7, events.padding(200, "DE"))
    assert 190 <= len(raw) <= 210


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "empty"),
        (None, "empty"),
        (b"{not json", "not-json"),
        (b"\xff\xfe", "not-utf8"),
        ('{"key": "a", "ts": 1, "seq": 1}'.encode("utf-16"), "not-utf8"),
        (b'{"key": "\xed\xa0\x80", "ts": 1, "seq": 1}', "not-utf8"),
        (b"[1,2]", "not-object"),
        (b'{"ts": 1, "seq": 1}', "missing-key"),
        (b'{"key": null, "ts": 1, "seq": 1}', "missing-key"),
        (b'{"key": 5, "ts": 1, "seq": 1}', "bad-key"),
        (b'{"key": "", "ts": 1, "seq": 1}', "bad-key"),
        (b'{"key": "a", "ts": "x", "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": -1, "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": true, "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": 1, "seq": 1.5}', "bad-seq"),
        (b'{"key": "a", "ts": 1}', "bad-seq"),
        (b'{"key": "a", "ts": 1, "seq": true}', "bad-seq"),
        (b'{"key": "a", "ts": 1, "seq": -1}', "bad-seq"),
        (b'{"key": "a", "ts": 1, "seq": 9223372036854775808}', "bad-seq"),
        (b'{"key": "a", "ts": NaN, "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": -Infinity, "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": 1e400, "seq": 1}', "bad-ts"),
        (b'{"key": "a", "ts": 253402300800, "seq": 1}', "bad-ts"),
        (b'{"key": "\\udfff", "ts": 1, "seq": 1}', "bad-key"),
        (b'{"key": "' + b"k" * 1025 + b'", "ts": 1, "seq": 1}', "key-too-large"),
        (b'{"key": "a", "ts": 1, "seq": 1, "payload": 7}', "bad-payload"),
        (b'{"key": "a", "ts": 1, "seq": 1, "payload": "x\\ud800"}', "bad-payload"),
    ],
)
def test_each_kind_of_bad_record_gets_its_reason(raw, reason):
    assert reason in events.REASONS
    good = events.encode("k", 1.0, 1)
    out = events.decode([good, raw, good])
    assert out.rejects == [(1, reason)]
    assert out.index == [0, 2]


def test_too_large_is_rejected_before_parsing():
    big = json.dumps({"key": "a", "ts": 1, "seq": 1, "payload": "x" * 100}).encode()
    out = events.decode([big], max_bytes=50)
    assert out.rejects == [(0, "too-large")]


def test_src_header_round_trip_and_absence():
    name, value = events.src_header(3, 12345)
    assert events.parse_src([("other", b"x"), (name, value)]) == (3, 12345)
    with pytest.raises(ValueError, match=events.SRC_HEADER):
        events.parse_src([("other", b"x")])


def test_routed_events_carry_the_input_size():
    raw = events.encode("k", 2.5, 9, events.padding(300, "k"))
    routed = events.encode_routed("k", 2.5, 9, len(raw))
    assert len(routed) < len(raw)
    out = events.decode([routed], routed=True)
    assert (out.keys, out.ts, out.seq, out.sizes) == (["k"], [2.5], [9], [len(raw)])
    # an input event cannot claim a size: outside routed records the field is ignored
    claim = b'{"key":"k","ts":1,"seq":1,"size":5}'
    assert events.decode([claim]).sizes == [len(claim)]


@given(
    key=st.text(min_size=1, max_size=20),
    ts=st.floats(min_value=0, max_value=4e9, allow_nan=False),
    seq=st.integers(min_value=0, max_value=2**62),
    size=st.integers(min_value=0, max_value=10**6),
)
@settings(max_examples=80)
def test_fast_routed_encoder_matches_the_reference(key, ts, seq, size):
    fast = events.RoutedEncoder(max_keys=3)
    assert fast.encode(key, ts, seq, size) == events.encode_routed(key, ts, seq, size)
    assert json.loads(fast.encode(key, ts, seq, size)) == {
        "key": key,
        "ts": ts,
        "seq": seq,
        "size": size,
    }
