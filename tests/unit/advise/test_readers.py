"""Trace readers: CSV, JSON lines and Parquet into one Stream, bad rows counted and named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skewlab.advise import read_trace
from skewlab.advise.readers import count_rows, trace_format, write_trace_csv
from skewlab.errors import ConfigError
from skewlab.workload.trace_check import TraceError

pytestmark = pytest.mark.unit

KEYS = ["a", "b", "a", "c", "a"]
TS = [10.0, 10.5, 11.0, 11.0, 12.5]


def _keys(stream) -> list[str]:
    return [stream.vocab.keys[i] for i in stream.ids.tolist()]


def _csv(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "t.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _parquet(tmp_path: Path, columns: dict[str, list]) -> str:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table(columns), path)
    return str(path)


def test_csv_with_header_timestamps_and_a_value_column(tmp_path: Path) -> None:
    rows = [f"{k},{t},payload-{i}" for i, (k, t) in enumerate(zip(KEYS, TS))]
    s = read_trace(_csv(tmp_path, ["key,timestamp,value", *rows]))
    assert _keys(s) == KEYS
    assert s.ts is not None and s.ts.tolist() == [t - TS[0] for t in TS]
    assert s.bad_rows == 0 and s.keys == len(set(KEYS))


def test_csv_bad_rows_are_counted_and_named_by_line(tmp_path: Path) -> None:
    lines = ["key,ts", "a,1", ",2", "b,x", "c,3", "d,2.5", "e,4"]
    s = read_trace(_csv(tmp_path, lines))
    assert _keys(s) == ["a", "c", "e"]
    assert s.bad_rows == 3
    assert [b.split(": ")[0].rsplit(":", 1)[1] for b in s.bad] == ["3", "4", "6"]


def test_jsonl_rows_and_bad_rows(tmp_path: Path) -> None:
    good = [{"key": k, "ts": t, "size": 7, "value": "v"} for k, t in zip(KEYS, TS)]
    lines = [json.dumps(o) for o in good[:2]] + ["not json", '{"ts": 11.0}']
    lines += [json.dumps(o) for o in good[2:]]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    s = read_trace(str(path))
    assert _keys(s) == KEYS and s.sizes.tolist() == [7] * len(KEYS)
    assert s.bad_rows == 2


def test_parquet_columns_and_null_cells(tmp_path: Path) -> None:
    keys = ["a", None, "b", "a", "c"]
    ts = [1.0, 2.0, None, 3.0, 4.0]
    path = _parquet(tmp_path, {"key": keys, "ts": ts, "value": ["x"] * 5})
    assert trace_format(path) == "parquet"
    s = read_trace(path)
    assert _keys(s) == ["a", "a", "c"]
    assert s.bad_rows == 2
    assert s.ts is not None and s.ts.tolist() == [0.0, 2.0, 3.0]


def test_parquet_integer_keys_and_no_timestamps(tmp_path: Path) -> None:
    s = read_trace(_parquet(tmp_path, {"key": [3, 1, 3], "size": [10, 20, 30]}))
    assert _keys(s) == ["3", "1", "3"] and s.ts is None
    assert s.sizes.tolist() == [10, 20, 30]


def test_parquet_without_a_key_column_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        read_trace(_parquet(tmp_path, {"user": ["a"]}))


def test_a_file_without_one_valid_row_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError):
        read_trace(_csv(tmp_path, ["key,ts", ",1", "b,nan"]))


def test_limit_keeps_the_first_valid_rows(tmp_path: Path) -> None:
    s = read_trace(_csv(tmp_path, ["key", "a", "b", "c", "d"]), limit=2)
    assert _keys(s) == ["a", "b"]


def test_unknown_format_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        read_trace(_csv(tmp_path, ["a"]), "xml")


def test_written_csv_reads_back_as_the_same_stream(tmp_path: Path) -> None:
    lines = ["key,timestamp,size", "a,1.0,5", '"x,y",1.5,6', "b,2.25,7"]
    s = read_trace(_csv(tmp_path, lines))
    back = read_trace(str(write_trace_csv(s, tmp_path / "out.csv", len(s))))
    assert _keys(back) == _keys(s)
    assert back.ts is not None and s.ts is not None and np.array_equal(back.ts, s.ts)
    assert back.sizes.tolist() == s.sizes.tolist()
    bare = read_trace(str(write_trace_csv(s, tmp_path / "bare.csv", 2, timestamps=False)))
    assert _keys(bare) == _keys(s)[:2] and bare.ts is None


def test_progress_counts_every_row_read_and_count_rows_estimates_them(tmp_path: Path) -> None:
    path = _csv(tmp_path, ["key,ts", "a,1", ",2", "b,3"])
    seen: list[int] = []
    read_trace(path, progress=seen.append)
    assert seen[-1] == 3  # two valid rows and a bad one
    assert count_rows(path) == 4  # lines, the header included
    assert count_rows(_parquet(tmp_path, {"key": ["a", "b"]})) == 2
