"""CheckpointStore against a real Delta table (delta-rs) in a temporary directory."""

from __future__ import annotations

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.state_store import CheckpointStore
from skewlab.state import KeyedOperator, StreamTuple, restore

pytestmark = pytest.mark.integration


def parts(checkpoint: int) -> dict:
    """Two instances: one with state and buffered tuples (one key only buffered), one empty."""
    op = KeyedOperator()
    for tau, key in enumerate(["a", "b", "a", "c", "", "d"]):
        op.receive(StreamTuple(tau, key, tau * 1.5))
    op.process(4)
    return {0: op.checkpoint(checkpoint), 1: KeyedOperator(tau=7).checkpoint(checkpoint)}


def test_write_read_round_trip_and_idempotent_rewrite(delta_store: DeltaStore) -> None:
    store = CheckpointStore(delta_store, "run-a", operator="counter")
    original = parts(3)
    assert store.write(3, original) is True
    assert store.write(3, original) is False  # a restarted state manager writes it again
    rows = delta_store.read("operator_state", "run-a")
    assert rows.num_rows == 3 + 2 + 1  # a b c, '' and d only buffered, the empty one's marker
    assert store.read(3) == original
    assert store.checkpoints() == [3] and store.latest() == 3
    assert store.read(4) == {}
    assert CheckpointStore(delta_store, "run-b").latest() is None


def test_restore_from_the_stored_checkpoint_is_exact(delta_store: DeltaStore) -> None:
    log = [StreamTuple(tau, f"k{tau % 5}", 1.0) for tau in range(40)]
    op = KeyedOperator()
    for t in log[:30]:
        op.receive(t)
    op.process(22)
    store = CheckpointStore(delta_store, "run-c")
    store.write(0, {0: op.checkpoint(0)})
    stored = store.read(store.latest() or 0)[0]
    instances = restore(stored, 3, log)
    for i in instances:
        i.process()
    merged = {}
    for i in instances:
        merged.update(i.state())
    assert merged == {f"k{j}": {"count": 8, "sum": 8.0} for j in range(5)}
