"""Samples for ``advise``: a Kafka record's key/time/size, and a Delta table read as a Stream."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewlab.advise import AdviseError
from skewlab.io.stream_sample import read_delta, topic_values

pytestmark = pytest.mark.unit


def test_a_json_event_value_gives_key_time_and_size() -> None:
    value = json.dumps({"key": "user-1", "ts": 12.5, "seq": 3, "payload": "x"}).encode()
    assert topic_values(value, b"ignored", 99_000) == ("user-1", 12.5, len(value))
    sized = json.dumps({"key": 7, "timestamp": 1.0, "size": 40}).encode()
    assert topic_values(sized, None, 0) == (7, 1.0, 40)


def test_any_other_value_is_keyed_and_timed_by_the_record() -> None:
    assert topic_values(b"raw bytes", b"k", 2_500) == ("k", 2.5, 9)
    assert topic_values(b"[1, 2]", b"k", 0) == ("k", None, 6)
    assert topic_values(None, None, 0) == (None, None, 0)
    key, _, _ = topic_values(b"x", b"\xff\xfe", 0)
    assert not isinstance(key, str)  # left for the key rule to refuse


def _table(tmp_path: Path, columns: dict[str, list]) -> str:
    pa = pytest.importorskip("pyarrow")
    deltalake = pytest.importorskip("deltalake")
    path = tmp_path / "table"
    deltalake.write_deltalake(str(path), pa.table(columns))
    return str(path)


def test_delta_rows_in_time_order_bad_rows_counted(tmp_path: Path) -> None:
    path = _table(
        tmp_path,
        {"key": ["b", None, "a", "c"], "ts": [2.0, 3.0, 1.0, 4.0], "size": [1, 2, 3, 4]},
    )
    s = read_delta(path)
    assert [s.vocab.keys[i] for i in s.ids.tolist()] == ["a", "b", "c"]
    assert s.bad_rows == 1
    assert s.sizes.tolist() == [3, 1, 4]
    newest = read_delta(path, records=2)
    assert [newest.vocab.keys[i] for i in newest.ids.tolist()] == ["c"]


def test_delta_without_a_key_column_or_a_table_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AdviseError):
        read_delta(_table(tmp_path, {"user": ["a"]}))
    with pytest.raises(AdviseError):
        read_delta(str(tmp_path / "nothing"))
