"""Per-splitter state in Spark's state store: the pattern the route job uses.

The route job keeps one grouping object per *splitter* (one source partition of
``events``). Its state must survive micro-batches and query restarts, so it lives in
Spark's state store (RocksDB, checkpointed with the query), never in Python globals.
:func:`route_with_state` is the one helper; per micro-batch and per splitter it:

1. loads the splitter's previous state (``None`` on the first batch), unpickled;
2. concatenates the splitter's rows of this micro-batch into one pandas frame, sorted
   by ``order_by`` (the source offset: Spark's shuffle does not keep order);
3. calls ``fn(key, state, rows) -> (new_state, out_rows)``;
4. stores ``pickle.dumps(new_state)`` as the group's single binary value and emits
   ``out_rows`` (a pandas frame matching ``output_schema``).

For a grouping, ``fn`` is ``g = cfg.build(state=snap)``, route the rows in order, and
return ``(g.snapshot(), rows_with_worker)``: ``snapshot()`` is immutable and picklable
by contract (``skewlab.grouping.base``), which is exactly what step 4 stores.

Two Spark APIs implement the same steps (``api=``):

``"applyInPandasWithState"`` (default): ``GroupState`` holding one ``binary`` column.
    Stable since Spark 3.4, runs with any state store provider.
``"transformWithStateInPandas"``: a ``StatefulProcessor`` with one ``ValueState``.
    New in 4.0; needs the RocksDB provider and ``protobuf`` (ENVIRONMENT.md).

Both store the state with the checkpoint of the query, so a restarted query continues
with the state of its last committed batch. A batch replayed after a crash runs ``fn``
again from the state before that batch (the state store version is per batch).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.state import GroupState
    from pyspark.sql.types import StructType

StateFn = Callable[[tuple[Any, ...], Any, "pd.DataFrame"], tuple[Any, "pd.DataFrame"]]
"""``fn(key, state_or_None, rows) -> (new_state, out_rows)`` for one group and batch."""

STATE_SCHEMA = "snapshot binary"
APIS = ("applyInPandasWithState", "transformWithStateInPandas")


def group_rows(chunks: Iterator[pd.DataFrame], order_by: str | None) -> pd.DataFrame:
    """One frame of a group's chunks, sorted by ``order_by``.

    Columns are joined with ``numpy.concatenate`` rather than ``pd.concat``, which
    checks every all-null object column cell by cell (the route job's ``raw`` and
    ``reason`` columns, null but for rejects: the costliest step of a batch in the
    profile of docs/throughput.md).
    """
    import pandas as pd

    parts = list(chunks)
    if len(parts) == 1:
        rows = parts[0]
    else:
        rows = pd.DataFrame(
            {c: np.concatenate([p[c].to_numpy() for p in parts]) for c in parts[0].columns}
        )
    if order_by is not None:
        rows = rows.sort_values(order_by, kind="stable", ignore_index=True)
    return rows


def _group_state_fn(
    fn: StateFn, order_by: str | None
) -> Callable[[Any, Iterable[pd.DataFrame], GroupState], Iterable[pd.DataFrame]]:
    def run(key: Any, chunks: Iterable[pd.DataFrame], state: GroupState) -> Iterator[pd.DataFrame]:
        previous = pickle.loads(state.get[0]) if state.exists else None
        new, out = fn(key, previous, group_rows(iter(chunks), order_by))
        state.update((pickle.dumps(new),))
        yield out

    return run


def _stateful_processor(fn: StateFn, order_by: str | None) -> Any:
    """A ``StatefulProcessor`` with one ``ValueState`` (built lazily: pyspark import)."""
    from pyspark.sql.streaming.stateful_processor import (
        StatefulProcessor,
        StatefulProcessorHandle,
        TimerValues,
    )

    class SnapshotProcessor(StatefulProcessor):
        def init(self, handle: StatefulProcessorHandle) -> None:
            self.snapshot = handle.getValueState("snapshot", STATE_SCHEMA)

        def handleInputRows(
            self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
        ) -> Iterator[pd.DataFrame]:
            stored = self.snapshot.get() if self.snapshot.exists() else None
            previous = pickle.loads(stored[0]) if stored is not None else None
            new, out = fn(key, previous, group_rows(rows, order_by))
            self.snapshot.update((pickle.dumps(new),))
            yield out

        def close(self) -> None:
            pass

    return SnapshotProcessor()


def route_with_state(
    df: DataFrame,
    key_cols: Sequence[str],
    fn: StateFn,
    output_schema: StructType | str,
    order_by: str | None = None,
    api: str = "applyInPandasWithState",
) -> DataFrame:
    """Group ``df`` by ``key_cols`` and run ``fn`` per group and micro-batch with its state.

    See the module docstring for the steps. ``output_schema`` (DDL or StructType) is
    the schema of the frames ``fn`` returns; the result is a streaming DataFrame in
    update mode, to be written with ``foreachBatch`` or a sink such as Kafka.
    """
    if not key_cols:
        raise ConfigError("route_with_state needs at least one key column")
    grouped = df.groupBy(*key_cols)
    if api == "applyInPandasWithState":
        return grouped.applyInPandasWithState(
            _group_state_fn(fn, order_by),
            outputStructType=output_schema,
            stateStructType=STATE_SCHEMA,
            outputMode="update",
            timeoutConf="NoTimeout",
        )
    if api == "transformWithStateInPandas":
        return grouped.transformWithStateInPandas(
            statefulProcessor=_stateful_processor(fn, order_by),
            outputStructType=output_schema,
            outputMode="Update",
            timeMode="None",
        )
    raise ConfigError(f"unknown state api {api!r}; valid: {', '.join(APIS)}")
