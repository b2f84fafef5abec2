"""One factory for the Spark session every skewlab job and test uses.

It applies the settings this project needs everywhere (venv interpreter for Python
workers, state store, few shuffle partitions, UI on request, loopback driver, JVM
options), adds Spark's Kafka connector and delta-spark (the jars ``infra/setup.sh``
fetched, :func:`skewlab.jars.jar_files`) with Delta's SQL extension and catalog; an
active session is reused. Each setting and why: docs/throughput.md,
"skewlab.spark.session"; the jars: docs/real-stack.md.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from skewlab.envsettings import env_settings
from skewlab.jars import jar_files
from skewlab.services.process import free_port
from skewlab.spark.class_archive import driver_java_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
"""Driver JVM options (point 8), plus the class-data archive's where setup wrote one
(:mod:`skewlab.spark.class_archive`). C1 alone reserves 48 MB for compiled code, which a
route host filled in ~2 min, its JIT then stopped; 240 MB is the JDK's tiered default."""
JAVA_OPTIONS_ENV = "SKEWLAB_SPARK_JAVA_OPTS"

LOOPBACK = "127.0.0.1"
DRIVER_HOST_ENV = "SKEWLAB_SPARK_DRIVER_HOST"
"""The address executors reach the driver at (a cluster); default loopback on ``local``."""
BIND_ADDRESS_ENV = "SKEWLAB_SPARK_BIND_ADDRESS"
"""The address the driver's sockets bind (default: the driver host; ``0.0.0.0``: all)."""


def driver_address(master: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``spark.driver.host`` / ``spark.driver.bindAddress`` for ``master`` (point 6).

    ``{}`` on a cluster master without ``$SKEWLAB_SPARK_DRIVER_HOST``: Spark then
    advertises the machine's address, which its executors need.
    """
    settings = env_settings(env)
    host = settings.spark_driver_host or ""
    bind = settings.spark_bind_address or ""
    if not host and master.strip().startswith("local"):
        host = LOOPBACK
    if not host:
        return {"spark.driver.bindAddress": bind} if bind else {}
    return {"spark.driver.host": host, "spark.driver.bindAddress": bind or host}


def ui_settings(master: str, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark UI on a port free on the driver's bind address (loopback on ``local``)."""
    host = driver_address(master, env).get("spark.driver.bindAddress", "0.0.0.0")
    port = free_port(LOOPBACK if host == "0.0.0.0" else host)
    return {"spark.ui.enabled": "true", "spark.ui.port": str(port)}


def _ui_bind_env(master: str) -> None:
    """Spark's UI binds ``$SPARK_LOCAL_IP`` (else every interface): the driver's bind address.

    Read by the JVM this process starts, so it is set before the session is built.
    """
    host = driver_address(master).get("spark.driver.bindAddress")
    if host and host != "0.0.0.0":
        os.environ.setdefault("SPARK_LOCAL_IP", host)


def ui_url(spark: SparkSession) -> str | None:
    """The URL of the session's Spark UI (``None`` when the UI is off)."""
    return spark.sparkContext.uiWebUrl


def site_spark_home(root: Path) -> Path:
    """A ``SPARK_HOME`` under ``root`` that is the installed pyspark without ``python/``.

    Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and the py4j zip) first on the
    path of every Python process it starts: the UDF workers, but also the data-source
    planners and the streaming source runner, which are not started through
    ``spark.python.daemon.module``. Without those zips they import the same pyspark
    from site-packages, with cached bytecode (4x faster here, and Spark kills a
    planner that has not connected back within 10 s: a real risk on a loaded machine).
    Every other entry of the pyspark package (``bin``, ``jars``, ``conf``...) is a
    symlink, so the JVM starts exactly as before.
    """
    import pyspark

    home = root / "spark-home"
    home.mkdir(parents=True, exist_ok=True)
    for entry in Path(pyspark.__file__).parent.iterdir():
        link = home / entry.name
        if entry.name != "python" and not link.exists():
            link.symlink_to(entry)
    return home


CHECKPOINT_EVERY = 100
"""Commits between two checkpoints of a table delta-spark creates (Delta's default: 10).
The route job commits each of its tables once a Delta round (every 5 s at most), so a
checkpoint comes every ~8 min of a run instead of every ~50 s; delta-rs reads at most 99
commits past one."""

DELTA_SETTINGS = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.properties.defaults.enableDeletionVectors": "false",
    "spark.databricks.delta.properties.defaults.checkpointPolicy": "classic",
    "spark.databricks.delta.snapshotPartitions": "1",
    # a checkpoint rebuilds the table's state in Spark jobs: 5-6 s of a busy 2-core machine
    # beside the stream, every 10th round by default (docs/real-stack.md, session 33)
    "spark.databricks.delta.properties.defaults.checkpointInterval": str(CHECKPOINT_EVERY),
    "spark.databricks.delta.stats.collect": "false",
}
"""delta-spark in the session; new tables keep a protocol delta-rs also writes (no
deletion vectors, classic checkpoints), since the worker processes use delta-rs. A
snapshot's state is rebuilt in one task, not 50: an idempotent append reads the
table's app versions that way, and the route job's tables are small (docs/real-stack.md).
No per-file column statistics: nothing reads them from Spark's tables, and collecting
them was a fifth of a round of the route job's appends (session 28)."""


