"""The route job's warm-up: one micro-batch of synthetic events through the route code.

:func:`run_warmup` pays Spark's lazy start-up costs (Python workers, imports, producer,
Delta) before any real event exists, writing nothing that is counted:

1. synthetic ``events`` records over two source partitions, one invalid (quarantine);
2. a ``dry`` :class:`~skewlab.spark.route_sink.RouteSink` runs the batch as the query's
   sink does (the same one job, its records dropped, the splitter states under a
   scratch folder), as each new splitter starts;
3. its Delta rows go to a scratch root; the scratch folders are deleted afterwards.

Why a batch job: docs/throughput.md, "skewlab.spark.warmup".
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING

from skewlab.pipeline import events
from skewlab.spark.route import RouteSettings
from skewlab.spark.route_sink import RouteSink

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

PARTITIONS = 2


def synthetic_values(n: int, t0: float) -> list[bytes]:
    """``n`` events over 50 keys (0.1 ms apart from ``t0``), the last one invalid."""
    out = [
        events.encode(f"warmup-{i % 50}", t0 + i * 1e-4, i, "x" * 40) for i in range(max(n - 1, 0))
    ]
    return [*out, b"not json"] if n else out


def run_warmup(spark: SparkSession, s: RouteSettings, folder: Path, t0: float) -> float:
    """Steps 1-3 of the module doc; returns the seconds it took.

    ``folder`` holds the scratch Delta root and splitter files; it is deleted afterwards.
    ``t0``: the synthetic events' event time (s since the epoch).
    """
    import pandas as pd

    started = time.perf_counter()
    per = max(s.warmup_events // PARTITIONS, 2)
    values = synthetic_values(per, t0)
    frame = pd.DataFrame(
        {
            "partition": [p for p in range(PARTITIONS) for _ in values],
            "offset": [i for _ in range(PARTITIONS) for i in range(len(values))],
            "value": values * PARTITIONS,
        }
    )
    source = spark.createDataFrame(frame, "partition int, offset long, value binary")
    sink = RouteSink(
        s, dry=True, delta_root=str(folder / "delta"), spark=spark, scratch=folder / "route"
    )
    # Each source partition's rows together, as Spark's Kafka source hands them to a task.
    rows = source.repartition(PARTITIONS, "partition").sortWithinPartitions("partition")
    try:  # the query's own sink
        sink(rows.coalesce(s.tasks), 0)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return time.perf_counter() - started
