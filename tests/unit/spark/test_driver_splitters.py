"""The splitters on the driver: decisions, states per batch, replay after a crash.

* each source partition is routed in offset order from its state after the previous
  batch: the decisions equal a :class:`~skewlab.pipeline.route.Splitter` per partition
  carried batch to batch (the reference the live tests replay);
* a batch replayed by a new process (states read back from the files) routes exactly
  as the first attempt, also when the first attempt saved its own states before dying;
* only the files a replay can need are kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import make_grouping
from skewlab.pipeline import events
from skewlab.pipeline.route import Splitter
from skewlab.spark.driver_splitters import ROUTED_ARROW, SplitterStates, arrow_schema, route_decoded
from skewlab.spark.route import RouteSettings, decode_batch, decode_table, splitter_fn

pytestmark = pytest.mark.unit

DKG_FAST = {"warmup": 0.5, "check_interval": 0.5, "promotion_interval": 0.5, "old_every": 1}
PARTS = 3


def settings(strategy: str, params: dict[str, Any]) -> RouteSettings:
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


def decoded(recs: list[tuple[int, int, bytes]], shuffle_seed: int) -> pa.Table:
    order = np.random.default_rng(shuffle_seed).permutation(len(recs))  # arrival order
    b = pa.RecordBatch.from_pydict(
        {
            "partition": pa.array([recs[i][0] for i in order], pa.int32()),
            "offset": pa.array([recs[i][1] for i in order], pa.int64()),
            "value": pa.array([recs[i][2] for i in order], pa.binary()),
        }
    )
    return pa.Table.from_batches([decode_batch(b, events.DEFAULT_MAX_BYTES)])


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


def decisions(t: pa.Table) -> dict[tuple[int, int], int]:
    d = t.to_pydict()
    return {
        (p, o): w
        for p, o, w, k in zip(d["src_partition"], d["src_offset"], d["worker"], d["kind"])
        if w >= 0 and k == 1
    }


def batches_of(recs, cuts):
    return [recs[a:b] for a, b in zip([0, *cuts], [*cuts, len(recs)])]


@pytest.mark.parametrize(("strategy", "params"), [("key", {}), ("pkg", {}), ("dkg", DKG_FAST)])
def test_decisions_are_a_splitter_per_partition_carried_batch_to_batch(tmp_path, strategy, params):
    recs = stream(3_000, seed=1)
    batches = batches_of(recs, [700, 1_900])
    fn = splitter_fn(settings(strategy, params))
    store = SplitterStates(tmp_path)
    states: dict[int, Any] = {}
    got: dict[tuple[int, int], int] = {}
    quarantined = 0
    for b, part in enumerate(batches):
        t = route_decoded(decoded(part, shuffle_seed=b), fn, states)
        assert t.schema == ROUTED_ARROW
        assert t.num_rows == len(part)
        quarantined += sum(1 for w in t.column("worker").to_pylist() if w < 0)
        store.save(b, states)
        got.update(decisions(t))
    assert got == reference(strategy, params, batches)
    assert quarantined == sum(1 for _, _, v in recs if v == b"not json")


def test_replayed_batch_routes_as_its_first_attempt(tmp_path):
    recs = stream(2_400, seed=2)
    batches = batches_of(recs, [800, 1_600])
    fn = splitter_fn(settings("dkg", DKG_FAST))
    first = SplitterStates(tmp_path / "a")
    states: dict[int, Any] = {}
    attempts = []
    for b, part in enumerate(batches):
        attempts.append(decisions(route_decoded(decoded(part, b), fn, states)))
        first.save(b, states)  # batch 2 saved, then the process died before Spark's commit
    # A new process replays batch 2 from the files: the states after batch 1.
    again = SplitterStates(tmp_path / "a").before(2)
    replay = decisions(
        route_decoded(decoded(batches[2], 7), splitter_fn(settings("dkg", DKG_FAST)), again)
    )
    assert replay == attempts[2]
    # ... and without any saved file the same batch would route differently (DKG state matters).
    fresh = decisions(route_decoded(decoded(batches[2], 7), fn, {}))
    assert fresh != attempts[2]


def test_only_the_files_a_replay_needs_are_kept(tmp_path):
    store = SplitterStates(tmp_path)
    assert store.before(0) == {}
    for b in (0, 1, 2, 4):
        store.save(b, {0: b})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2", "4"]
    assert store.before(4) == {0: 2}
    assert store.before(5) == {0: 4}
    store.save(4, {0: 40})  # a replayed batch overwrites its own file
    assert store.before(5) == {0: 40}
    assert store.before(3) == {0: 2}


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
