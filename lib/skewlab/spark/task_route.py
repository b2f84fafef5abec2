"""The route job's splitters in the read's Spark tasks: one Spark job per micro-batch.

:func:`route_task_fn` is the ``mapInArrow`` function of one micro-batch, built on the
driver for that batch (:class:`TaskPlan`: the batch id, the ``assignments`` versions);
Spark's Kafka sink sends what it yields in the same task. In each task:

1. the task's rows (partition, offset, value), one source partition at a time as they
   come in (:func:`partition_runs`), are decoded (:func:`~skewlab.spark.route.decode_table`);
2. each source partition, in offset order, is routed from its state after the newest
   earlier batch (:meth:`PartitionStates.before`; :func:`route_partition`);
3. its new state is saved as ``<states>/<partition>/<batch>`` (fsynced, renamed) and its
   events and rejects as ``<loads>/<batch>/<partition>`` (:func:`save_loads`): a retried
   task or a replayed batch rewrites both identically;
4. its routed records are yielded in offset order (markers before their event), in the
   columns of Spark's Kafka sink (:func:`routed_records`).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.errors import ConfigError
from skewlab.pipeline import events
from skewlab.pipeline.route import AssignmentVersion
from skewlab.spark.route import ROUTED_SCHEMA, RouteSettings, decode_table, splitter_fn
from skewlab.spark.writes import HEADER_PREFIX, kafka_frame

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

KAFKA_SCHEMA = (
    "partition int, key binary, value binary, headers array<struct<key: string, value: binary>>"
)
"""The rows the task yields: the columns Spark's Kafka sink reads (``partition`` = worker)."""

KAFKA_COLUMNS = ["partition", "key", "value", "headers"]
""":data:`KAFKA_SCHEMA`'s columns in its order: Spark takes ``mapInArrow``'s columns by
position, not by name."""

LOADS_COLUMNS = ["src_partition", "src_offset", "worker", "key", "ts", "size", "raw", "reason"]
"""The columns of a partition's events kept for the batch's Delta rows (:func:`save_loads`)."""

SplitFn = Callable[[tuple[Any, ...], Any, Any], tuple[Any, Any]]
"""``fn(key, state_or_None, rows) -> (new_state, out_rows)``: a splitter function."""


def _write_atomically(path: Path, data: bytes, fsync: bool) -> None:
    """``data`` into ``path`` through a temporary file of this process, then a rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    tmp.replace(path)


def _batch_ids(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


class PartitionStates:
    """Splitter state per source partition and micro-batch: ``<folder>/<partition>/<batch>``.

    :meth:`before` gives the state a partition starts a batch from (its newest file below
    the batch); :meth:`save` writes its state after a batch (fsynced, renamed) and deletes
    the files no replay can need any more (a batch runs once every earlier one is committed).
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def before(self, partition: int, batch_id: int) -> Any:
        """The state of ``partition`` as of its newest saved batch ``< batch_id`` (or ``None``)."""
        older = [b for b in _batch_ids(self.folder / str(partition)) if b < batch_id]
        if not older:
            return None
        with open(self.folder / str(partition) / str(older[-1]), "rb") as f:
            return pickle.load(f)

    def save(self, partition: int, batch_id: int, state: Any) -> None:
        """Write the state of ``partition`` after ``batch_id``; keep it and the newest before."""
        folder = self.folder / str(partition)
        _write_atomically(
            folder / str(batch_id), pickle.dumps(state, pickle.HIGHEST_PROTOCOL), fsync=True
        )
        saved = _batch_ids(folder)
        older = [b for b in saved if b < batch_id]
        for b in older[:-1]:
            (folder / str(b)).unlink(missing_ok=True)


def save_loads(folder: Path, batch_id: int, partition: int, routed: pa.Table) -> None:
    """The events of one partition's routed rows (:data:`LOADS_COLUMNS`, markers left out)
    as ``<folder>/<batch>/<partition>`` (Arrow IPC). Read back on the driver in the same
    batch (:func:`read_loads`), before Spark commits it, so not fsynced: a crash before
    that replays the batch, which writes the file again."""
    t = routed.filter(pc.equal(routed.column("kind"), 1)).select(LOADS_COLUMNS)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, t.schema) as w:
        w.write_table(t)
    _write_atomically(folder / str(batch_id) / str(partition), sink.getvalue().to_pybytes(), False)


