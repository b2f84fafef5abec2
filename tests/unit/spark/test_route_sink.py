"""What the route sink builds from a batch, checked against the per-row reference.

* every routed record decodes (as a worker decodes it) to the routed event's values,
  and its headers name its source, message set or end of set;
* ``key_loads`` / ``partition_loads`` built with Arrow group-bys equal the per-row
  reference (:func:`skewlab.pipeline.route.key_loads`) row for row;
* the typed writers refuse a column the Delta schema does not have;
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import KEY_LOADS
from skewlab.pipeline import events
from skewlab.pipeline.route import key_loads as reference_key_loads
from skewlab.spark import tables
from skewlab.spark.task_route import json_strings, routed_records
from skewlab.spark.writes import HEADER_PREFIX

pytestmark = pytest.mark.unit

FAST = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

keys = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=6),
    st.text(min_size=1, max_size=4).filter(
        lambda k: k.encode("utf-8", "ignore") == k.encode("utf-8", "surrogatepass")
    ),
)
rows = st.lists(
    st.tuples(
        keys,
        st.floats(min_value=0, max_value=events.MAX_TS),
        st.integers(0, events.MAX_INT64),
        st.integers(0, 10**6),
        st.integers(-1, 3),
    ),
    min_size=1,
    max_size=30,
)


def batch(data: list[tuple], kinds: list[int] | None = None) -> pa.Table:
    n = len(data)
    kinds = kinds or [1] * n
    return pa.table(
        {
            "src_partition": pa.array([i % 2 for i in range(n)], pa.int32()),
            "src_offset": pa.array(range(n), pa.int64()),
            "worker": pa.array([r[4] for r in data], pa.int64()),
            "key": pa.array([r[0] for r in data], pa.string()),
            "ts": pa.array([r[1] for r in data], pa.float64()),
            "seq": pa.array([r[2] for r in data], pa.int64()),
            "size": pa.array([r[3] for r in data], pa.int64()),
            "raw": pa.nulls(n, pa.binary()),
            "reason": pa.nulls(n, pa.string()),
            "set_id": pa.array([i % 3 for i in range(n)], pa.int64()),
            "source": pa.array([(i + 1) % 4 for i in range(n)], pa.int64()),
            "kind": pa.array(kinds, pa.int32()),
        }
    )


@given(st.lists(keys, min_size=1, max_size=20))
@FAST
def test_json_strings_are_json_dumps(ks):
    assert json_strings(pa.array(ks, pa.string())).to_pylist() == [json.dumps(k) for k in ks]


@given(rows)
@FAST
def test_routed_records_decode_to_the_routed_events(data):
    t = batch(data)
    out = routed_records(t)
    kept = [r for r in data if r[4] >= 0]
    assert out.column("partition").to_pylist() == [r[4] for r in kept]
    dec = events.decode(out.column("value").to_pylist(), routed=True)
    assert dec.rejects == []
    assert dec.keys == [r[0] for r in kept]
    assert dec.ts == [r[1] for r in kept]
    assert dec.seq == [r[2] for r in kept]
    assert dec.sizes == [r[3] for r in kept]
    assert out.column("key").to_pylist() == [r[0].encode() for r in kept]
    src = out.column(HEADER_PREFIX + events.SRC_HEADER).to_pylist()
    idx = [i for i, r in enumerate(data) if r[4] >= 0]
    assert [events.parse_src([(events.SRC_HEADER, h)]) for h in src] == [(i % 2, i) for i in idx]
    name = HEADER_PREFIX + events.SET_HEADER
    sets = out.column(name).to_pylist() if name in out.column_names else [None] * len(idx)
    assert sets == [f"{i % 3}:{(i + 1) % 4}".encode() if i % 3 else None for i in idx]


def test_markers_carry_only_the_end_of_set_header():
    data = [("a", 1.0, 1, 10, 2), ("a", 1.0, -1, 0, 1), ("b", 2.0, 2, 10, 0)]
    out = routed_records(batch(data, kinds=[1, 0, 1]))
    assert out.column("value").to_pylist()[1] == b""
    assert out.column(HEADER_PREFIX + events.EOS_HEADER).to_pylist() == [None, b"1:2:1", None]
    assert out.column(HEADER_PREFIX + events.SRC_HEADER).to_pylist()[1] is None
    assert out.column(HEADER_PREFIX + events.SET_HEADER).to_pylist()[1] is None


@given(rows, st.sampled_from([0.001, 1.0, 15.0, 3600.0]))
@FAST
def test_key_loads_equal_the_per_row_reference(data, window_s):
    good = [r for r in data if r[4] >= 0]
    t = batch(good) if good else batch([("k", 0.0, 0, 0, 0)]).slice(0, 0)
    got = tables.key_loads("run", t, window_s)
    ref = reference_key_loads(
        window_s,
        np.array([r[1] for r in good], np.float64),
        [r[0] for r in good],
        np.array([r[4] for r in good], np.int64),
        np.array([r[3] for r in good], np.int64),
    )
    expect = Counter(
        {
            (round(r["window_start"] * 1000), r["key"], r["worker"]): (r["count"], r["bytes"])
            for r in ref
        }
    )
    cols = got.to_pydict()
    assert got.schema == KEY_LOADS.schema
    assert set(cols["run_id"]) <= {"run"}
    actual = Counter(
        {
            (w, k, wk): (c, b)
            for w, k, wk, c, b in zip(
                cols["window_start"], cols["key"], cols["worker"], cols["count"], cols["bytes"]
            )
        }
    )
    assert actual == expect
    pl = tables.partition_loads("run", got, "routed", window_s).to_pydict()
    per = Counter()
    for (w, _, wk), (c, b) in expect.items():
        per[(w, wk, "records")] += c
        per[(w, wk, "bytes")] += b
    for w, p, b, n, rate in zip(
        pl["window_start"], pl["partition"], pl["bytes"], pl["records"], pl["bytes_per_s"]
    ):
        assert (per[(w, p, "bytes")], per[(w, p, "records")]) == (b, n)
        assert rate == b / window_s


def test_typed_writers_refuse_columns_the_schema_lacks_or_needs():
    with pytest.raises(ConfigError, match="unknown columns"):
        tables.KEY_LOADS_WRITER.build("r", 1, window_start=[1], key=["k"], worker=[0],
                                      count=[1], bytes=[1], extra=[1])  # fmt: skip
    with pytest.raises(ConfigError, match="'bytes' missing"):
        tables.KEY_LOADS_WRITER.build("r", 1, window_start=[1], key=["k"], worker=[0], count=[1])
    with pytest.raises(ConfigError, match="has 2 values"):
        tables.KEY_LOADS_WRITER.build("r", 1, window_start=[1, 2], key=["k"], worker=[0],
                                      count=[1], bytes=[1])  # fmt: skip
