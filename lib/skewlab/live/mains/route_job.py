"""The route job's process: ``python -m skewlab.live.mains.route_job SETTINGS_JSON``.

The query lives in :mod:`skewlab.spark.route` and :mod:`skewlab.spark.route_sink`. Steps 2-5
are :func:`serve`, which the warm route host (:mod:`.route_host`) runs for each run it hosts
on its one session, with no warm-up of its own. This process:

1. builds the Spark session (the Spark UI on a free loopback port unless
   ``RouteSettings.spark_ui`` is false or ``$SKEWLAB_SPARK_UI=0``);
2. starts the route query on ``events`` (nothing is produced before ``route.ready``);
3. meanwhile pushes one warm-up micro-batch of synthetic events through the same
   decode, splitter and sink code (:mod:`skewlab.spark.warmup`), counted nowhere,
   then waits until the query has run its first (empty) trigger;
4. writes ``route.ready`` (:attr:`RunDir.route_ready`) as JSON: ``t_process``,
   ``t_session``, ``t_query``, ``t_warm`` (epoch seconds) and ``spark_ui`` (URL or null);
5. runs until the stop file appears, then processes what is available and stops.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.envsettings import env_settings
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaSettings
from skewlab.pipeline import events
from skewlab.rundir import settings_text
from skewlab.spark.route import (
    RouteSettings,
    start_query,
)
from skewlab.spark.route_sink import RouteSink
from skewlab.spark.session import spark_session, ui_url

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["SPARK_UI_ENV", "main", "send_end_of_stream", "serve"]

log = logging.getLogger(__name__)

SPARK_UI_ENV = "SKEWLAB_SPARK_UI"
"""``0``: no Spark UI for the route job (default: on, on a free loopback port)."""


def _process_start() -> float:
    """When this process started (epoch s), from the OS."""
    import psutil

    return float(psutil.Process().create_time())


def _wait_polling(query: StreamingQuery, timeout_s: float = 10.0) -> None:
    """Until the query has looked for data once (its first trigger ran), at most
    ``timeout_s``: usually done while the warm-up ran; on a loaded machine the first
    events then wait for that trigger instead of the run's start-up deadline."""
    deadline = time.time() + timeout_s
    while time.time() < deadline and query.isActive:
        status = query.status
        if query.lastProgress is not None or (
            not status.get("isTriggerActive") and "Waiting" in str(status.get("message"))
        ):
            return
        time.sleep(0.05)


def write_ready(path: Path, marker: dict[str, Any]) -> None:
    """``route.ready`` as JSON, written whole (a reader never sees half of it)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(marker, sort_keys=True))
    tmp.replace(path)


def _log_progress(query: StreamingQuery, seen: set[str]) -> None:
    """Spark's own metrics of each new micro-batch with input (where the time went).

    Reads the JVM's progress objects newest first and only up to the first one already
    seen, one JSON string each: ``query.recentProgress`` converts all of up to 100 kept
    objects field by field over py4j on every call (measured: 9 % of the driver's CPU
    at 60,000 events/s, polled every 0.5 s)."""
    jprogress = query._jsq.recentProgress()
    new = []
    for i in range(len(jprogress) - 1, -1, -1):
        p = json.loads(jprogress[i].json())
        key = f"{p.get('batchId')}@{p.get('timestamp')}"
        if key in seen:
            break
        seen.add(key)
        new.append(p)
    for p in reversed(new):
        if not p.get("numInputRows"):
            continue
        log.info(
            "progress batch %s: %d rows, durationMs %s",
            p["batchId"],
            p["numInputRows"],
            json.dumps(p.get("durationMs", {}), sort_keys=True),
        )


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.mains.route_job SETTINGS_JSON [DATA_DIR]`` (``jobs/route.py``)."""
    t_process = _process_start()
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: route_job SETTINGS_JSON [SPARK_DATA_DIR]", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    s = RouteSettings.from_json(settings_text(args[0]))  # read once, passed down
    data_dir = args[1] if len(args) > 1 else str(s.files.spark_data)
    ui = s.spark_ui and env_settings().spark_ui
    # step 1
    spark = spark_session(
        f"skewlab-route-{s.run_id}", data_dir, master=s.spark_master, ui=ui, site_pyspark=True
    )
    t_session = time.time()
    url = ui_url(spark) if ui else None
    if url:
        log.info("Spark UI: %s", url)
    try:
        return serve(spark, s, {"t_process": t_process, "t_session": t_session, "spark_ui": url})
    finally:
        spark.stop()


def serve(
    spark: SparkSession,
    s: RouteSettings,
    marker: dict[str, Any],
    cancelled: Callable[[], bool] = lambda: False,
    wrap: Callable[[RouteSink], Any] = lambda sink: sink,
) -> int:
    """Steps 2-5 of the module doc on a running session; the exit code.

    ``marker``: what ``route.ready`` says of the session (``t_process``, ``t_session``,
    ``spark_ui``). ``cancelled``: polled with the stop file; true ends the query at once
    (no last batch), returning ``-SIGKILL`` as a killed process would. ``wrap``: what
    the query calls for each batch, around the route sink (the route host's per-run log).
    """
    query = start_query(spark, s, wrap(RouteSink(s)))  # step 2
    t_query = time.time()
    try:
        if s.warmup_events:  # step 3, while the query's thread starts its source and batch 0
            from skewlab.spark.warmup import run_warmup

            secs = run_warmup(spark, s, s.files.route_warmup, t0=time.time())
            log.info("warm-up micro-batch done in %.2f s", secs)
        t_warm = time.time()
        _wait_polling(query)
        ready = {**marker, "t_query": t_query, "t_warm": t_warm}
        write_ready(s.files.route_ready, ready)  # step 4
        log.info("route job ready: %s", json.dumps(ready, sort_keys=True))
        stop = s.files.route_stop
        seen: set[str] = set()
        while query.isActive:  # step 5
            _log_progress(query, seen)
            if cancelled():
                return -signal.SIGKILL
            if stop.exists():
                query.processAllAvailable()
                break
            time.sleep(0.5)
        _log_progress(query, seen)
        exc = query.exception()
        if exc is not None:
            log.error("route query failed: %s", exc)
            return 1
    finally:
        query.stop()
    if s.message_sets:
        send_end_of_stream(s)
    return 0


def send_end_of_stream(s: RouteSettings) -> None:
    """Tell every worker that no splitter routes any more (their open sets may end)."""

    client = connect(KafkaSettings(s.bootstrap, s.client))
    try:
        for w in range(s.workers):
            client.produce(s.routed_topic, b"", partition=w, headers=[(events.END_HEADER, b"1")])
        client.flush()
    finally:
        client.close()


if __name__ == "__main__":
    raise SystemExit(main())
