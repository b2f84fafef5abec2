"""The splitters in the read's tasks: decisions, states per partition and batch, replay.

* each source partition is routed in offset order from its state after the previous
  batch it had rows in: the decisions equal a :class:`~skewlab.pipeline.route.Splitter`
  per partition carried batch to batch (the reference the live tests replay), whatever
  the order the rows arrive in and however the partitions are split among tasks;
* the records a task yields are its partitions' in offset order, on their worker's
  partition, each naming its source;
* a batch retried or replayed (states read back from the files, also when the first
  attempt saved its own before dying) yields the same records and the same events;
* a batch's events and rejects are left for the driver, once per partition;
* only the state files a replay can need are kept.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import make_grouping
from skewlab.pipeline import events
from skewlab.pipeline.route import Splitter
from skewlab.spark.route import RouteSettings, decode_batch, decode_table, splitter_fn
from skewlab.spark.task_route import (
    KAFKA_SCHEMA,
    ROUTED_ARROW,
    PartitionStates,
    TaskPlan,
    arrow_schema,
    drop_loads,
    partition_runs,
    read_loads,
    route_table,
    route_task_fn,
)
from skewlab.spark.writes import HEADERS_TYPE

pytestmark = pytest.mark.unit

DKG_FAST = {"warmup": 0.5, "check_interval": 0.5, "promotion_interval": 0.5, "old_every": 1}
PARTS = 3


def settings(strategy: str, params: dict[str, Any], message_sets: bool = False) -> RouteSettings:
    return RouteSettings(
        run_id="drv",
        bootstrap="127.0.0.1:9",
        events_topic="events-drv",
        routed_topic="routed-drv",
        workers=4,
        strategy=strategy,
        strategy_params=params,
        delta_root="/nonexistent",
        run_dir="/nonexistent",
        message_sets=message_sets,
    )


def stream(n: int, seed: int) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of ``n`` Zipf-keyed events over 3 s, a few invalid."""
    rng = np.random.default_rng(seed)
    keys = rng.zipf(1.3, n) % 40
    out = []
    for seq in range(n):
        p = seq % PARTS
        value = events.encode(f"k{keys[seq]}", 1_795_000_000.0 + 3.0 * seq / n, seq)
        if seq % 97 == 5:
            value = b"not json"
        out.append((p, seq // PARTS, value))
    return out


def raw(recs: list[tuple[int, int, bytes]], shuffle_seed: int | None) -> pa.Table:
    """The rows in several Arrow batches, shuffled unless ``shuffle_seed`` is None."""
    order = (
        np.arange(len(recs))
        if shuffle_seed is None
        else np.random.default_rng(shuffle_seed).permutation(len(recs))
    )
    b = pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([recs[i][0] for i in order], pa.int32()),
            "offset": pa.array([recs[i][1] for i in order], pa.int64()),
            "value": pa.array([recs[i][2] for i in order], pa.binary()),
        }
    )
    third = max(len(recs) // 3, 1)
    return pa.Table.from_batches([b.slice(0, third), b.slice(third, third), b.slice(2 * third)])


def plan(tmp: Path, s: RouteSettings, batch_id: int) -> TaskPlan:
    return TaskPlan(s, batch_id, str(tmp / "states"), str(tmp / "loads"))


def reference(strategy, params, batches) -> dict[tuple[int, int], int]:
    """(partition, offset) -> worker of valid events, one Splitter per partition."""
    cfg = make_grouping(strategy, workers=4, **params)
    states: dict[int, Any] = {}
    out = {}
    for recs in batches:
        for p in range(PARTS):
            mine = sorted(r for r in recs if r[0] == p)
            dec = events.decode([v for _, _, v in mine])
            valid = [o for (_, o, v) in mine if events.decode([v]).keys]
            if not valid:
                continue
            sp = Splitter(cfg, states.get(p))
            workers = sp.route(dec.keys, dec.ts)
            states[p] = sp.state()
            out.update({(p, o): w for o, w in zip(valid, workers.tolist(), strict=True)})
    return out


def sources(records: pa.Table) -> list[tuple[int, int]]:
    """(partition, offset) of each record's ``skewlab.src`` header (markers: none)."""
    out = []
    for hs in records.column("headers").to_pylist():
        src = [h["value"] for h in hs if h["key"] == events.SRC_HEADER]
        if src:
            p, o = src[0].decode().split(":")
            out.append((int(p), int(o)))
    return out


def decisions(tables: list[pa.Table]) -> dict[tuple[int, int], int]:
    got = {}
    for t in tables:
        assert t.column("headers").type == HEADERS_TYPE
        workers = t.column("partition").to_pylist()
        srcs = sources(t)
        assert len(srcs) == len(workers)  # no markers without message sets
        assert srcs == sorted(srcs)  # offset order
        assert len({p for p, _ in srcs}) == 1  # one source partition per table
        got.update(dict(zip(srcs, workers, strict=True)))
    return got


def batches_of(recs, cuts):
    return [recs[a:b] for a, b in zip([0, *cuts], [*cuts, len(recs)])]


def run_tasks(tmp: Path, s: RouteSettings, b: int, part, seed: int, tasks: int) -> list[pa.Table]:
    """Batch ``b`` of ``part`` as ``tasks`` tasks would run it (partitions dealt among them)."""
    out = []
    for task in range(tasks):
        mine = [r for r in part if r[0] % tasks == task]
        if mine:
            out.extend(route_table(raw(mine, seed), plan(tmp, s, b)))
    return out


@pytest.mark.parametrize(("strategy", "params"), [("key", {}), ("pkg", {}), ("dkg", DKG_FAST)])
@pytest.mark.parametrize("tasks", [1, 2])
def test_decisions_are_a_splitter_per_partition_carried_batch_to_batch(
    tmp_path, strategy, params, tasks
):
    recs = stream(3_000, seed=1)
    batches = batches_of(recs, [700, 1_900])
    s = settings(strategy, params)
    got: dict[tuple[int, int], int] = {}
    rejects = 0
    for b, part in enumerate(batches):
        got.update(decisions(run_tasks(tmp_path, s, b, part, seed=b, tasks=tasks)))
        ev = read_loads(tmp_path / "loads", b)
        assert ev is not None and ev.num_rows == len(part)  # every event once, rejects too
        rejects += sum(1 for w in ev.column("worker").to_pylist() if w < 0)
        drop_loads(tmp_path / "loads", b)
        assert read_loads(tmp_path / "loads", b) is None
    assert got == reference(strategy, params, batches)
    assert rejects == sum(1 for _, _, v in recs if v == b"not json")


def test_replayed_or_retried_batch_routes_as_its_first_attempt(tmp_path):
    recs = stream(2_400, seed=2)
    batches = batches_of(recs, [800, 1_600])
    s = settings("dkg", DKG_FAST)
    attempts = [run_tasks(tmp_path, s, b, part, seed=b, tasks=1) for b, part in enumerate(batches)]
    first_events = read_loads(tmp_path / "loads", 2)
    # Batch 2's states and events were saved, then the process died before Spark's
    # commit: the replay (rows in another order) starts from the states after batch 1.
    again = run_tasks(tmp_path, s, 2, batches[2], seed=7, tasks=1)
    assert [t.equals(a) for t, a in zip(again, attempts[2], strict=True)] == [True] * PARTS
    replayed = read_loads(tmp_path / "loads", 2)
    assert replayed is not None and first_events is not None and replayed.equals(first_events)
    # ... and without the saved states the same batch would route differently.
    fresh = run_tasks(tmp_path / "fresh", s, 2, batches[2], seed=7, tasks=1)
    assert decisions(fresh) != decisions(attempts[2])


def test_message_sets_send_markers_before_their_event_in_offset_order(tmp_path):
    """With message sets, a splitter's end-of-set markers leave ahead of the event that
    moved the key, every record of a table from one source partition in offset order."""
    from skewlab.pipeline.route import AssignmentVersion

    recs = [(0, o, events.encode(f"k{o % 3}", 1_795_000_000.0 + o * 0.01, o)) for o in range(60)]
    s = settings("key", {}, message_sets=True)
    moved = AssignmentVersion(1, 1_795_000_000.0 + 0.3, (("k1", 3, 1),))
    p = TaskPlan(s, 0, str(tmp_path / "states"), str(tmp_path / "loads"), (moved,))
    (t,) = route_table(raw(recs, 3), p)
    hs = [{h["key"]: h["value"] for h in row} for row in t.column("headers").to_pylist()]
    eos = [i for i, h in enumerate(hs) if events.EOS_HEADER in h]
    assert eos, "the move ends a set"
    for i in eos:
        assert t.column("value")[i].as_py() == b""
        src = hs[i + 1][events.SRC_HEADER].decode()
        assert src.startswith("0:") and events.SRC_HEADER not in hs[i]
    offs = [int(h[events.SRC_HEADER].decode().split(":")[1]) for h in hs if events.SRC_HEADER in h]
    assert offs == list(range(60))


def test_a_splitter_routes_arrow_rows_as_it_routes_their_pandas_frame():
    """``splitter_fn`` on a partition's decoded rows (events, a reject, a moved key's
    marker) as an Arrow table and as a pandas frame: the same rows out and the same state."""
    from skewlab.pipeline.route import AssignmentVersion

    recs = [(0, o, events.encode(f"k{o % 3}", 1_795_000_000.0 + o * 0.01, o)) for o in range(60)]
    recs[7] = (0, 7, b"not json")
    moved = AssignmentVersion(1, 1_795_000_000.0 + 0.3, (("k1", 3, 1),))
    fn = splitter_fn(settings("key", {}, message_sets=True), versions=lambda: (moved,))
    rows = decode_table(raw(recs, None), events.DEFAULT_MAX_BYTES)
    state, out = fn((0,), None, rows)
    frame_state, frame = fn((0,), None, rows.to_pandas())
    assert pickle.dumps(state) == pickle.dumps(frame_state)
    assert out.cast(ROUTED_ARROW).column_names == list(frame.columns)
    assert out.num_rows == 61 and out.column("kind").to_pylist().count(0) == 1
    assert out.column("worker").to_pylist()[7] == -1
    want = pa.Table.from_pandas(frame, preserve_index=False).cast(ROUTED_ARROW)
    assert out.cast(ROUTED_ARROW).to_pylist() == want.to_pylist()


def in_partition_order(recs: list[tuple[int, int, bytes]]) -> list[pa.RecordBatch]:
    """The rows as Spark's Kafka source hands them to a task: partition after partition,
    in batches of 70 rows that do not end with a partition."""
    return raw(sorted(recs, key=lambda r: r[0]), None).combine_chunks().to_batches(70)


def test_partition_runs_are_each_source_partition_whole():
    recs = stream(600, seed=6)
    batches = in_partition_order(recs)
    assert any(len(set(b.column("partition").to_pylist())) == 2 for b in batches)
    runs = list(partition_runs(iter([batches[0].slice(0, 0), *batches])))
    assert [set(t.column("partition").to_pylist()) for t in runs] == [{0}, {1}, {2}]
    assert [t.num_rows for t in runs] == [sum(1 for r in recs if r[0] == p) for p in range(3)]
    assert list(partition_runs(iter([]))) == []
    back = [*batches, batches[0]]  # partition 0 again after the others: refused
    with pytest.raises(ValueError, match="source partition 0 split"):
        list(partition_runs(iter(back)))


def test_the_task_function_takes_arrow_batches_and_no_batch(tmp_path):
    recs = stream(300, seed=4)
    s = settings("key", {})
    fn = route_task_fn(plan(tmp_path, s, 0))
    assert list(fn(iter([]))) == []
    out = list(fn(iter(in_partition_order(recs))))
    assert sum(b.num_rows for b in out) == sum(1 for _, _, v in recs if v != b"not json")
    # Spark takes the columns by position: they are the schema's, in its order.
    names = [c.strip().split(" ")[0] for c in KAFKA_SCHEMA.split(",")[:4]]
    assert names == ["partition", "key", "value", "headers"]
    assert {tuple(b.schema.names) for b in out} == {tuple(names)}
    values = [v for b in out for v in b.column("value").to_pylist()]
    decoded = events.decode_arrow(pa.array(values, pa.binary()), routed=True)
    assert decoded.column("reason").null_count == len(values)  # every value a routed event


def test_only_the_state_files_a_replay_needs_are_kept(tmp_path):
    store = PartitionStates(tmp_path)
    assert store.before(0, 0) is None
    for b in (0, 1, 2, 4):
        store.save(0, b, b)
    store.save(1, 1, "p1")
    assert sorted(p.name for p in (tmp_path / "0").iterdir()) == ["2", "4"]
    assert store.before(0, 4) == 2
    assert store.before(0, 5) == 4
    assert store.before(1, 5) == "p1"  # a partition without rows since keeps its state
    store.save(0, 4, 40)  # a replayed batch overwrites its own file
    assert store.before(0, 5) == 40
    assert store.before(0, 3) == 2


def test_the_arrow_schema_of_a_ddl_schema() -> None:
    """ROUTED_ARROW is derived from the route query's DDL (one definition of the rows)."""
    got = arrow_schema("a int, b long,c string , d double, e binary")
    assert got == pa.schema(
        [
            ("a", pa.int32()),
            ("b", pa.int64()),
            ("c", pa.string()),
            ("d", pa.float64()),
            ("e", pa.binary()),
        ]
    )
    assert ROUTED_ARROW.names[:3] == ["src_partition", "src_offset", "worker"]
    with pytest.raises(ConfigError, match="array"):
        arrow_schema("a int, b array<int>")


def test_decode_table_of_a_chunked_batch_equals_decode_batch() -> None:
    """The sink decodes the raw rows Spark hands it (a table of several chunks) row for
    row as the query's ``mapInArrow`` decoded each batch: same values, same rejects."""
    recs = stream(600, seed=11)
    recs.append((0, 10_000, b""))
    recs.append((1, 10_000, b"\xff\xfe"))
    cols = {
        "partition": pa.array([r[0] for r in recs], pa.int32()),
        "offset": pa.array([r[1] for r in recs], pa.int64()),
        "value": pa.array([r[2] for r in recs], pa.binary()),
    }
    whole = pa.RecordBatch.from_pydict(cols)
    chunked = pa.Table.from_batches([whole.slice(0, 250), whole.slice(250, 100), whole.slice(350)])
    assert chunked.column("value").num_chunks == 3
    got = decode_table(chunked, events.DEFAULT_MAX_BYTES)
    want = pa.Table.from_batches([decode_batch(whole, events.DEFAULT_MAX_BYTES)])
    assert got.equals(want)
    reasons = got.column("reason").to_pylist()
    assert reasons.count("not-json") == sum(v == b"not json" for _, _, v in recs)
    assert reasons[-2:] == ["empty", "not-utf8"]
    assert got.column("raw").to_pylist()[-1] == b"\xff\xfe"
    assert decode_table(chunked.slice(0, 0), events.DEFAULT_MAX_BYTES).num_rows == 0
