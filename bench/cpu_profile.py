"""CPU seconds per process class over a time window: where every core's time goes.

:class:`CpuSampler` (a thread, psutil) samples the cumulative user + system CPU
time of every process on the machine every ``interval_s``; :meth:`CpuSampler.window`
then gives each process class's CPU seconds between two wall times (linear
between samples; a process that ended inside the window counts up to its last
sample). Classes, from the process tree and command line:

* ``driver``: the bench process itself (the run's producer and control loop);
* ``broker``: the Kafka broker's JVM (``kafka.Kafka``), the one whose command line names
  the broker's port (``-Dskewlab.broker=host:port``);
* ``route JVM`` / ``route driver`` / ``route py workers``: the route job's JVM, its
  Python driver (the ``foreachBatch`` sink: the batch's plan, loads files, Delta rows,
  the appender's Python side), and the Python processes its Spark starts (the daemon and
  its forked workers: the tasks' decode, routing and records); a route host's
  (:attr:`CpuSampler.hosts`, detached from the bench) alike;
* ``workers app``: the Spark app that runs the skewlab workers as tasks (its JVM, its
  Python driver and Python workers; not the worker processes themselves);
* ``worker N``: each skewlab worker (``skewlab.live.worker.process``);
* ``run, other``: any other process under the bench (e.g. a state manager);
* ``not this run``: everything else on the machine (other engineers' load);
* ``measurement (py-spy)``: the profilers ``--pyspy`` starts (not counted in the total);
* ``measurement (sampler)``: this sampler's own thread, which runs in the bench process
  (taken out of ``driver``, not counted in the total).

``$CPU_PROFILE_DETAIL`` (a file): each :meth:`CpuSampler.window` appends every process's
CPU seconds there (class, pid, command), to see which process a class's time is.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import psutil

DRIVER, BROKER, ROUTE_JVM, ROUTE_DRIVER, ROUTE_PY = (
    "driver (producer, control)",
    "broker (Kafka)",
    "route JVM",
    "route driver (py)",
    "route py workers",
)
WORKERS_APP, WORKERS, OTHER, NOT_RUN, PYSPY, SAMPLER = (
    "workers app",
    "workers (all)",
    "run, other",
    "not this run",
    "measurement (py-spy)",
    "measurement (sampler)",
)
CLASSES = (
    DRIVER,
    BROKER,
    ROUTE_JVM,
    ROUTE_DRIVER,
    ROUTE_PY,
    WORKERS_APP,
    WORKERS,
    OTHER,
    NOT_RUN,
    PYSPY,
    SAMPLER,
)
WORKERS_APP_MODULE = "skewlab.live.mains.workers_app"


@dataclass
class _Proc:
    cls: str
    name: str
    samples: list[tuple[float, float]]
    pid: int = 0
    cmd: str = ""


def _cmd(p: psutil.Process) -> str:
    """The start of ``p``'s command line, as kept in :attr:`_Proc.cmd` ("" if gone)."""
    try:
        return " ".join(p.cmdline())[:160]
    except psutil.Error:
        return ""


def _execd(p: psutil.Process, rec: _Proc) -> bool:
    """Whether ``p`` (still there) runs another command line than ``rec`` was classified by."""
    return _cmd(p) not in ("", rec.cmd)


class CpuSampler:
    """Sample every process's CPU time in a thread (see the module docstring)."""

    def __init__(
        self, broker_port: str, interval_s: float = 0.2, pyspy_dir: str | None = None
    ) -> None:
        self.broker_port = broker_port
        self.pyspy_dir = pyspy_dir
        self._spies: list[subprocess.Popen[bytes]] = []
        self.interval_s = interval_s
        self.me = os.getpid()
        self.hosts: set[int] = set()
        """Detached processes of this run (a route host): they and theirs count as the run's."""
        self.procs: dict[tuple[int, float], _Proc] = {}
        self.own: list[tuple[float, float]] = []
        """(wall time, this sampler thread's CPU seconds) after each sample."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)

    def start(self) -> CpuSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for spy in self._spies:
            try:
                spy.wait(timeout=30)
            except subprocess.TimeoutExpired:
                spy.terminate()

    def _spy(self, pid: int, cls: str) -> None:
        """py-spy on the skewlab workers and the route job's driver (collapsed stacks)."""
        if self.pyspy_dir is None or not (cls.startswith("worker ") or cls == ROUTE_DRIVER):
            return
        out = os.path.join(self.pyspy_dir, f"{cls.replace(' ', '_')}-{pid}.txt")
        cmd = ["py-spy", "record", "-p", str(pid), "-f", "raw", "-o", out, "-r", "100"]
        spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        self._spies.append(
            subprocess.Popen(
                [spy, *cmd[1:], "--nonblocking"],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )

    def _classify(self, p: psutil.Process) -> str:
        try:
            cmd = " ".join(p.cmdline())
            parents = p.parents()
            chain = {q.pid for q in parents}
            name = p.name()
            in_app = any(WORKERS_APP_MODULE in " ".join(q.cmdline()) for q in parents)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return NOT_RUN
        if p.pid == self.me:
            return DRIVER
        if "py-spy" in cmd:
            return PYSPY
        if "kafka.Kafka" in cmd and f":{self.broker_port}" in cmd:
            return BROKER
        if self.me not in chain and not self.hosts & (chain | {p.pid}):
            return NOT_RUN
        if "skewlab.live.worker.process" in cmd:
            return f"worker {cmd.split()[-1].rsplit('/', 1)[-1]}"
        if in_app or WORKERS_APP_MODULE in cmd:
            return WORKERS_APP
        if name == "java":
            return ROUTE_JVM
        if "skewlab.live.mains.route_job" in cmd or "skewlab.live.mains.route_host" in cmd:
            return ROUTE_DRIVER
        if "pyspark" in cmd or "pydaemon" in cmd or "skewlab.spark" in cmd:
            return ROUTE_PY
        return OTHER

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):  # a process gone mid-sample
                self._sample()
            self.own.append((time.time(), time.thread_time()))
            self._stop.wait(self.interval_s)

    def _sample(self) -> None:
        now = time.time()
        for p in psutil.process_iter(["pid", "create_time", "cpu_times", "name"]):
            info = p.info
            ct = info.get("cpu_times")
            if ct is None:
                continue
            key = (info["pid"], info["create_time"])
            rec = self.procs.get(key)
            if rec is None:
                rec = self.procs[key] = _Proc(self._classify(p), info["name"], [], key[0])
                rec.cmd = _cmd(p)
                self._spy(info["pid"], rec.cls)
            elif rec.name != info["name"] or (rec.cls == WORKERS_APP and _execd(p, rec)):
                # exec'd since: spark-class -> java, or a worker the app forked (first seen
                # with its parent's command line) -> python -m skewlab.live.worker.process
                rec.cls, rec.name, rec.cmd = self._classify(p), info["name"], _cmd(p)
            rec.samples.append((now, ct.user + ct.system))

    def window(self, t0: float, t1: float) -> dict[str, float]:
        """CPU seconds per class between wall times ``t0`` and ``t1`` (and each process's
        appended to ``$CPU_PROFILE_DETAIL`` if set: module doc)."""
        out: dict[str, float] = {}
        each = []
        for rec in self.procs.values():
            used = _at(rec.samples, t1) - _at(rec.samples, t0)
            if used > 0:
                out[rec.cls] = out.get(rec.cls, 0.0) + used
                each.append((used, rec))
        mine = _at(self.own, t1) - _at(self.own, t0)  # the sampler's CPU is not the driver's
        if mine > 0 and DRIVER in out:
            mine = min(mine, out[DRIVER])
            out[DRIVER] -= mine
            out[SAMPLER] = mine
        detail = os.environ.get("CPU_PROFILE_DETAIL")
        if detail:
            with open(detail, "a") as f:
                f.write(f"window {t0:.1f} -> {t1:.1f} ({t1 - t0:.1f} s)\n")
                for used, rec in sorted(each, key=lambda x: (x[1].cls, -x[0])):
                    f.write(f"  {rec.cls:<22} {used:8.2f} s  {rec.pid:>7}  {rec.cmd}\n")
        return out


