"""The state rows a worker restores: per key its newest row, picked in Arrow
(``newest_rows``) exactly as ``latest_rows`` picks it in Python."""

from __future__ import annotations

import gc
import random

import pyarrow as pa
import pytest

from skewlab.io.state_store import newest_rows
from skewlab.pipeline.handoff import KeySets, Rec, latest_rows


def _table(history: list[tuple[int, str, bytes, bytes | None]]) -> pa.Table:
    cp, key, value, buffered = (list(c) for c in zip(*history, strict=True))
    return pa.table(
        {
            "checkpoint": pa.array(cp, pa.int64()),
            "key": pa.array(key, pa.string()),
            "value": pa.array(value, pa.binary()),
            "buffered": pa.array(buffered, pa.binary()),
        }
    )


@pytest.mark.parametrize("seed", range(5))
def test_newest_rows_keeps_what_latest_rows_keeps(seed: int) -> None:
    rng = random.Random(seed)
    history = []
    for cp in rng.sample(range(1, 60), 12):  # checkpoints written in no particular order
        for k in rng.sample(range(40), rng.randint(1, 40)):
            buf = f"b{cp}".encode() if rng.random() < 0.3 else None
            history.append((cp, f"k{k}", f"{k}@{cp}".encode(), buf))
    history.append((3, "", b"meta", None))
    t = newest_rows(_table(history))
    got = list(zip(t["key"].to_pylist(), t["value"].to_pylist(), t["buffered"].to_pylist()))
    assert got == latest_rows(history)
    assert len(got) == len({k for _, k, _, _ in history})


def test_newest_rows_of_no_rows_is_empty() -> None:
    assert newest_rows(_table([(1, "k", b"v", None)]).slice(0, 0)).num_rows == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_restoring_rows_leaves_garbage_collection_as_it_was(enabled: bool) -> None:
    a = KeySets(worker=0, splitters=2)
    a.record("k", 0, -1, Rec(1.0, 0, 10, 0))
    a.record("x", 1, 3, Rec(2.0, 1, 10, 1))  # waits for its hand-off: a buffered row
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        back = KeySets.from_rows(0, 2, a.rows())
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
    assert back.rows() == a.rows() and back.buffered() == 1
