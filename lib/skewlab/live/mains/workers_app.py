"""The workers app: ``python -m skewlab.live.mains.workers_app RUN_DIR`` (a run's own) or
``... --warm DIR`` (the warm app many runs share: :mod:`skewlab.live.driver.warm_app`).

A Spark application (``skewlab-workers <run id>``, or ``skewlab-workers (warm)``) on
``$SKEWLAB_SPARK_MASTER`` (default ``local[N,F]``: N slots, F attempts per task), speculation
off, its event log in ``events/``, its Python daemon :mod:`.workers_daemon`, ``app.ready``
once it ran a Python task. Steps: :mod:`skewlab.live.driver.spark_launcher`; this process:

1. submits each new request as one job (one partition), tagged with its id, in its own job
   group (the warm app: the run's), from its own thread;
2. each task runs the request's command as its child (:func:`run_instance`), which dies with
   it; a worker's is watched for a hang (:class:`HangWatch`): killed, the attempt failed;
3. cancels the job of a request whose cancel marker appeared;
4. writes each job's end code; leaves once the run is stopped or done (:func:`ended`); the
   warm app forgets such a run (:meth:`Server.drop`) and leaves on its ``stop`` file.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.envsettings import env_settings
from skewlab.io.kafka import connect
from skewlab.live.driver.handle import HandleError, Phase, RunHandle, Status
from skewlab.live.driver.launch import PROC_ENV, process_args
from skewlab.live.driver.spark_launcher import PASSED_ENV, EngineDir, Request, kill_tree
from skewlab.live.driver.supervise import StallRule, hang_line, record_hang
from skewlab.live.driver.warm_app import WARM_FLAG, WarmDir, forget, on_cluster
from skewlab.live.worker.fetch import end_offset
from skewlab.live.worker.settings import read_worker_settings
from skewlab.rundir import RunDir
from skewlab.services.spark_standalone import (
    WORKERS_APP_CORES,
    WORKERS_APP_EXECUTOR_CORES,
    WORKERS_APP_EXECUTOR_MEMORY,
)
from skewlab.spark.class_archive import driver_java_options
from skewlab.spark.session import JAVA_OPTIONS, driver_address, scratch_dir, scratch_settings

if TYPE_CHECKING:
    from pyspark import SparkContext

log = logging.getLogger(__name__)

SLOTS = 32
"""Task slots of the local master: one per instance (workers, spares), each mostly waiting."""
ATTEMPTS = 4
"""Attempts per task (Spark's ``maxFailures``): a worker is restarted up to 3 times."""
TICK_S = 0.2
HOST_GONE_S = 60.0
"""The warm app leaves once the route host beside it has been gone this long."""
WATCH_EVERY_S = 1.0
"""The shortest time between a task's looks at its worker's progress."""
LOOKS_PER_STALL = 5
"""A task looks at its worker ``LOOKS_PER_STALL`` times per ``stall_s`` (every 3 s at the
default 15 s), so a hang is found at most a fifth of ``stall_s`` late. Each look costs ~40
ms of CPU (delta-rs opens ``worker_progress``, a broker round trip): every second, a run's
4 watches took 0.17 cores at any rate (docs/real-stack.md, session 33)."""


def watch_every_s(stall_s: float) -> float:
    """Seconds between a hang watch's looks for a run whose hang time is ``stall_s``."""
    return max(WATCH_EVERY_S, stall_s / LOOKS_PER_STALL)


WARM_UP_GROUP = "warm-up"
"""Job group of the one trivial job run before ``app.ready`` (its Python daemon started)."""


def master() -> str:
    """``$SKEWLAB_SPARK_MASTER`` if it names a cluster, else ``local[SLOTS,ATTEMPTS]``
    (plain ``local[N]`` never retries a task)."""
    m = env_settings().spark_master or ""
    return m if on_cluster(m) else f"local[{SLOTS},{ATTEMPTS}]"


def cluster_conf(m: str) -> dict[str, str]:
    """On a cluster master: the app's caps (its task slots, in executors the master spreads
    over the nodes and replaces on a surviving node) and the driver's address; else none."""
    if not on_cluster(m):
        return {}
    return {
        "spark.cores.max": str(WORKERS_APP_CORES),
        "spark.executor.cores": str(WORKERS_APP_EXECUTOR_CORES),
        "spark.executor.memory": WORKERS_APP_EXECUTOR_MEMORY,
        **driver_address(m),
    }


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it when the task's Python worker dies (a
    cancelled task's worker is killed by Spark; its command must not outlive it)."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _remove(paths: Iterable[str]) -> None:
    for p in paths:
        Path(p).unlink(missing_ok=True)


Progress = Callable[[], tuple[int, int] | None]
"""(the worker's committed offset of ``routed``, the end offset of its partition), or None."""


@dataclass
class HangWatch:
    """Step 2 for a worker: its task watches its command by :class:`~skewlab.live.driver.
    supervise.StallRule` (the driver's rule), with the progress and clock given."""

    name: str
    files: RunDir
    """The worker's run: its ready marker (nothing is judged before it exists), its
    ``hangs.txt``."""
    worker: int
    progress: Progress
    stall_s: float
    clock: Callable[[], float] = time.monotonic
    every_s: float = WATCH_EVERY_S
    close: Callable[[], None] = lambda: None
    """Releases what ``progress`` holds (its clients)."""

    def run(self, ended: Callable[[float], bool]) -> tuple[float, int] | None:
        """Look every ``every_s`` until ``ended(every_s)`` (which waits up to that long) says
        the command ended: None; or until it is hung: (seconds without progress, records
        waiting)."""
        rule = StallRule(self.stall_s)
        try:
            while not ended(self.every_s):
                ready = self.files.worker_ready(self.worker).exists()
                if hung := rule.look(self.name, self, ready, self.progress, self.clock()):
                    return hung
            return None
        finally:
            self.close()


class CommittedOffset:
    """A worker's newest committed routed offset in ``worker_progress`` (0 before its first
    commit), read incrementally: each look reads only the table's files written since the
    last (:meth:`~skewlab.io.delta.store.DeltaStore.read_new`). Reading the run's whole table
    with a query every second cost a run's 4 watches 0.2-0.3 cores whatever the rate
    (docs/real-stack.md, session 31). The table is append-only and a worker's offsets only
    grow, so the running maximum is the newest."""

    def __init__(self, store: Any, run_id: str, worker: int) -> None:
        self.store, self.run_id, self.worker = store, run_id, worker
        self.seen: set[str] = set()
        self.offset = 0

    def __call__(self) -> int:
        import pyarrow.compute as pc

        new = self.store.read_new(
            "worker_progress", self.run_id, ["worker", "routed_offset"], self.seen
        )
        mine = new.filter(pc.equal(new.column("worker"), self.worker)).column("routed_offset")
        if len(mine):
            self.offset = max(self.offset, int(pc.max(mine).as_py()))
        return self.offset


def routed_watch(req: Request) -> HangWatch | None:
    """The :class:`HangWatch` a worker's request asks for (``req.watch``): its committed
    offset in ``worker_progress`` and its partition's end in ``routed``, read as the driver's
    supervisor reads them; None for a request with no watch (a consumer)."""
    if req.watch is None:
        return None
    from skewlab.io.delta.store import DeltaStore

    files, i = RunDir.of(req.watch["run_dir"]), int(req.watch["worker"])
    s = read_worker_settings(str(files.worker_settings(i)))
    client = connect(s.kafka)
    committed = CommittedOffset(DeltaStore(s.delta_root), s.run_id, i)

    def progress() -> tuple[int, int]:
        end = end_offset(client, s.topic, i)
        return committed(), end

    stall_s = float(req.watch["stall_s"])
    every_s = watch_every_s(stall_s)
    return HangWatch(req.name, files, i, progress, stall_s, every_s=every_s, close=client.close)


def _watch(
    p: subprocess.Popen[bytes], created: float, watch: HangWatch | None
) -> tuple[list[tuple[float, int]], threading.Event]:
    """Run ``watch`` on ``p`` in a thread until the event is set (``p`` ended); the list gets
    (seconds, records waiting) before the thread kills ``p``'s tree for a hang."""
    found: list[tuple[float, int]] = []
    done = threading.Event()
    if watch is None:
        return found, done

    def run() -> None:
        try:
            hung = watch.run(done.wait)
        except Exception as exc:  # the watch must never fail the task
            log.warning("hang watch of %s failed: %s", watch.name, exc)
            return
        if hung is not None:
            found.append(hung)
            kill_tree(p.pid, created)  # SIGKILL ends a stopped process too

    threading.Thread(target=run, name=f"hang-watch-{watch.name}", daemon=True).start()
    return found, done


def run_instance(
    engine_dir: str, req: Request, watch_of: Callable[[Request], HangWatch | None] = routed_watch
) -> None:
    """Step 2, in the Spark task: remove ``req.fresh``, run ``req.cmd`` with output appended
    to its log, recording the attempt, watched for a hang (``watch_of``); a non-zero exit
    removes ``req.fresh`` again and fails the task unless it was cancelled. A hang (the
    process tree killed) is written to the run's ``hangs.txt`` as the supervisor writes one."""
    import psutil
    from pyspark import TaskContext

    d = EngineDir(Path(engine_dir))
    if d.cancel(req.id).exists():
        return
    _remove(req.fresh)  # a retry is not ready before its own command says so
    tc = TaskContext.get()
    attempt = tc.attemptNumber() if tc is not None else 0
    task = tc.taskAttemptId() if tc is not None else -1
    own = {k: v for k, v in os.environ.items() if not k.startswith(PASSED_ENV)}
    env = {**own, **req.env, "PYTHONUNBUFFERED": "1", PROC_ENV: req.log}  # the run's settings
    with open(req.log, "ab") as out:
        out.write(f"--- {req.name}: Spark task {task}, attempt {attempt}\n".encode())
        out.flush()
        p = subprocess.Popen(
            req.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env, preexec_fn=_die_with_parent,
        )  # fmt: skip
    try:
        created = psutil.Process(p.pid).create_time()
    except psutil.Error:
        created = 0.0
    entry = {"attempt": attempt, "task": task, "pid": p.pid, "create_time": created}
    d.add_attempt(req.id, {**entry, "host": os.uname().nodename, "t": time.time()})
    try:
        watch = watch_of(req)
    except Exception as exc:  # no watch is no reason not to run the worker
        log.warning("no hang watch for %s: %s", req.name, exc)
        watch = None
    found, done = _watch(p, created, watch)
    rc = p.wait()
    hung = found[:1]  # filled before the kill that ended ``p``; a later find is not its end
    done.set()
    d.add_attempt(req.id, {**entry, "rc": rc})
    if rc == 0 or d.cancel(req.id).exists():
        return
    _remove(req.fresh)  # nothing waits for the retry's start to stop taking it for ready
    why = f"{req.name} exited with {rc} (attempt {attempt}); log: {req.log}"
    if hung and watch is not None:
        line = hang_line(req.name, *hung[0], restarted=attempt + 1 < ATTEMPTS)
        record_hang(watch.files, line)
        with open(req.log, "ab") as out:
            out.write(f"--- {line} (Spark task {task}, attempt {attempt})\n".encode())
        why = f"{line} (attempt {attempt}); log: {req.log}"
    raise RuntimeError(why)


def _run_all(engine_dir: str, reqs: Iterable[Request]) -> None:
    for r in reqs:
        run_instance(engine_dir, r)


def _submit(sc: SparkContext, d: EngineDir, req: Request, run_id: str | None) -> None:
    """Step 1 and step 4 for one request (in its own thread: the job blocks it). The run's
    own app gives it a job group of its own; a warm app the run's group (``run_id``)."""
    if run_id is None:
        sc.setJobGroup(req.id, f"{req.name} ({' '.join(req.cmd[-2:])})", interruptOnCancel=True)
    else:
        sc.setJobGroup(run_id, f"skewlab-workers {run_id}: {req.name}", interruptOnCancel=True)
    sc.addJobTag(req.id)
    failed = False
    where = str(d.path)
    try:
        sc.parallelize([req], 1).foreachPartition(functools.partial(_run_all, where))
    except Exception as exc:
        failed = True
        log.warning("job of %s ended: %s", req.name, str(exc).splitlines()[0])
    d.finish(req.id, d.job_rc(req.id, failed))


def ended(run_dir: Path) -> str | None:
    """Step 4: why the run is over for its workers app, or None while it may go on.

    Over: its handle says stopped (phase ``stopped``: the driver's stop after the summary or
    a failure; status ``stopped``: ``skewlab stop`` / ``gc``) or done, or its run dir is gone.
    A failed run is not over: a new driver (``skewlab resume``, a crash run's next driver, a
    DAG task's retry) resumes it with its running workers; who gives it up stops it (an
    orphan's app is ``skewlab gc``'s, as its other processes). A handle that cannot be read
    is no evidence either way."""
    if not run_dir.is_dir():
        return "its run dir is gone"
    try:
        h = RunHandle.load(run_dir)
    except HandleError as exc:
        log.debug("handle not read (%s); serving on", exc)
        return None
    if h.done(Phase.STOPPED):
        return "the run is stopped"
    if Status(h.status) in (Status.DONE, Status.STOPPED):
        return f"the run is {h.status}"
    return None


class Server:
    """Steps 1 and 3 for the runs an app serves; ``warm``: many runs (jobs grouped by run)."""

    def __init__(self, sc: SparkContext, warm: bool = False) -> None:
        self.sc, self.warm = sc, warm
        self.submitted: dict[str, Any] = {}
        self.cancelled: set[str] = set()

    def tick(self, run_dir: Path) -> None:
        """Submit the run's new requests (step 1); cancel those marked (step 3)."""
        from pyspark import InheritableThread

        d = EngineDir.of_run(run_dir)
        group = run_dir.name if self.warm else None
        reqs = d.requests()
        for req in reqs:
            if req.id not in self.submitted and d.read_rc(req.id) is None:
                t = InheritableThread(target=_submit, args=(self.sc, d, req, group), daemon=True)
                self.submitted[req.id] = t
                t.start()
                log.info("submitted %s as job %s", req.name, req.id)
        for req in reqs:
            job = self.submitted.get(req.id)
            if job is None or req.id in self.cancelled or not job.is_alive():
                continue
            if d.cancel(req.id).exists():
                if self.warm:
                    self.sc.cancelJobsWithTag(req.id)
                else:
                    self.sc.cancelJobGroup(req.id)
                self.cancelled.add(req.id)
                log.info("cancelled job %s", req.id)

    def drop(self, run_dir: Path, why: str) -> None:
        """Step 3 of :mod:`skewlab.live.driver.warm_app`: the run is over; cancel its jobs
        (their cancel markers first: cancelled, so not retried) and forget them."""
        d = EngineDir(RunDir.of(run_dir).spark_workers)
        running = [r.id for r in d.requests() if d.read_rc(r.id) is None]
        for rid in running:
            with contextlib.suppress(OSError):
                d.cancel(rid).touch()
        if running:
            self.sc.cancelJobGroup(run_dir.name)
        log.info("run %s left: %s; %d job(s) cancelled", run_dir.name, why, len(running))


def serve(sc: SparkContext, run_dir: Path) -> None:
    """Steps 1, 3 and 4 until the run is over (:func:`ended`)."""
    server = Server(sc)
    while (why := ended(run_dir)) is None:
        server.tick(run_dir)
        time.sleep(TICK_S)
    log.info("leaving: %s; cancelling every job", why)
    sc.cancelAllJobs()


def _forget_stale(w: WarmDir) -> None:
    """A request of a registered run written before this app started belongs to an app
    that ended (a new one starts only then): its job ended with it (-9), never resubmitted."""
    rec = w.app_record()
    if rec is None:
        return
    for run_dir in w.registered():
        with contextlib.suppress(OSError):
            d = EngineDir(RunDir.of(run_dir).spark_workers)
            for req in d.requests():
                stale = d.request(req.id).stat().st_mtime < rec.create_time
                if stale and d.read_rc(req.id) is None:
                    d.finish(req.id, -signal.SIGKILL)


def serve_warm(sc: SparkContext, w: WarmDir) -> None:
    """The warm app (:mod:`skewlab.live.driver.warm_app`): steps 1, 3 and 4 of every
    registered run until it is over, until ``stop`` exists, the app's dir is gone, or the
    route host beside it has been gone :data:`HOST_GONE_S`."""
    server = Server(sc, warm=True)
    seen_host = time.monotonic()
    while w.path.is_dir() and not w.stop_file.exists():
        if not w.host_gone():
            seen_host = time.monotonic()
        elif time.monotonic() - seen_host > HOST_GONE_S:
            log.info("leaving: the route host beside this app is gone")
            break
        for run_dir, seen in w.registered().items():
            if (why := ended(run_dir)) is None:
                server.tick(run_dir)
            else:
                server.drop(run_dir, why)
                forget(w, run_dir, seen)
        time.sleep(TICK_S)
    log.info("leaving; cancelling every job")
    sc.cancelAllJobs()


def main(argv: list[str] | None = None) -> int:
    """Start the app on the run dir given (``--warm DIR``: the warm app in DIR), serve it,
    stop the Spark context."""
    given = sys.argv[1:] if argv is None else argv
    warm = given[:1] == [WARM_FLAG]
    args = process_args(given[1:] if warm else given, "workers_app DIR")
    if args is None:
        return 2
    from pyspark.sql import SparkSession

    where = Path(args[0]).resolve()
    os.environ["PYSPARK_PYTHON"] = sys.executable  # tasks import skewlab from this venv
    w = WarmDir(where) if warm else None
    if w is not None:
        ready, events, name = w.ready, w.events, "skewlab-workers (warm)"
    else:
        d = EngineDir.of_run(where)
        ready, events, name = d.ready, d.events, f"skewlab-workers {where.name}"
    events.mkdir(parents=True, exist_ok=True)
    m = master()
    java = env_settings().spark_java_opts or JAVA_OPTIONS  # a quick JVM start, as the route job
    builder = SparkSession.builder
    scratch = scratch_settings(scratch_dir(ready.parent), driver_java_options(java))
    for key, value in scratch.items():  # its temporary files in its own dir, as the route job's
        builder = builder.config(key, value)
    if on_cluster(m):
        builder = builder.config("spark.executor.extraJavaOptions", java)
    for key, value in cluster_conf(m).items():
        builder = builder.config(key, value)
    spark = (
        builder.appName(name)
        .master(m)
        .config("spark.speculation", "false")
        .config("spark.task.maxFailures", str(ATTEMPTS))
        .config("spark.eventLog.enabled", "true")
        .config("spark.eventLog.dir", events.as_uri())
        .config("spark.eventLog.compress", "false")
        .config("spark.eventLog.rolling.enabled", "false")  # one JSON-lines file
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.port", "0")
        .config("spark.python.worker.reuse", "false")
        .config("spark.python.daemon.module", "skewlab.live.mains.workers_daemon")
        .getOrCreate()
    )
    sc = spark.sparkContext
    log.info("workers app %s on %s, UI %s", sc.applicationId, sc.master, sc.uiWebUrl)
    sc.setJobGroup(WARM_UP_GROUP, "start the Python workers' daemon before any request")
    sc.parallelize([0], 1).map(lambda x: x).count()  # the first request then needs no daemon
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(json.dumps({"app_id": sc.applicationId, "ui": sc.uiWebUrl, "master": m}))
    os.replace(tmp, ready)
    try:
        if w is not None:
            _forget_stale(w)
            serve_warm(sc, w)
        else:
            serve(sc, where)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