def read_loads(folder: Path, batch_id: int) -> pa.Table | None:
    """Every partition's events of ``batch_id`` saved by :func:`save_loads`, or ``None``
    when the batch had no rows."""
    where = folder / str(batch_id)
    parts = _batch_ids(where)
    if not parts:
        return None
    return pa.concat_tables(pa.ipc.open_file(str(where / str(p))).read_all() for p in parts)


def drop_loads(folder: Path, batch_id: int) -> None:
    """Delete ``batch_id``'s files of :func:`save_loads` (its rows are saved elsewhere now)."""
    where = folder / str(batch_id)
    for p in where.iterdir() if where.is_dir() else ():
        p.unlink(missing_ok=True)
    if where.is_dir():
        where.rmdir()


_PLAIN_KEY = r"^[ !#-\[\]-~]*$"
"""Keys JSON writes as themselves between quotes (printable ASCII but ``"`` and ``\\``)."""


def json_strings(keys: pa.Array) -> pa.Array:
    """``json.dumps(k)`` of every key (Arrow ``string``), vectorised but for keys that
    need escapes, which are encoded once per distinct key."""
    quoted = pc.binary_join_element_wise('"', keys, '"', "")
    plain = pc.match_substring_regex(keys, _PLAIN_KEY)
    if pc.all(plain).as_py() is not False:
        return quoted
    special = pc.unique(keys.filter(pc.invert(plain)))
    encoded = pa.array([json.dumps(k) for k in special.to_pylist()], pa.string())
    return pc.if_else(plain, quoted, encoded.take(pc.index_in(keys, special)))


def _text(arr: Any) -> pa.Array:
    return pc.cast(arr, pa.string())


def routed_records(batch: pa.Table) -> pa.Table:
    """The ``routed`` records of a sorted batch (events with a worker and markers).

    An event's value is :func:`~skewlab.pipeline.events.encode_routed`'s JSON (ts
    written by Arrow's shortest round-trip formatting, so it decodes to the same
    float), its key the event key, its headers ``skewlab.src`` = ``"<partition>:<offset>"``
    and, in a message set, ``skewlab.set`` = ``"<set id>:<source>"``. A marker has an
    empty value and only ``skewlab.eos`` = ``"<set id>:<next worker>:<splitter>"``.
    """
    kind = batch.column("kind")
    keep = pc.or_(pc.equal(kind, 0), pc.greater_equal(batch.column("worker"), 0))
    t = batch.filter(keep).combine_chunks()
    is_marker = pc.equal(t.column("kind"), 0)
    key = t.column("key").combine_chunks()
    value = pc.binary_join_element_wise(
        '{"key":',
        json_strings(key),
        ',"ts":',
        _text(t.column("ts")),
        ',"seq":',
        _text(t.column("seq")),
        ',"size":',
        _text(t.column("size")),
        "}",
        "",
    )
    value = pc.if_else(is_marker, pa.scalar(b"", pa.binary()), pc.cast(value, pa.binary()))
    sp, so = _text(t.column("src_partition")), _text(t.column("src_offset"))
    nulls = pa.nulls(t.num_rows, pa.binary())
    cols: dict[str, Any] = {
        "partition": t.column("worker"),
        "value": value,
        "key": pc.cast(key, pa.binary()),
        HEADER_PREFIX + events.SRC_HEADER: pc.if_else(
            is_marker, nulls, pc.cast(pc.binary_join_element_wise(sp, so, ":"), pa.binary())
        ),
    }
    set_id, source = t.column("set_id"), t.column("source")
    if pc.any(pc.greater(set_id, 0)).as_py() or pc.any(is_marker).as_py():
        pair = pc.binary_join_element_wise(_text(set_id), _text(source), ":")
        in_set = pc.and_(pc.invert(is_marker), pc.greater(set_id, 0))
        cols[HEADER_PREFIX + events.SET_HEADER] = pc.if_else(
            in_set, pc.cast(pair, pa.binary()), nulls
        )
        eos = pc.binary_join_element_wise(pair, sp, ":")
        cols[HEADER_PREFIX + events.EOS_HEADER] = pc.if_else(
            is_marker, pc.cast(eos, pa.binary()), nulls
        )
    return pa.table(cols)


