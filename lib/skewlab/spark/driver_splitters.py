"""The route job's splitters on the driver: state per micro-batch in the checkpoint.

With ``RouteSettings.splitters = "driver"`` the streaming query is only the source
(read + decode, one Spark stage); the ``foreachBatch`` sink routes each source
partition of the batch with the same :func:`~skewlab.spark.route.splitter_fn` the
state-store path runs in Spark, and keeps the splitter states in memory. After each
batch with rows the states are written to ``<checkpoint>/skewlab-splitters/<batch>``
before the sink returns (so before Spark commits the batch); a batch replayed after a
crash starts from the states of the newest file below its id, i.e. as of the last
batch Spark committed, and routes exactly as the first attempt. Why: docs/throughput.md,
"Session 4".
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.errors import ConfigError
from skewlab.spark.route import ROUTED_SCHEMA

log = logging.getLogger(__name__)

DDL_ARROW_TYPES: dict[str, pa.DataType] = {
    "int": pa.int32(),
    "long": pa.int64(),
    "bigint": pa.int64(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
}
"""Spark DDL scalar types and the Arrow type Spark hands them over as."""


def arrow_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a flat Spark DDL schema (``"name type, ..."``, scalar types
    of :data:`DDL_ARROW_TYPES`); :class:`ConfigError` names any other type."""
    fields = []
    for col in ddl.split(","):
        name, _, typ = col.strip().partition(" ")
        arrow = DDL_ARROW_TYPES.get(typ.strip().lower())
        if arrow is None:
            raise ConfigError(
                f"column {name!r}: type {typ.strip()!r} not in {sorted(DDL_ARROW_TYPES)}"
            )
        fields.append((name, arrow))
    return pa.schema(fields)


ROUTED_ARROW = arrow_schema(ROUTED_SCHEMA)
""":data:`~skewlab.spark.route.ROUTED_SCHEMA` as an Arrow schema."""

SplitFn = Callable[[tuple[Any, ...], Any, Any], tuple[Any, Any]]
"""``fn(key, state_or_None, rows) -> (new_state, out_rows)``: a splitter function."""


class SplitterStates:
    """Splitter state per source partition, saved per micro-batch under ``folder``.

    :meth:`before` gives the states a batch starts from (the newest saved batch below
    it); :meth:`save` writes the states after a batch (atomically: temp file, rename)
    and deletes files no replay can need any more.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def _saved(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(int(p.name) for p in self.folder.iterdir() if p.name.isdigit())

    def before(self, batch_id: int) -> dict[int, Any]:
        """States (partition -> state) as of the newest saved batch ``< batch_id``."""
        older = [b for b in self._saved() if b < batch_id]
        if not older:
            return {}
        with open(self.folder / str(older[-1]), "rb") as f:
            states = pickle.load(f)
        if not isinstance(states, dict):
            raise ConfigError(f"splitter states of batch {older[-1]} are not a mapping")
        return states

    def save(self, batch_id: int, states: dict[int, Any]) -> None:
        """Write the states after ``batch_id``; keep it and the newest file before it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / f".{batch_id}.tmp"
        with open(tmp, "wb") as f:
            pickle.dump(states, f, protocol=pickle.HIGHEST_PROTOCOL)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.folder / str(batch_id))
        saved = self._saved()
        older = [b for b in saved if b < batch_id]
        keep = {batch_id, older[-1]} if older else {batch_id}
        for b in saved:
            if b not in keep and b < batch_id:
                (self.folder / str(b)).unlink(missing_ok=True)


def route_decoded(t: pa.Table, fn: SplitFn, states: dict[int, Any]) -> pa.Table:
    """Route a decoded batch (:data:`~skewlab.spark.route.DECODED_SCHEMA`) per source
    partition in offset order with ``fn``; ``states`` (partition -> state) is updated
    in place for every partition with rows. Returns :data:`ROUTED_ARROW` rows."""
    if t.num_rows == 0:
        return ROUTED_ARROW.empty_table()
    t = t.sort_by([("partition", "ascending"), ("offset", "ascending")])
    parts = t.column("partition").combine_chunks()
    values, counts = pc.value_counts(parts).flatten()
    out = []
    start = 0
    for p, n in zip(values.to_pylist(), counts.to_pylist(), strict=True):
        rows = t.slice(start, n).to_pandas()
        start += n
        new, routed = fn((p,), states.get(p), rows)
        states[p] = new
        out.append(pa.Table.from_pandas(routed, schema=ROUTED_ARROW, preserve_index=False))
    return pa.concat_tables(out)
