"""The flush's operator_state rows as Arrow columns keep every value as given."""

from __future__ import annotations

from skewlab.live.worker.rows import state_table


def test_state_table_keeps_each_row_and_its_missing_buffer() -> None:
    rows = [("a", b'{"n":1}', None), ("b", b'{"n":2}', b'{"1":[]}')]
    t = state_table(iter(rows), version=7, worker=3, tau=1234)
    assert t.to_pylist() == [
        {"checkpoint": 7, "instance": 3, "key": k, "value": v, "tau": 1234, "buffered": b}
        for k, v, b in rows
    ]


def test_an_empty_flush_is_an_empty_table_with_the_columns() -> None:
    t = state_table(iter([]), version=1, worker=0, tau=0)
    assert t.num_rows == 0
    assert t.column_names == ["checkpoint", "instance", "key", "value", "tau", "buffered"]
