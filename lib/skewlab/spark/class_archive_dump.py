"""Write the Spark driver JVM's class-data archive (:mod:`skewlab.spark.class_archive`).

``python -m skewlab.spark.class_archive_dump`` (``infra/setup.sh`` runs it once the jars and
packages are in place; a no-op while the archive exists). Steps, in a child process whose
Spark and JVM output goes to ``<archive>.log`` (:func:`dump`):

1. start a Spark session the project's way (:func:`~skewlab.spark.session.spark_session`) on a
   JVM told to archive the classes it loaded when it exits (``-XX:ArchiveClassesAtExit``);
2. run what a route job runs: a Delta append and read, a streaming query with ``mapInArrow``;
3. stop the session and end its JVM (its stdin closed), which writes the archive;
4. keep it only if a route job's driver JVM maps it (``-Xshare:on``), under its name.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from skewlab.spark.class_archive import archive_path
from skewlab.spark.session import JAVA_OPTIONS, spark_session


def _plus_one(batches: Iterator[Any]) -> Iterator[Any]:
    """A Python task over Arrow batches, as the route job's."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for b in batches:
        yield pa.RecordBatch.from_arrays([b.column(0), pc.add(b.column(1), 1)], ["id", "value"])


def exercise(spark: Any, folder: Path) -> None:
    """Step 2: the kinds of work a route job's JVM does, small."""
    table = str(folder / "table")
    df = spark.range(1000).selectExpr("id", "id % 7 AS value")
    df.write.format("delta").mode("append").save(table)
    spark.read.format("delta").load(table).groupBy("value").count().collect()
    stream = spark.readStream.format("rate").option("rowsPerSecond", 1000).load()
    routed = stream.selectExpr("CAST(value AS LONG) AS id", "value").mapInArrow(
        _plus_one, "id long, value long"
    )
    query = (
        routed.writeStream.format("delta")
        .option("checkpointLocation", str(folder / "checkpoint"))
        .trigger(processingTime="200 milliseconds")
        .start(str(folder / "routed"))
    )
    try:
        while len(query.recentProgress) < 3 and query.isActive:
            time.sleep(0.2)
    finally:
        query.stop()


def dump(target: Path) -> bool:
    """Steps 1-4 into ``target``; True if a usable archive is there."""
    part = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    with tempfile.TemporaryDirectory(prefix="skewlab-cds-") as tmp:
        java = f"{JAVA_OPTIONS} -XX:ArchiveClassesAtExit={part} -Xlog:cds=off"
        spark = spark_session(  # step 1
            "skewlab-class-archive",
            tmp,
            master="local[2]",
            conf={"spark.driver.extraJavaOptions": java},
        )
        gateway: Any = spark.sparkContext._gateway
        proc = gateway.proc  # the JVM (spark-submit execs it)
        try:
            exercise(spark, Path(tmp))  # step 2
        finally:
            spark.stop()  # step 3
            proc.stdin.close()
            rc = proc.wait(timeout=300)
    ok = rc == 0 and part.is_file() and maps(part)  # step 4
    if ok:
        part.replace(target)
    part.unlink(missing_ok=True)
    return ok


def maps(archive: Path) -> bool:
    """Whether a route job's driver JVM (pyspark from site-packages, as
    :mod:`skewlab.live.mains.route_job` starts it) maps ``archive``: a session started with
    ``-Xshare:on``, which fails rather than run without it, in a process of its own."""
    argv = [sys.executable, "-m", "skewlab.spark.class_archive_dump", "--check", str(archive)]
    return subprocess.run(argv, capture_output=True, timeout=600, check=False).returncode == 0


def check(archive: Path) -> int:
    """The child of :func:`maps`: 0 once a session on ``archive`` ran a job."""
    with tempfile.TemporaryDirectory(prefix="skewlab-cds-check-") as tmp:
        java = f"{JAVA_OPTIONS} -XX:SharedArchiveFile={archive} -Xshare:on"
        spark = spark_session(
            "skewlab-class-archive-check",
            tmp,
            master="local[1]",
            conf={"spark.driver.extraJavaOptions": java},
            site_pyspark=True,
        )
        try:
            spark.range(3).count()
        finally:
            spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Write the archive unless the installed pyspark has one, in a child process whose
    Spark and JVM output goes to ``<archive>.log`` (``--dump PATH``: that child; ``--check
    PATH``: the child of :func:`maps`)."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--check"]:
        return check(Path(args[1]))
    if args[:1] == ["--dump"]:
        return 0 if dump(Path(args[1])) else 1
    target = archive_path()
    if target.is_file():
        return 0
    t0 = time.monotonic()
    log = target.with_name(f"{target.name}.log")
    print(f"setup: writing the Spark driver's class-data archive {target}", file=sys.stderr)
    with log.open("w") as out:
        argv_ = [sys.executable, "-m", "skewlab.spark.class_archive_dump", "--dump", str(target)]
        subprocess.run(argv_, stdout=out, stderr=subprocess.STDOUT, timeout=1200, check=False)
    if not target.is_file():
        print(
            f"setup: no Spark class-data archive (the JVM wrote none it maps: {log})",
            file=sys.stderr,
        )
        return 0  # Spark runs without one, a few seconds slower per start
    size = target.stat().st_size / 1e6
    print(f"setup: done ({size:.0f} MB, {time.monotonic() - t0:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
