"""Warm start of a live run: wait until every component is ready, record how long each took.

A run produces only once the route job is warm (``route.ready``, written after
its first warm-up micro-batch) and every worker reads (``worker-<i>.ready``).
``route.ready`` holds JSON ``{"t_process", "t_session", "t_query", "t_warm"}``
(epoch s; a query on the route host: ``t_host`` for the first two) and ``spark_ui``;
an older route job wrote one number or nothing, which still counts as ready. A
worker's marker holds the epoch time it started reading.

The times go to the run handle (``startup``), split per component, so the
summary can report them apart from steady-state latency; :func:`startup_line`
renders them as the one ``start-up:`` line ``skewlab run`` prints.
:func:`start_services` starts the broker a run needs (phase 1 of every run kind).
:func:`preload` imports, in a background thread while Spark starts, the heavy libraries
the run's end needs (Great Expectations ~10 s, MLflow), so the end does not pay for them.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skewlab.envsettings import env_settings
from skewlab.io.delta.recovery import check_tables
from skewlab.live.driver.experiment import ExperimentError
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Procs, exit_cause
from skewlab.rundir import RunDir
from skewlab.services import get_service

__all__ = [
    "RouteReady",
    "preload",
    "preload_modules",
    "read_route_ready",
    "read_worker_ready",
    "start_services",
    "startup_line",
    "wait_ready",
]

log = logging.getLogger(__name__)

_ROUTE_STEPS = ("t_process", "t_session", "t_host", "t_query", "t_warm")


@dataclass(frozen=True)
class RouteReady:
    """What ``route.ready`` says (any field may be missing from an older route job)."""

    times: dict[str, float]
    """Subset of ``t_process``, ``t_session``, ``t_host``, ``t_query``, ``t_warm`` (epoch s)."""
    spark_ui: str | None = None


def read_route_ready(path: Path) -> RouteReady | None:
    """The route job's ready marker, read tolerantly: None while it does not exist
    (or is caught mid-write as a JSON prefix); JSON, one number or empty otherwise."""
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    if not text:
        return RouteReady({})
    try:
        data = json.loads(text)
    except ValueError:
        return None if text.startswith("{") else RouteReady({})  # torn JSON: look again
    if isinstance(data, (int, float)):
        return RouteReady({"t_query": float(data)})
    if not isinstance(data, dict):
        return RouteReady({})
    times = {k: float(v) for k in _ROUTE_STEPS if isinstance(v := data.get(k), (int, float))}
    ui = data.get("spark_ui")
    return RouteReady(times, ui if isinstance(ui, str) and ui else None)


def read_worker_ready(path: Path) -> float | None:
    """The epoch time in a worker's ready marker; None while absent or mid-write."""
    try:
        return float(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def route_startup(spawned: float, ready: RouteReady, seen: float) -> dict[str, float]:
    """Seconds of each route-job step, in the order the steps happened, each named by
    the step it ends: ``process`` (spawn -> interpreter up), ``session`` (-> Spark
    session), ``host`` (on the route host: -> the warm host took the query, instead of the
    first two), ``warm`` (-> warm-up micro-batch done), ``query`` (-> streaming query
    started); and ``total`` (spawn -> ready seen by the driver)."""
    out: dict[str, float] = {"total": max(0.0, seen - spawned)}
    prev_t = spawned
    for step, t in sorted(ready.times.items(), key=lambda kv: kv[1]):
        out[step.removeprefix("t_")] = max(0.0, t - prev_t)
        prev_t = t
    return out


def _size(path: Path) -> int:
    """Bytes in ``path`` (-1 while it does not exist)."""
    try:
        return path.stat().st_size
    except OSError:
        return -1


def wait_ready(
    files: RunDir,
    procs: Procs,
    workers: list[int],
    spawned: dict[str, float],
    stall_s: float = 300.0,
    limit_s: float = 1800.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    guard: Callable[[], None] | None = None,
    guarded: Collection[str] = (),
) -> dict[str, Any]:
    """Wait until the route job is warm and every worker in ``workers`` reads; the
    start-up record (see the module doc). ``guard`` (the run's supervisor) is called
    every tick and restarts the children named in ``guarded`` that exit; any other
    child that exits fails the run at once with its first error
    (:func:`~skewlab.live.driver.launch.exit_cause`).

    A slow start is not a failure: the wait gives up once no component still starting
    has written to its log (or become ready) for ``stall_s`` seconds, or after
    ``limit_s`` in all (a component that only repeats an error still writes)."""
    start = clock()
    route: RouteReady | None = None
    route_seen = 0.0
    ready: dict[str, float] = {}
    sizes: dict[str, int] = {}
    moved = start
    while True:
        now = clock()
        starting = ([] if route is not None else ["route"]) + [
            f"worker-{i}" for i in workers if f"worker-{i}" not in ready
        ]
        now_sizes = {name: _size(files.log(name)) for name in starting}
        if now_sizes != sizes:  # a log grew, or a component became ready
            moved = now
        sizes = now_sizes
        if route is None:
            route = read_route_ready(files.route_ready)
            route_seen = now
        for i in workers:
            name = f"worker-{i}"
            if name not in ready and (t := read_worker_ready(files.worker_ready(i))) is not None:
                ready[name] = t
        if route is not None and len(ready) == len(workers):
            break
        if guard is not None:
            guard()
        watched = [("route", procs.route), *((f"worker-{i}", procs.workers[i]) for i in workers)]
        for name, p in watched:
            if guard is not None and name in guarded:
                continue
            if p is not None and (rc := p.poll()) is not None:
                what = "route job" if name == "route" else name.replace("-", " ")
                raise ExperimentError(
                    f"{what} exited before it was ready: {exit_cause(rc, files.log(name))}"
                )
        if now - moved > stall_s or now - start > limit_s:
            missing = ", ".join(
                "route job" if name == "route" else name.replace("-", " ") for name in starting
            )
            why = (
                f"nothing new in their logs for {stall_s:.0f} s"
                if now - moved > stall_s
                else f"still starting after {limit_s:.0f} s"
            )
            raise ExperimentError(f"not ready: {missing} ({why}; logs in {files})")
        sleep(0.1)
    return {
        "route": route_startup(spawned.get("route", route_seen), route, route_seen),
        "workers": {
            name: round(max(0.0, t - spawned.get(name, t)), 3) for name, t in sorted(ready.items())
        },
        "spark_ui": route.spark_ui,
    }


def startup_line(startup: dict[str, Any], spark_ui: str | None = None) -> str | None:
    """``start-up: broker 0.1 s; route job 14.2 s (process 1.0, session 6.1, warm 5.1,
    query 2.0); workers 1.8-2.4 s`` from a handle's ``startup`` record (None if empty)."""
    parts = []
    if (s := startup.get("services")) is not None:
        parts.append(f"broker {s:.1f} s")
    route = startup.get("route") or {}
    if "total" in route:
        steps = ", ".join(f"{k} {v:.1f}" for k, v in route.items() if k != "total")
        parts.append(f"route job {route['total']:.1f} s" + (f" ({steps})" if steps else ""))
    ws = list((startup.get("workers") or {}).values())
    if ws:
        lo, hi = min(ws), max(ws)
        parts.append(f"workers {lo:.1f} s" if hi - lo < 0.05 else f"workers {lo:.1f}-{hi:.1f} s")
    if not parts:
        return None
    line = "start-up: " + "; ".join(parts)
    ui = spark_ui or startup.get("spark_ui")
    return f"{line}; Spark UI {ui}" if ui else line


def preload_modules(quality: bool, mlflow: bool) -> list[str]:
    """The heavy modules a run's end imports: GX's if it checks quality, MLflow's if it logs."""
    return (["great_expectations", "great_expectations.expectations"] if quality else []) + (
        ["mlflow"] if mlflow else []
    )


def preload(modules: Collection[str]) -> threading.Thread | None:
    """Import ``modules`` in a daemon thread (started; ``None`` when there are none).

    An import that fails is only logged: the end imports the module again and reports
    the error where it is used."""
    if not modules:
        return None

    def load() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as exc:  # the end's own import reports it
                log.debug("preloading %s failed: %s", name, exc)

    thread = threading.Thread(target=load, name="skewlab-preload", daemon=True)
    thread.start()
    return thread


def start_services(h: RunHandle, bootstrap: str | None) -> str:
    """Phase 1 of every kind of run: a local Delta root checked, then the bootstrap
    servers (``bootstrap``, ``$SKEWLAB_KAFKA_BOOTSTRAP``, else the embedded broker under
    the data dir, started if needed) recorded in the handle (not saved)."""
    if "://" not in h.delta_root:
        check_tables(h.delta_root)
    t0 = time.time()
    bootstrap = bootstrap or env_settings().kafka_bootstrap
    if not bootstrap:
        bootstrap = get_service("broker", Path(h.home)).start().url
        h.startup["services"] = round(time.time() - t0, 3)
    h.bootstrap = bootstrap
    return bootstrap
