"""Per-splitter state in Spark's state store: the pattern the route job uses.

:func:`route_with_state` keeps one pickled grouping state per splitter (source
partition) across micro-batches and restarts, on ``applyInPandasWithState`` or
``transformWithStateInPandas``. Steps and APIs: docs/throughput.md,
"skewlab.spark.state".
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

    Steps: docs/throughput.md, "skewlab.spark.state". ``output_schema`` (DDL or StructType) is
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
