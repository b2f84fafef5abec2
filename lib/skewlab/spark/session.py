"""One factory for the Spark session every skewlab job and test uses.

The settings it applies are the ones this project needs everywhere (ENVIRONMENT.md):

1. ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` point at ``sys.executable`` (the
   venv's interpreter), or every Python data source / UDF worker fails to connect back.
2. The RocksDB state store provider, which ``transformWithStateInPandas`` requires and
   which keeps large grouping snapshots off the JVM heap.
3. Few shuffle partitions (default 4): micro-batches here are small and each shuffle
   partition of a stateful operator costs a task and a state store instance.
4. No UI, warehouse and default checkpoint root under ``data_dir``, log level WARN.
5. skewlab's Python data sources (``skewlab-kafka``) registered on the session.
6. The driver listens on loopback only: ``spark.driver.host`` and
   ``spark.driver.bindAddress`` are ``127.0.0.1`` on a ``local`` master (its RPC and
   block manager ports are then unreachable from other machines). On a cluster
   master executors must reach the driver, so Spark's own choice stands unless
   ``$SKEWLAB_SPARK_DRIVER_HOST`` (and ``$SKEWLAB_SPARK_BIND_ADDRESS``, default: the
   host) names the address; ``conf`` entries win over both.

An active session is reused (only the data sources are registered again), so a test
run and a job share one JVM.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

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
    env = os.environ if env is None else env
    host = env.get(DRIVER_HOST_ENV, "").strip()
    bind = env.get(BIND_ADDRESS_ENV, "").strip()
    if not host and master.strip().startswith("local"):
        host = LOOPBACK
    if not host:
        return {"spark.driver.bindAddress": bind} if bind else {}
    return {"spark.driver.host": host, "spark.driver.bindAddress": bind or host}


def register_data_sources(spark: SparkSession) -> None:
    """Register every skewlab Python data source on ``spark`` (idempotent)."""
    from skewlab.spark.kafka_source import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def spark_session(
    app_name: str,
    data_dir: str | os.PathLike[str],
    master: str = "local[*]",
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
    conf: Mapping[str, str] | None = None,
    log_level: str = "WARN",
) -> SparkSession:
    """Return the active Spark session or build one configured for skewlab.

    ``data_dir`` holds ``warehouse/``, ``checkpoints/`` (the default checkpoint root of
    streaming queries that name none) and ``tmp/`` (Spark's local scratch space).
    ``conf`` entries are applied last and win over the defaults above.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        log.info("reusing active Spark session %s", active.sparkContext.appName)
        register_data_sources(active)
        return active

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = Path(data_dir).resolve()
    for sub in ("warehouse", "checkpoints", "tmp"):
        (root / sub).mkdir(parents=True, exist_ok=True)

    settings: dict[str, str] = {
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.default.parallelism": str(shuffle_partitions),
        "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.sql.streaming.checkpointLocation": str(root / "checkpoints"),
        "spark.local.dir": str(root / "tmp"),
        "spark.driver.memory": driver_memory,
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        **driver_address(master),
    }
    settings.update(conf or {})

    builder = SparkSession.builder.appName(app_name).master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    register_data_sources(spark)
    log.info("started Spark %s (%s) for %s", spark.version, master, app_name)
    return spark