def _at(samples: list[tuple[float, float]], t: float) -> float:
    """Cumulative CPU at wall time ``t`` (0 before the first sample, the last after it)."""
    if not samples or t <= samples[0][0]:
        return samples[0][1] if samples and t >= samples[0][0] else 0.0
    for (ta, ca), (tb, cb) in itertools.pairwise(samples):
        if ta <= t <= tb:
            return ca + (cb - ca) * (t - ta) / max(tb - ta, 1e-9)
    return samples[-1][1]


RUN_CLASSES = CLASSES[:8]
"""The classes that are this run's own work (not other load, not the profilers)."""
LOAD_CLASSES = CLASSES[:2]
"""The run's load and its broker: the producer (and control loop) and the Kafka broker."""


def _is_run(name: str) -> bool:
    return name in RUN_CLASSES or name.startswith("worker ")


def run_cores(cpu: dict[str, float]) -> float:
    """CPU seconds of this run's own processes in a window of :meth:`CpuSampler.window`."""
    return sum(v for k, v in cpu.items() if _is_run(k))


def budget(cpu: dict[str, float], events: int, raw: float, ratio: float, cores: int) -> list[str]:
    """Lines: the CPU per event the whole run may spend to sustain ``ratio`` x the raw
    consume rate ``raw`` on ``cores`` cores, beside what this run spent, split into the
    load and the broker (``LOAD_CLASSES``: any pipeline on this machine pays them) and
    the pipeline itself (route job and workers)."""
    per = 1e6 / max(events, 1)
    spent = per * run_cores(cpu)
    load = per * sum(v for k, v in cpu.items() if k in LOAD_CLASSES)
    allowed = 1e6 * cores / (ratio * raw)
    return [
        f"CPU budget at {ratio:.2f}x raw ({ratio * raw:,.0f} events/s on {cores} cores, all"
        f" busy): {allowed:.1f} us/event for the whole run",
        f"this run: {spent:.1f} us/event ({spent / allowed:.2f}x the budget); of it producer"
        f" + broker {load:.1f}, route job + workers {spent - load:.1f}"
        f" (their share of the budget: {max(allowed - load, 0.0):.1f})",
    ]


def table(cpu: dict[str, float], events: int, seconds: float) -> list[str]:
    """Lines: class, CPU s, us per event, cores; workers summed after their own lines."""
    lines = [f"{'process':<28} {'CPU s':>8} {'us/event':>9} {'cores':>6}"]
    workers = {k: v for k, v in cpu.items() if k.startswith("worker ")}
    rest = {k: v for k, v in cpu.items() if not k.startswith("worker ")}
    if workers:
        rest[WORKERS] = sum(workers.values())
    order = [c for c in CLASSES if c in rest] + sorted(workers)
    total = 0.0
    for name in order:
        v = rest.get(name, workers.get(name, 0.0))
        if _is_run(name) and not name.startswith("worker "):
            total += v
        lines.append(
            f"{name:<28} {v:>8.2f} {1e6 * v / max(events, 1):>9.1f} {v / max(seconds, 1e-9):>6.2f}"
        )
    lines.append(
        f"{'this run, all':<28} {total:>8.2f} {1e6 * total / max(events, 1):>9.1f}"
        f" {total / max(seconds, 1e-9):>6.2f}"
    )
    return lines
