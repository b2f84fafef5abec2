"""The vectorised decode gives, row for row, what the reference decode gives.

:func:`skewlab.pipeline.events.decode_arrow` parses canonical records with Arrow
kernels and sends every other record through :func:`~skewlab.pipeline.events.decode`;
the property: for any list of values (arbitrary bytes, arbitrary JSON, canonical
events with any key / number text) both agree on verdict, reason and values.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewlab.pipeline import events

pytestmark = pytest.mark.unit

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def reference(values: list[bytes | None], routed: bool) -> dict[str, list]:
    """decode()'s result laid out as decode_arrow's columns."""
    n = len(values)
    out: dict[str, list] = {
        "key": [None] * n,
        "ts": [None] * n,
        "seq": [None] * n,
        "size": [len(v) if v is not None else 0 for v in values],
        "reason": [None] * n,
    }
    dec = events.decode(values, routed=routed)
    for j, i in enumerate(dec.index):
        out["key"][i], out["ts"][i] = dec.keys[j], dec.ts[j]
        out["seq"][i], out["size"][i] = dec.seq[j], dec.sizes[j]
    for i, reason in dec.rejects:
        out["reason"][i] = reason
    return out


def check(values: list[bytes | None], routed: bool = False) -> None:
    got = events.decode_arrow(pa.array(values, pa.binary()), routed=routed)
    assert got.column_names == ["key", "ts", "seq", "size", "reason"]
    assert got.num_rows == len(values)
    assert got.to_pydict() == reference(values, routed)


digits = st.text("0123456789", min_size=1, max_size=14)
numbers = st.one_of(
    digits,
    st.builds(lambda a, b: f"{a}.{b}", digits, st.text("0123456789", min_size=1, max_size=32)),
    st.floats(min_value=0, max_value=3e11).map(repr),
    st.sampled_from(["0", "01", "1e5", "-1", "253402300799", "253402300800", "NaN", "1.", ".5"]),
)
key_text = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=0, max_size=8),
    st.text(max_size=4),
    st.sampled_from(["k" * 1024, "k" * 1025, 'a"b', "a\\b", "\x7f", "é"]),
)


@st.composite
def canonical_like(draw: st.DrawFn) -> bytes:
    """Records in (or one edit away from) the producer's shape, with raw number text."""
    key = draw(key_text)
    body = f'{{"key":"{key}","ts":{draw(numbers)},"seq":{draw(numbers)}'
    tail = draw(st.sampled_from(["}", ',"payload":"xx"}', ',"payload":"a\\"b"}', ',"size":12}']))
    return (body + tail).encode("utf-8", "surrogatepass")


@given(st.lists(st.one_of(st.none(), st.binary(max_size=80), canonical_like()), max_size=12))
@FAST
def test_decode_arrow_equals_decode(values):
    check(values)


@given(
    st.lists(
        st.builds(
            lambda k, t, q, z: json.dumps(
                {"key": k, "ts": t, "seq": q, "size": z}, separators=(",", ":")
            ).encode(),
            key_text,
            st.floats(min_value=0, max_value=3e11),
            st.integers(0, 2**63),
            st.integers(-5, 2**64),
        ),
        max_size=10,
    )
)
@FAST
def test_decode_arrow_equals_decode_for_routed_records(values):
    check(values, routed=True)


def test_a_producer_batch_takes_the_vectorised_path_and_matches():
    t0 = 1_795_000_000.5
    values = [events.encode(f"k{i % 7}", t0 + i * 1e-6, i, "x" * 30) for i in range(500)]
    check(values)
    check([*values, b"not json", None, b""])
