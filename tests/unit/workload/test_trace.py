"""Trace replay: CSV and JSON lines, timestamps, sizes, looping, malformed rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.workload import TraceWorkload, parse_workload
from skewlab.workload.trace_check import TraceError

pytestmark = pytest.mark.unit


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _all(w: TraceWorkload, n: int, chunk: int = 2, rate: float = 10.0):
    chunks = list(w.events(n, chunk=chunk, rate=rate))
    keys: list[str] = []
    for c in chunks:
        keys.extend(c.keys.keys())
    ts = np.concatenate([c.ts for c in chunks]) if chunks else np.empty(0)
    sizes = np.concatenate([c.sizes for c in chunks]) if chunks else np.empty(0)
    return chunks, keys, ts, sizes


def test_csv_keys_only_are_timed_by_rate(tmp_path):
    path = _write(tmp_path, "t.csv", "a\nb\n\na\nc\n")
    chunks, keys, ts, sizes = _all(TraceWorkload(path=path), 4, chunk=3, rate=2.0)
    assert keys == ["a", "b", "a", "c"]
    assert [c.seq0 for c in chunks] == [0, 3]
    assert np.allclose(ts, [0.0, 0.5, 1.0, 1.5])
    assert np.all(sizes == 100)
    assert chunks[0].vocab is chunks[1].vocab


def test_csv_positional_timestamp_and_size(tmp_path):
    path = _write(tmp_path, "t.csv", "a,10.0,5\nb,10.5,7\na,12,0\n")
    _, keys, ts, sizes = _all(TraceWorkload(path=path), 3)
    assert keys == ["a", "b", "a"]
    assert np.allclose(ts, [0.0, 0.5, 2.0])
    assert sizes.tolist() == [5, 7, 0]


def test_csv_header_fixes_columns_in_any_order(tmp_path):
    path = _write(tmp_path, "t.csv", 'size,key\n40,"x, y"\n41,z\n')
    _, keys, ts, sizes = _all(TraceWorkload(path=path), 2, rate=1.0)
    assert keys == ["x, y", "z"]
    assert sizes.tolist() == [40, 41]
    assert np.allclose(ts, [0.0, 1.0])


def test_jsonl_rows(tmp_path):
    rows = [{"key": "a", "ts": 3.0, "size": 9}, {"key": 17, "ts": 3.25, "size": 1}]
    path = _write(tmp_path, "t.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    _, keys, ts, sizes = _all(TraceWorkload(path=path), 2)
    assert keys == ["a", "17"]
    assert np.allclose(ts, [0.0, 0.25])
    assert sizes.tolist() == [9, 1]


def test_fewer_rows_than_asked_is_an_error_unless_looping(tmp_path):
    path = _write(tmp_path, "t.csv", "a,0\nb,1\nc,3\n")
    with pytest.raises(ConfigError, match="3 events but 5"):
        _all(TraceWorkload(path=path), 5)
    _, keys, ts, _ = _all(TraceWorkload(path=path, loop=True), 7)
    assert keys == ["a", "b", "c", "a", "b", "c", "a"]
    assert np.all(np.diff(ts) > 0)
    assert np.allclose(ts[3:6] - ts[3], [0.0, 1.0, 3.0])


def test_a_bad_row_refuses_the_trace_up_front_unless_skipped(tmp_path):
    path = _write(tmp_path, "t.csv", "a\nb\nc\nthis,row,is,broken,badly\n")
    with pytest.raises(TraceError, match=r"t\.csv:4: 5 fields, expected 1.*bad=skip"):
        TraceWorkload(path=path)
    _, keys, _, _ = _all(TraceWorkload(path=path, bad="skip"), 3)
    assert keys == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("name", "text", "line", "what"),
    [
        ("bad.csv", "a,1\nb,x\n", 2, "timestamp"),
        ("bad.csv", "a,1,5\nb,2,-3\n", 2, "size"),
        ("bad.csv", "a,1\nb\n", 2, "1 fields, expected 2"),
        ("bad.csv", "a,5\nb,4\n", 2, "before the previous"),
        ("bad.csv", "a\n  \nb\n,\n", 4, "fields"),
        ("bad.csv", "a,1,2,3\n", 1, "4 fields"),
        ("bad.csv", "key,ts\na,1\n,2\n", 3, "key is empty"),
        ("bad.jsonl", '{"key": "a"}\n{"key": \n', 2, "not valid JSON"),
        ("bad.jsonl", '{"key": "a"}\n[1]\n', 2, "JSON object"),
        ("bad.jsonl", '{"key": "a"}\n{"kee": "b"}\n', 2, "missing"),
        ("bad.jsonl", '{"key": "a", "ts": 1}\n{"key": "b"}\n', 2, "timestamp missing"),
        ("bad.jsonl", '{"key": "a"}\n{"key": "b", "size": 3}\n', 2, "size present"),
        ("bad.jsonl", '{"key": "a", "size": 1.5}\n', 1, "size"),
        ("bad.jsonl", '{"key": true}\n', 1, "key"),
        ("bad.jsonl", '{"key": "a", "ts": "soon"}\n', 1, "timestamp"),
        ("bad.jsonl", '{"key": "a", "when": 1}\n', 1, "unknown field"),
    ],
)
def test_malformed_row_names_file_and_line(tmp_path, name, text, line, what):
    path = _write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=f"{name}:{line}: .*{what}"):
        _all(TraceWorkload(path=path), 10, chunk=100)


def test_empty_and_missing_files(tmp_path):
    with pytest.raises(ConfigError, match="empty"):
        _all(TraceWorkload(path=_write(tmp_path, "e.csv", "\n\n")), 1)
    with pytest.raises(ConfigError, match="not found"):
        TraceWorkload(path=str(tmp_path / "nope.csv"))
    with pytest.raises(ConfigError, match="format"):
        TraceWorkload(path=_write(tmp_path, "x.csv", "a\n"), format="xml")


def test_format_by_extension_or_explicit(tmp_path):
    jsonl_as_txt = _write(tmp_path, "t.txt", '{"key": "q"}\n')
    assert TraceWorkload(path=jsonl_as_txt).resolved_format() == "csv"
    _, keys, _, _ = _all(TraceWorkload(path=jsonl_as_txt, format="jsonl"), 1)
    assert keys == ["q"]


def test_spec_round_trip(tmp_path):
    path = _write(tmp_path, "t.csv", "a\n")
    for w in (
        TraceWorkload(path=path),
        TraceWorkload(path=path, size=64, loop=True, format="csv"),
        TraceWorkload(path=path, bad="skip"),
    ):
        assert parse_workload(w.spec()) == w
    assert parse_workload(f"trace:{path}", seed=4) == TraceWorkload(path=path, seed=4)