CHECKPOINT_SETTINGS = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
    ),
}
"""A streaming checkpoint's offsets and commit files through Hadoop's ``FileSystem``
(a rename per file, as atomic as on the local disk) instead of ``FileContext``, whose
local file system forks ``chmod`` / ``readlink`` per file: a micro-batch's ``walCommit`` +
``commitOffsets`` fell from ~120 to ~50 ms (docs/real-stack.md, session 28)."""


def scratch_dir(data_dir: str | os.PathLike[str]) -> Path:
    """``<data_dir>/tmp``, empty: the scratch space of the Spark driver starting on
    ``data_dir`` (:func:`scratch_settings`). A data dir serves one driver at a time, so
    what is there is what a killed predecessor left."""
    path = Path(data_dir).resolve() / "tmp"
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    return path


def scratch_settings(scratch: Path, java_options: str = "") -> dict[str, str]:
    """Spark's local dir and the driver JVM's ``java.io.tmpdir`` (added to ``java_options``
    unless they name one): both ``scratch``.

    Spark removes what it keeps there when its JVM stops; a killed JVM leaves it, to go
    with its data dir. Where each kind of file goes: docs/troubleshooting.md, "Temporary files".
    """
    if "-Djava.io.tmpdir=" not in java_options:
        where = f'"{scratch}"' if any(c.isspace() for c in str(scratch)) else str(scratch)
        java_options = f"{java_options} -Djava.io.tmpdir={where}".strip()
    return {"spark.local.dir": str(scratch), "spark.driver.extraJavaOptions": java_options}


def connector_jars() -> str:
    """``spark.jars``: Spark's Kafka connector and delta-spark, comma separated."""
    return ",".join(str(p) for p in jar_files("spark"))


def spark_session(
    app_name: str,
    data_dir: str | os.PathLike[str],
    master: str = "local[*]",
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
    ui: bool = False,
    site_pyspark: bool = False,
) -> SparkSession:
    """Return the active Spark session or build one configured for skewlab.

    ``data_dir`` holds ``warehouse/``, ``checkpoints/`` (the default checkpoint root of
    streaming queries that name none) and ``tmp/`` (Spark's local dir and the driver JVM's
    temporary directory: :func:`scratch_settings`).
    ``conf`` entries are applied last and win over the defaults above. ``ui``: serve
    the Spark UI (point 4); an active session keeps whatever it was built with.
    ``site_pyspark``: on a ``local`` master with no ``$SPARK_HOME`` set, start the JVM
    from :func:`site_spark_home` so every Python process Spark starts imports pyspark
    from site-packages.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        log.info("reusing active Spark session %s", active.sparkContext.appName)
        return active

    if site_pyspark and master.strip().startswith("local") and not os.environ.get("SPARK_HOME"):
        os.environ["SPARK_HOME"] = str(site_spark_home(Path(data_dir).resolve()))
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = Path(data_dir).resolve()
    for sub in ("warehouse", "checkpoints"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    settings: dict[str, str] = {
        "spark.jars": connector_jars(),
        **DELTA_SETTINGS,
        **CHECKPOINT_SETTINGS,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.sql.streaming.checkpointLocation": str(root / "checkpoints"),
        "spark.driver.memory": driver_memory,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
        "spark.python.daemon.module": "skewlab.spark.pydaemon",
        "spark.python.authenticate.socketTimeout": "120s",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **driver_address(master),
        **(ui_settings(master) if ui else {}),
    }
    extra = dict(conf or {})
    java = driver_java_options(env_settings().spark_java_opts or JAVA_OPTIONS)
    java = extra.pop("spark.driver.extraJavaOptions", java)
    settings.update(scratch_settings(scratch_dir(root), java))
    settings.update(extra)
    if ui:
        _ui_bind_env(master)

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    log.info("started Spark %s (%s) for %s", spark.version, master, app_name)
    return spark
