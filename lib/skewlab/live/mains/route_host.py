"""The route host's process: ``python -m skewlab.live.mains.route_host HOST_DIR``.

One Spark session (``$SKEWLAB_SPARK_MASTER``, default ``local[2]``) runs the route query of
each run that asks; the file protocol is numbered in :mod:`skewlab.live.driver.route_host`.
Each query is the route job's own :func:`~skewlab.live.mains.route_job.serve` (warm-up,
``route.ready``, the stop file), so a hosted run differs from one with its own route job
only in the session it starts on. This process:

1. builds the session and pushes one warm-up micro-batch through the route code;
2. writes ``host.ready``;
3. serves each new request from a thread of its own, writing that thread's log lines and
   those of the query's batches (Spark calls the sink from its own threads) to the run's log;
4. ends a query whose cancel marker appeared at once, with no last batch;
5. writes each request's exit code; once ``stop`` exists, cancels the rest and exits.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from skewlab.envsettings import env_settings
from skewlab.live.driver.launch import process_age_s, process_args
from skewlab.live.driver.route_host import HostDir
from skewlab.live.mains.route_job import serve, write_ready
from skewlab.spark.route import RouteSettings
from skewlab.spark.session import spark_session, ui_url

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from skewlab.spark.route_sink import RouteSink

log = logging.getLogger(__name__)

TICK_S = 0.2
FORMAT = "%(asctime)s %(name)s %(message)s"


class RunLogs(logging.Handler):
    """Step 3: each log record of a thread bound to a run goes to that run's log."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter(FORMAT))
        self._to: dict[int, IO[str]] = {}

    @contextlib.contextmanager
    def bound(self, out: IO[str]) -> Iterator[None]:
        """While inside, this thread's records go to ``out`` as well."""
        me = threading.get_ident()
        before = self._to.get(me)
        self._to[me] = out
        try:
            yield
        finally:
            if before is None:
                self._to.pop(me, None)
            else:
                self._to[me] = before

    def emit(self, record: logging.LogRecord) -> None:
        """Write ``record`` to the log of the run its thread is bound to, if any."""
        out = self._to.get(record.thread or 0)
        if out is None:
            return
        try:
            out.write(self.format(record) + "\n")
            out.flush()
        except (OSError, ValueError):
            pass


class LoggedSink:
    """The route sink with its calls' log lines in the run's log (the sink is called from
    Spark's threads, not the request's)."""

    def __init__(self, sink: RouteSink, logs: RunLogs, out: IO[str]) -> None:
        self.sink, self.logs, self.out = sink, logs, out

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        with self.logs.bound(self.out):
            self.sink(batch, batch_id)

    def close(self, spark: SparkSession | None = None) -> None:
        """The sink's close, logged to the run."""
        with self.logs.bound(self.out):
            self.sink.close(spark)


def serve_request(
    spark: SparkSession, d: HostDir, req: dict[str, Any], logs: RunLogs, ui: str | None
) -> None:
    """Steps 3-5 for one request: its query, then its exit code."""
    rid = str(req["id"])
    picked = time.time()
    rc = 1
    with open(req["log"], "a") as out, logs.bound(out):
        try:
            s = RouteSettings.from_json(Path(req["settings"]).read_text())
            s = replace(s, warmup_events=0)  # the route code ran warm here once (step 1)
            log.info("route query of %s on the route host (Spark's log: %s)", s.run_id, d.log)
            marker = {"t_host": picked, "spark_ui": ui, "host": str(d.path)}
            cancelled = d.cancel(rid).exists
            rc = serve(spark, s, marker, cancelled, lambda sink: LoggedSink(sink, logs, out))
        except Exception:
            out.write(traceback.format_exc())
            rc = 1
        finally:
            log.info("route query of request %s ended: %d", rid, rc)
    d.write_rc(rid, rc)


def warm_up(spark: SparkSession, d: HostDir) -> float:
    """Step 1: one micro-batch of synthetic events through the route code (scratch files)."""
    from skewlab.spark.warmup import run_warmup

    scratch = d.path / "warm"
    s = RouteSettings(
        run_id="route-host-warm-up",
        bootstrap="127.0.0.1:9",  # never reached: the warm-up sends nothing
        events_topic="warm-up",
        routed_topic="warm-up",
        workers=2,
        strategy="key",
        delta_root=str(scratch / "delta"),
        run_dir=str(scratch),
    )
    scratch.mkdir(parents=True, exist_ok=True)
    return run_warmup(spark, s, scratch / "warm-up", t0=time.time())


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.mains.route_host HOST_DIR``."""
    args = process_args(argv, "route_host HOST_DIR")
    if args is None:
        return 2
    d = HostDir(Path(args[0]).resolve())
    d.requests.mkdir(parents=True, exist_ok=True)
    logs = RunLogs()
    logging.getLogger().addHandler(logs)
    env = env_settings()
    master = env.spark_master or "local[2]"
    name, ui_on = "skewlab-route-host", env.spark_ui
    spark = spark_session(name, d.path / "spark", master=master, ui=ui_on, site_pyspark=True)
    ui = ui_url(spark) if env.spark_ui else None
    log.info("warm-up micro-batch done in %.2f s", warm_up(spark, d))  # step 1
    seen = {p.stem for p in d.requests.glob("*.json")}
    for rid in seen:  # an earlier host's queries ended with it
        if d.read_rc(rid) is None:
            d.write_rc(rid, -9)
    ready = {"pid": os.getpid(), "master": master, "spark_ui": ui, "warm_s": process_age_s()}
    write_ready(d.ready, ready)  # step 2
    log.info("route host ready: %s", json.dumps(ready, sort_keys=True))
    threads: list[threading.Thread] = []
    try:
        while not d.stop_file.exists():
            for p in sorted(d.requests.glob("*.json")):
                if p.stem in seen:
                    continue
                seen.add(p.stem)
                with contextlib.suppress(OSError, ValueError):
                    req = json.loads(p.read_text())
                    t = threading.Thread(
                        target=serve_request, args=(spark, d, req, logs, ui), daemon=True
                    )
                    t.start()  # step 3
                    threads.append(t)
            time.sleep(TICK_S)
    finally:
        for rid in seen:  # step 5: what still runs is cancelled
            if d.read_rc(rid) is None:
                d.cancel(rid).touch()
        for t in threads:
            t.join(timeout=60)
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