def route_partition(
    rows: pa.Table, fn: SplitFn, partition: int, state: Any
) -> tuple[Any, pa.Table]:
    """Step 2 for one source partition: its decoded rows (offset order) routed by ``fn``
    from ``state``; the new state and the :data:`ROUTED_ARROW` rows in send order
    (offset, then markers before their event)."""
    new, out = fn((partition,), state, rows)
    routed = out if out.schema == ROUTED_ARROW else out.cast(ROUTED_ARROW)
    if not pc.any(pc.equal(routed.column("kind"), 0)).as_py():  # no markers: in offset order
        return new, routed
    return new, routed.sort_by([("src_offset", "ascending"), ("kind", "ascending")])


@dataclass(frozen=True)
class TaskPlan:
    """What a micro-batch's tasks need from the driver (pickled with the task function)."""

    settings: RouteSettings
    batch_id: int
    states: str
    """The folder of :class:`PartitionStates`."""
    loads: str
    """The folder of :func:`save_loads`."""
    versions: tuple[AssignmentVersion, ...] = ()
    """The ``assignments`` versions the message sets route with (read by the driver)."""


def route_table(raw: pa.Table, plan: TaskPlan, fn: SplitFn | None = None) -> Iterator[pa.Table]:
    """Steps 1-4 for a task's raw rows (partition, offset, value): one table of
    :data:`KAFKA_SCHEMA` records per source partition with records, in partition order."""
    if raw.num_rows == 0:
        return
    s = plan.settings
    if fn is None:
        versions: Sequence[AssignmentVersion] = plan.versions
        fn = splitter_fn(s, versions=lambda: versions)
    t = decode_table(raw, s.max_event_bytes)  # step 1
    t = t.sort_by([("partition", "ascending"), ("offset", "ascending")])
    values, counts = pc.value_counts(t.column("partition").combine_chunks()).flatten()
    states, loads = PartitionStates(plan.states), Path(plan.loads)
    start = 0
    for p, n in zip(values.to_pylist(), counts.to_pylist(), strict=True):
        rows = t.slice(start, n)
        start += n
        new, routed = route_partition(rows, fn, p, states.before(p, plan.batch_id))  # step 2
        states.save(p, plan.batch_id, new)  # step 3
        save_loads(loads, plan.batch_id, p, routed)
        records = kafka_frame(routed_records(routed)).select(KAFKA_COLUMNS)  # step 4
        if records.num_rows:
            yield records


def partition_runs(batches: Iterable[Any]) -> Iterator[pa.Table]:
    """The rows of a task's Arrow batches, one table per source partition, as soon as the
    next partition starts: Spark hands a task its Kafka partitions one after another, so
    routing one overlaps reading the next and sending the previous. A partition that
    comes back after another is refused (``ValueError``): its state and files are per
    batch, so its rows must be routed at once."""
    pending: list[Any] = []
    current: int | None = None
    done: set[int] = set()
    for b in batches:
        parts = b.column("partition").to_numpy(zero_copy_only=False)
        if len(parts) == 0:
            continue
        cuts = [0, *(np.flatnonzero(parts[1:] != parts[:-1]) + 1).tolist(), len(parts)]
        for start, end in itertools.pairwise(cuts):
            p = int(parts[start])
            if p != current:
                if pending:
                    yield pa.Table.from_batches(pending)
                    done.add(cast(int, current))
                if p in done:
                    raise ValueError(f"source partition {p} split across a task's input")
                pending, current = [], p
            pending.append(b.slice(start, end - start))
    if pending:
        yield pa.Table.from_batches(pending)


def route_task_fn(plan: TaskPlan) -> Callable[[Iterable[Any]], Iterator[Any]]:
    """The ``mapInArrow`` function of one micro-batch (module doc): each source partition
    routed and sent as soon as its rows are in (:func:`partition_runs`)."""

    def run(batches: Iterable[Any]) -> Iterator[Any]:
        for raw in partition_runs(batches):
            for records in route_table(raw, plan):
                yield from records.to_batches()

    return run
