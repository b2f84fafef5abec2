"""The Delta adapter is a Store: the control layer's protocol matches its real methods."""

from __future__ import annotations

import inspect
from pathlib import Path

import pyarrow as pa

from skewlab.io.delta import DeltaStore
from skewlab.pipeline.store import Store


def test_delta_store_satisfies_the_protocol(tmp_path: Path) -> None:
    store = DeltaStore(str(tmp_path))
    assert isinstance(store, Store)
    for name in ("append", "committed_version", "read", "latest_assignments"):
        want = list(inspect.signature(getattr(Store, name)).parameters)
        have = list(inspect.signature(getattr(DeltaStore, name)).parameters)
        assert have[: len(want)] == want, name


def test_a_fresh_store_reads_empty_tables_with_their_schema(tmp_path: Path) -> None:
    store: Store = DeltaStore(str(tmp_path))
    assert store.committed_version("decisions", "x:run") is None
    got = store.latest_assignments("run")
    assert isinstance(got, pa.Table) and got.num_rows == 0 and "key" in got.schema.names
