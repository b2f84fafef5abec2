"""The route job's writes through Spark's own connectors, on the real broker and Delta.

- :func:`kafka_writer`: every record once, on its partition, in row order, headers kept;
- :func:`delta_append`: exactly once per (app id, version), read back by delta-rs;
- :class:`DeltaAppender`: in batch order, once, pending rows recovered after a crash;
- a table round-trips between delta-spark and delta-rs both ways, checkpoints included.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from skewlab.io.delta import DeltaStore
from skewlab.io.delta.convert import to_arrow
from skewlab.io.delta.schemas import table_spec
from skewlab.spark.writes import (
    HEADER_PREFIX,
    Append,
    DeltaAppender,
    delta_append,
    delta_appends,
    kafka_frame,
    kafka_writer,
)

pytestmark = pytest.mark.integration


def records(n: int, partitions: int) -> pa.Table:
    return pa.table(
        {
            "partition": pa.array([i % partitions for i in range(n)], pa.int64()),
            "value": pa.array([b"v%d" % i for i in range(n)]),
            "key": pa.array([b"k%d" % (i % 5) for i in range(n)]),
            HEADER_PREFIX + "src": pa.array([b"0:%d" % i for i in range(n)]),
            HEADER_PREFIX + "set": pa.array([b"s%d" % i if i % 3 == 0 else None for i in range(n)]),
        }
    )


def test_kafka_writer_sends_every_record_on_its_partition_in_order(
    spark, broker, new_topic, kafka
) -> None:
    topic = new_topic(partitions=3)
    df = spark.createDataFrame(kafka_frame(records(300, 3))).coalesce(1)
    kafka_writer(df, broker.bootstrap, topic, **{"linger.ms": "5"}).save()
    ends = kafka.end_offsets(topic)
    assert ends == {0: 100, 1: 100, 2: 100}
    for p in range(3):
        rows = list(kafka.fetch(topic, p, 0, ends[p]))
        assert [r.value for r in rows] == [b"v%d" % i for i in range(p, 300, 3)]
        assert [r.key for r in rows] == [b"k%d" % (i % 5) for i in range(p, 300, 3)]
        for r, i in zip(rows, range(p, 300, 3), strict=True):
            want = [("src", b"0:%d" % i)] + ([("set", b"s%d" % i)] if i % 3 == 0 else [])
            assert list(r.headers) == want


def test_delta_append_is_exactly_once_per_app_version(spark, tmp_path: Path) -> None:
    kl = {
        "window_start": [0, 0],
        "key": ["a", "b"],
        "worker": [0, 1],
        "count": [3, 4],
        "bytes": [30, 40],
    }
    for version in (0, 0, 1, 1, 0):
        delta_append(
            spark, tmp_path, "key_loads", kl, app_id="route:r1", version=version, run_id="r1"
        )
    store = DeltaStore(str(tmp_path))
    assert store.committed_version("key_loads", "route:r1") == 1
    t = store.read("key_loads", run_id="r1")
    assert t.num_rows == 4
    assert sorted(t.column("count").to_pylist()) == [3, 3, 4, 4]


def test_a_steady_append_is_one_spark_job_and_records_the_app_version(
    spark, tmp_path: Path
) -> None:
    """Once the table has the data's columns, an append is its write alone: one Spark job
    (Spark's writer with ``txnAppId`` runs four: three rebuild the table's state to read
    the app's version), its commit carries the app's version, and a replay runs none."""
    sc = spark.sparkContext
    row = {"window_start": [0], "key": ["a"], "worker": [0], "count": [1], "bytes": [9]}
    calls = iter(range(10))

    def jobs(version: int) -> int:
        group = f"steady-{next(calls)}"
        sc.setJobGroup(group, group)
        try:
            delta_append(
                spark, tmp_path, "key_loads", row, app_id="route:r9", version=version, run_id="r9"
            )
        finally:
            sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
        return len(sc.statusTracker().getJobIdsForGroup(group))

    jobs(0)  # creates the table
    assert [jobs(1), jobs(2)] == [1, 1]
    assert jobs(2) == 0  # a replay: nothing to do
    dt = DeltaTable(str(tmp_path / table_spec("key_loads").name))
    assert dt.transaction_version("route:r9") == 2
    assert dt.to_pyarrow_table().num_rows == 3
    assert [a["operation"] for a in dt.history()][:2] == ["WRITE", "WRITE"]


def test_the_route_jobs_tables_checkpoint_every_100_commits_not_10(spark, tmp_path: Path) -> None:
    """A checkpoint rebuilds the table's state in Spark jobs (seconds beside a busy stream):
    a table delta-spark creates has one every 100 commits, so 12 appends make none."""
    from skewlab.spark.session import CHECKPOINT_EVERY

    for v in range(12):
        delta_append(
            spark, tmp_path, "key_loads", _kl(v), app_id="route:r3", version=v, run_id="r3"
        )
    path = tmp_path / table_spec("key_loads").name
    dt = DeltaTable(str(path))
    assert dt.metadata().configuration["delta.checkpointInterval"] == str(CHECKPOINT_EVERY)
    assert CHECKPOINT_EVERY == 100 and dt.version() == 11
    assert not [p for p in (path / "_delta_log").iterdir() if ".checkpoint." in p.name]
    assert dt.transaction_version("route:r3") == 11


def _pl() -> dict[str, list]:
    return {
        "window_start": [0],
        "topic": ["routed"],
        "partition": [0],
        "bytes": [9],
        "records": [1],
        "bytes_per_s": [0.6],
    }


def test_delta_appends_write_each_table_once(spark, tmp_path: Path) -> None:
    kl = {"window_start": [0], "key": ["a"], "worker": [0], "count": [1], "bytes": [9]}
    pl = _pl()
    for _ in range(2):
        delta_appends(
            spark,
            tmp_path,
            [Append("key_loads", kl), Append("partition_loads", pl)],
            app_id="route:r2",
            version=7,
            run_id="r2",
        )
    store = DeltaStore(str(tmp_path))
    assert store.read("key_loads", run_id="r2").num_rows == 1
    assert store.read("partition_loads", run_id="r2").num_rows == 1


def test_a_table_round_trips_between_the_engines_with_checkpoints(spark, tmp_path: Path) -> None:
    """delta-rs writes 12 commits and a checkpoint, delta-spark reads them and appends 12
    more (its own checkpoint at version 20), delta-rs reads all and the app versions."""
    store = DeltaStore(str(tmp_path / "rs"))
    row = {"window_start": [0], "key": ["k"], "worker": [1], "count": [1], "bytes": [5]}
    for v in range(12):
        store.append("key_loads", row, app_id="rs", version=v, run_id="r")
    path = store.path("key_loads")
    DeltaTable(path).create_checkpoint()
    assert spark.read.format("delta").load(path).count() == 12
    for v in range(12):
        delta_append(
            spark, tmp_path / "rs", "key_loads", row, app_id="spark", version=v, run_id="r"
        )
    log = Path(path) / "_delta_log"
    assert any(p.name.endswith(".checkpoint.parquet") and "00020" in p.name for p in log.iterdir())
    dt = DeltaTable(path)
    assert dt.to_pyarrow_table().num_rows == 24
    assert dt.transaction_version("rs") == 11
    assert dt.transaction_version("spark") == 11
    assert spark.read.format("delta").load(path).count() == 24


def _kl(count: int) -> dict[str, list]:
    return {"window_start": [0], "key": ["a"], "worker": [0], "count": [count], "bytes": [9]}


def test_delta_appender_appends_in_order_once_and_empties_its_pending_folder(
    spark, tmp_path: Path
) -> None:
    pending = tmp_path / "pending"
    app = DeltaAppender(spark, tmp_path / "d", pending, app_id="route:r3", run_id="r3")
    store = DeltaStore(str(tmp_path / "d"))
    for batch in range(5):
        app.submit(batch, [Append("key_loads", _kl(batch + 1))])
        # on disk when submit returns, or appended already (the file goes after the commit)
        done = store.committed_version("key_loads", "route:r3")
        assert (pending / str(batch)).exists() or (done is not None and done >= batch)
    app.close()
    assert app.lag == 0 and not list(pending.iterdir())
    assert store.committed_version("key_loads", "route:r3") == 4
    counts = store.read("key_loads", run_id="r3").column("count").to_pylist()
    assert sorted(counts) == [1, 2, 3, 4, 5]
    assert 1 <= app.appends <= 5  # batches waiting together share one commit


def test_delta_appender_recovers_what_a_crash_left_pending_exactly_once(
    spark, tmp_path: Path
) -> None:
    """Batches 0-1 appended, 2 appended but its file not yet deleted, 3 only saved (the
    crash), 4 saved by the crashed process and replayed by the new one."""
    root, pending = tmp_path / "d", tmp_path / "pending"
    first = DeltaAppender(spark, root, pending, app_id="route:r4", run_id="r4")
    for batch in range(3):
        first.submit(batch, [Append("key_loads", _kl(batch + 1))])
    first.close()
    kept = {}
    for batch in (2, 3, 4):  # what a killed process leaves: the rows of saved batches
        first._save(batch, {"key_loads": to_arrow(table_spec("key_loads"), _kl(batch + 1), "r4")})
        kept[batch] = (pending / str(batch)).read_bytes()
    second = DeltaAppender(spark, root, pending, app_id="route:r4", run_id="r4")
    second.submit(4, [Append("key_loads", _kl(5)), Append("partition_loads", _pl())])
    second.close()
    store = DeltaStore(str(root))
    assert store.committed_version("key_loads", "route:r4") == 4
    counts = store.read("key_loads", run_id="r4").column("count").to_pylist()
    assert sorted(counts) == [1, 2, 3, 4, 5]
    assert store.read("partition_loads", run_id="r4").num_rows == 1
    assert not list(pending.iterdir())


def test_delta_appender_recovers_a_batch_a_crash_left_in_one_table_only(
    spark, tmp_path: Path
) -> None:
    """Batch 2 in ``key_loads`` but not yet in ``partition_loads`` (killed between the two
    commits), 3 only saved, 4 replayed: each table ends with each batch once."""
    root, pending = tmp_path / "d", tmp_path / "pending"
    first = DeltaAppender(spark, root, pending, app_id="route:r7", run_id="r7")
    for batch in range(2):
        first.submit(batch, [Append("key_loads", _kl(batch + 1)), Append("partition_loads", _pl())])
    first.close()
    delta_append(spark, root, "key_loads", _kl(3), app_id="route:r7", version=2, run_id="r7")
    for batch in (2, 3, 4):
        kl = to_arrow(table_spec("key_loads"), _kl(batch + 1), "r7")
        first._save(
            batch,
            {
                "key_loads": kl,
                "partition_loads": to_arrow(table_spec("partition_loads"), _pl(), "r7"),
            },
        )
    second = DeltaAppender(spark, root, pending, app_id="route:r7", run_id="r7")
    second.submit(4, [Append("key_loads", _kl(5)), Append("partition_loads", _pl())])
    second.close()
    store = DeltaStore(str(root))
    for table in ("key_loads", "partition_loads"):
        assert store.committed_version(table, "route:r7") == 4
    counts = store.read("key_loads", run_id="r7").column("count").to_pylist()
    assert sorted(counts) == [1, 2, 3, 4, 5]
    assert store.read("partition_loads", run_id="r7").num_rows == 5
    assert not list(pending.iterdir())


def test_delta_appender_appends_pending_rows_on_close_without_a_batch(
    spark, tmp_path: Path
) -> None:
    root, pending = tmp_path / "d", tmp_path / "pending"
    first = DeltaAppender(spark, root, pending, app_id="route:r5", run_id="r5")
    first._save(0, {"key_loads": to_arrow(table_spec("key_loads"), _kl(7), "r5")})
    first._recovered = True  # this process saved it: only a new one recovers it
    DeltaAppender(spark, root, pending, app_id="route:r5", run_id="r5").close()
    store = DeltaStore(str(root))
    assert store.read("key_loads", run_id="r5").column("count").to_pylist() == [7]
    first.close()
    assert store.read("key_loads", run_id="r5").num_rows == 1


def test_delta_appender_fails_the_next_submit_after_a_failed_append(spark, tmp_path: Path) -> None:
    app = DeltaAppender(spark, tmp_path / "d", tmp_path / "p", app_id="route:r6", run_id="r6")
    app.submit(0, [Append("key_loads", _kl(1))])
    app.flush()
    (tmp_path / "d" / "key_loads").rename(tmp_path / "d" / "moved")
    (tmp_path / "d" / "key_loads").write_text("not a table")
    app.submit(1, [Append("key_loads", _kl(2))])
    with pytest.raises(RuntimeError, match="a Delta append failed"):
        app.flush()
    with pytest.raises(RuntimeError, match="a Delta append failed"):
        app.submit(2, [Append("key_loads", _kl(3))])
    assert (tmp_path / "p" / "1").exists()  # kept for a next process
