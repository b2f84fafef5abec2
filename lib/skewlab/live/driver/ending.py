"""The end of a live run: released, failed (handle and MLflow), stopped (children killed)."""

from __future__ import annotations

import contextlib
import logging
import time

from skewlab.errors import SkewlabError
from skewlab.io.kafka._common import log_librdkafka_to
from skewlab.live.driver.context import RunContext
from skewlab.live.driver.handle import Phase as P
from skewlab.live.driver.handle import Status
from skewlab.live.driver.launch import Proc
from skewlab.live.driver.lifecycle import failure_reason
from skewlab.live.report.tracking import fail_run

log = logging.getLogger(__name__)


def release(ctx: RunContext) -> None:
    """Leave the run in this process: its loop asked to stop, its client closed (the
    processes and topics stay: they belong to the run, :func:`stop` ends them)."""
    if ctx.loop is not None:
        ctx.loop.signal()
    if ctx.client is not None:
        ctx.client.close()
        ctx.client = None


def fail(ctx: RunContext, exc: BaseException) -> str:
    """Record the run as failed (handle ``status`` / ``error``) because of ``exc``; the
    one-line reason. A run that already ended keeps its first end."""
    reason = failure_reason(exc)
    ctx.handle.finish(Status.FAILED, reason)
    log.info("run %s failed: %s", ctx.handle.run_id, reason)
    fail_run(ctx.files, reason)  # never raises: MLflow must not hide the run's failure
    return reason


def stop(ctx: RunContext, grace_s: float = 0.0) -> list[str]:
    """Phase 8 (safe after any phase): stop the loops, kill what still runs, delete the
    topics unless ``keep_topics``, close the client. Returns the names of the processes
    it killed.

    With ``grace_s`` > 0 (an interrupted run), the route job and the workers are first
    asked to drain what they have (stop markers) and given that long to exit."""
    h = ctx.handle
    if ctx.loop is not None:
        ctx.loop.signal()
    broker_lost = ctx.probe is not None and ctx.probe.lost
    if grace_s > 0 and not broker_lost:
        _drain_briefly(ctx, grace_s)
    killed = []
    for name, p in [("route", ctx.procs.route), *ctx.procs.workers.items()]:
        if p is None:
            continue
        label = "route" if name == "route" else f"worker-{name}"
        if p.poll() is None:
            killed.append(label)
        p.kill()  # its group: also members that outlived it (the route job's JVM)
        with contextlib.suppress(Exception):
            p.wait(timeout=60)
    if not ctx.settings.keep_topics and h.bootstrap is not None and not broker_lost:
        for t in (h.events_topic, h.routed_topic):
            try:
                ctx.kafka.delete_topic(t)
            except SkewlabError as exc:
                log.warning("could not delete topic %s: %s", t, exc)
    if ctx.client is not None:
        ctx.client.close(flush_s=0 if broker_lost else 10)  # no broker, no flush
        ctx.client = None
    log_librdkafka_to(None)  # the run's kafka.log is complete
    h.mark(P.STOPPED)
    return killed


def _drain_briefly(ctx: RunContext, grace_s: float) -> None:
    """Ask the children to drain and exit; wait at most ``grace_s`` in all."""
    deadline = time.monotonic() + grace_s
    files, procs = ctx.files, ctx.procs

    def wait(ps: list[Proc]) -> None:
        while any(p.poll() is None for p in ps) and time.monotonic() < deadline:
            time.sleep(0.1)

    if procs.route is not None:
        files.route_stop.touch()
        wait([procs.route])
    files.workers_stop.touch()
    files.spares_stop.touch()
    wait(list(procs.workers.values()))
