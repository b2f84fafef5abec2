"""Supervision of a live run while it produces and drains: children and the broker.

:class:`Supervisor` restarts a child that exited unasked (after a backoff, :class:`RestartPolicy`)
and a worker hung with records waiting (no committed progress for ``stall_s``), and fails the
run once its restarts are used; the children are the route job and the workers, and a kind's
processes named by role (:class:`Roles`: the autoscale run's monitor and controller).
:class:`BrokerProbe` fails the run when the broker cannot be reached for ``grace_s``. Why
restarts keep the run exact, the hang rule, and scale-out instances stopped on purpose:
docs/live-run.md, "skewlab.live.driver.supervise". ``stall_s`` is the run's setting
(``--stall-s``); each hang is also written to the run dir's ``hangs.txt`` (:func:`hangs`),
which the run's summary lists; a worker run as a Spark task is watched by its task instead
(:class:`StallRule`, the one rule). While a run is supervised, librdkafka's log of this
process goes to the run's ``kafka.log``.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from skewlab.errors import ConfigError
from skewlab.io.kafka._common import log_librdkafka_to
from skewlab.live.driver.experiment import ExperimentError
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.launch import Procs, exit_cause
from skewlab.rundir import RunDir
from skewlab.spec import DEFAULTS

__all__ = [
    "BrokerLost",
    "BrokerProbe",
    "ChildFailed",
    "RestartPolicy",
    "Roles",
    "StallRule",
    "Supervisor",
    "WorkerProgress",
    "hang_line",
    "hangs",
    "record_hang",
    "run_stall_s",
    "stop_guarded",
]

log = logging.getLogger(__name__)

WorkerProgress = Callable[[int], tuple[int, int] | None]
"""Worker index -> (its committed offset of ``routed``, the end offset of its partition of
``routed``), or None while that is not known (:meth:`Watcher.worker_offsets
<skewlab.live.report.watch.Watcher.worker_offsets>`)."""

STALL_S: float = DEFAULTS["stall_s"]
"""Default seconds (of the supervisor's clock) a worker may go without committed progress
while records wait for it before it is declared hung."""


class ChildFailed(ExperimentError):
    """A child of the run failed and has no restart left; the message names its cause."""


class BrokerLost(ExperimentError):
    """The run's broker stopped answering."""


@dataclass(frozen=True)
class RestartPolicy:
    """Bounded restarts with exponential backoff, per process name.

    The ``n``-th restart (0-based) of a process waits
    ``min(max_backoff_s, backoff_s * factor**n)`` seconds after its exit is seen;
    after ``max_restarts`` restarts the next exit fails the run.
    """

    max_restarts: int = 3
    backoff_s: float = 0.5
    factor: float = 2.0
    max_backoff_s: float = 10.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ConfigError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if self.backoff_s < 0 or self.max_backoff_s < self.backoff_s:
            raise ConfigError(
                f"backoff must satisfy 0 <= backoff_s <= max_backoff_s, got "
                f"{self.backoff_s} / {self.max_backoff_s}"
            )
        if self.factor < 1:
            raise ConfigError(f"backoff factor must be >= 1, got {self.factor}")

    def delay(self, n: int) -> float:
        """Seconds before restart number ``n`` (0-based)."""
        return min(self.max_backoff_s, self.backoff_s * self.factor**n)


@dataclass(frozen=True)
class Roles:
    """A run's processes named by role (an autoscale run's ``monitor`` and ``controller``),
    supervised beside or instead of a route job and workers: ``procs()`` gives the run's
    current ``{name: process}``, ``start(name)`` starts one again (recorded in the handle);
    one that exits 0 once the run's ``stop`` file exists has finished, not failed."""

    procs: Callable[[], Mapping[str, Any]]
    start: Callable[[str], None]
    stop: Path


@dataclass
class Supervisor:
    """Restarts the run's children that exit unasked, and workers that hang (see
    docs/live-run.md).

    ``workers()`` lists the worker indexes to watch (for a scale-out run the
    instances its state manager runs: it starts and stops them itself, and a
    worker that left the list was stopped, not crashed; a worker's exit that fails the run
    is decided, as a restart, one backoff later). A child that exits
    with 0 after its stop marker was touched has finished, not failed.

    With ``progress`` set, a watched worker is hung by :class:`StallRule` on :attr:`clock`;
    its group is killed and it is restarted like one that exited: same backoff, same budget.
    Not a worker run as a Spark task (``watches_hangs``): its task watches it by the same
    rule and fails the attempt, and Spark's task retry restarts it.
    """

    procs: Procs
    handle: RunHandle
    files: RunDir
    workers: Callable[[], Iterable[int]]
    policy: RestartPolicy = field(default_factory=RestartPolicy)
    clock: Callable[[], float] = time.monotonic
    broker: BrokerProbe | None = None
    """When set, a child is never restarted while no bootstrap server answers: its exit
    is the broker's loss (:class:`BrokerLost`), not the child's failure."""
    pending: dict[str, float] = field(default_factory=dict)
    """Process name -> clock time its restart is due."""
    _dead: dict[str, Any] = field(default_factory=dict)
    """Process name -> the process whose exit scheduled that restart."""
    progress: WorkerProgress | None = None
    """Where the workers' committed and end offsets come from; None: hangs are not watched."""
    stall_s: float | None = None
    """Seconds without progress that make a worker hung; None: the run's setting
    (``stall_s`` of the handle's settings, else :data:`STALL_S`)."""
    _rule: StallRule = field(init=False)
    """The hang rule's counts per worker."""
    roles: Roles | None = None
    """The kind's processes named by role, watched and restarted as the route job is."""
    _failing: dict[str, str] = field(default_factory=dict)
    """Worker name -> why the run fails, for a pending worker with no restart to come (its
    budget used, or its engine's retries: ``retried_by_engine``). Decided when due, as a
    restart would be: a scale-out state manager may have stopped or replaced it meanwhile."""

    def __post_init__(self) -> None:
        if self.stall_s is None:
            self.stall_s = run_stall_s(self.handle.settings)
        self._rule = StallRule(self.stall_s)
        log_librdkafka_to(self.files.log("kafka"))  # the driver's clients: the run's log

    def _children(self) -> list[tuple[str, Any, Callable[[], None]]]:
        out: list[tuple[str, Any, Callable[[], None]]] = [
            ("route", self.procs.route, self.procs.restart_route)
        ]
        for i in self.workers():
            out.append((f"worker-{i}", self.procs.workers.get(i), _bind(self.procs, i)))
        if self.roles is not None:
            out += [(n, p, partial(self.roles.start, n)) for n, p in self.roles.procs().items()]
        return out

    def _role(self, name: str) -> bool:
        return self.roles is not None and name in self.roles.procs()

    def _finished(self, name: str, rc: int) -> bool:
        if rc != 0:
            return False
        if self.roles is not None and self._role(name):
            return self.roles.stop.exists()
        if name == "route":
            return self.files.route_stop.exists()
        return self.files.workers_stop.exists() or self.files.spares_stop.exists()

    def _watched(self, name: str) -> bool:
        """Whether ``name`` is still to be kept running (asked again at each decision:
        a scale-out instance may have been stopped on purpose since the look began)."""
        if name == "route" or self._role(name):
            return True
        return int(name.split("-", 1)[1]) in set(self.workers())

    def check(self) -> None:
        """Look at every child once: schedule restarts, run the due ones, or raise
        :class:`ChildFailed` when a child exited with no restart left."""
        now = self.clock()
        for name in list(self.pending):
            if not self._watched(name):  # stopped on purpose since its exit was seen
                del self.pending[name]
                self._failing.pop(name, None)
                log.info("%s was stopped by the run; no restart", _what(name))
        for name, proc, restart in self._children():
            if proc is None:
                continue
            due = self.pending.get(name)
            if due is not None and proc is not self._dead.get(name):
                del self.pending[name]  # started again meanwhile by the run (state manager)
                self._failing.pop(name, None)
                continue
            if due is not None:
                if now >= due and name in self._failing:
                    raise ChildFailed(self._failing.pop(name))  # still watched, not replaced
                if now >= due:
                    self._broker_alive(name, "its restart is due")
                    del self.pending[name]
                    n = self.handle.restarts.get(name, 0) + 1
                    self.handle.restarts[name] = n
                    self.handle.save()  # counted even if this driver dies while starting it
                    most = self.policy.max_restarts
                    log.warning("restarting %s (restart %d of %d)", name, n, most)
                    restart()  # saves the handle with the new process record
                continue
            rc = proc.poll()
            if rc is None:
                if name.startswith("worker-") and (stalled := self._stalled(name, proc, now)):
                    self._hung(name, proc, now, *stalled)
                continue
            if self._finished(name, rc) or not self._watched(name):
                continue
            cause = exit_cause(rc, self.files.log(name))
            used = self.handle.restarts.get(name, 0)
            proc.kill()  # what is left of its group (the route job's JVM)
            self._broker_alive(name, f"it exited ({cause})")
            out = used >= self.policy.max_restarts or getattr(proc, "retried_by_engine", False)
            failed = f"{_what(name)} failed after {used} restart(s): {cause}"
            if out and (name == "route" or self._role(name)):
                raise ChildFailed(failed)
            if out:  # a worker: a state manager may be stopping it on purpose right now
                self._failing[name] = failed
                delay = self.policy.delay(0)
                then = "the run fails unless it was stopped"
            else:
                delay = self.policy.delay(used)
                then = f"restart in {delay:.1f} s"
            log.warning("%s exited (%s); %s", _what(name), cause, then)
            self.pending[name] = now + delay
            self._dead[name] = proc

    def _stalled(self, name: str, proc: Any, now: float) -> tuple[float, int] | None:
        """(seconds without progress, records waiting) once worker ``name`` (alive) is hung
        (:class:`StallRule`); None otherwise, and always for a worker whose engine watches
        it (``watches_hangs``: a Spark task does, :mod:`skewlab.live.mains.workers_app`)."""
        if self.progress is None or getattr(proc, "watches_hangs", False):
            return None
        i = int(name.split("-", 1)[1])
        ready = self.files.worker_ready(i).exists()
        return self._rule.look(name, proc, ready, partial(self.progress, i), now)

    def _hung(self, name: str, proc: Any, now: float, stalled: float, waiting: int) -> None:
        """Kill hung worker ``name``'s group (SIGKILL ends a stopped process too) and
        schedule its restart like an exit's, on the same budget; the cause goes to the
        run dir's ``hangs.txt`` either way."""
        self._rule.forget(name)
        what = f"{name} made no progress for {stalled:.1f} s with {waiting:,} records waiting"
        proc.kill()
        self._broker_alive(name, f"it made no progress for {stalled:.1f} s")
        used = self.handle.restarts.get(name, 0)
        restarted = used < self.policy.max_restarts
        record_hang(self.files, hang_line(name, stalled, waiting, restarted))
        if not restarted:
            raise ChildFailed(f"{what}; killed, and it has no restart left ({used} used)")
        log.warning("%s; restarting it", what)
        self.pending[name] = now + self.policy.delay(used)
        self._dead[name] = proc

    def _broker_alive(self, name: str, what: str) -> None:
        """Raise :class:`BrokerLost` (one line naming the broker) instead of restarting
        ``name`` while no bootstrap server accepts a connection."""
        if self.broker is None or self.broker.reachable():
            return
        self.broker.lost = True
        raise BrokerLost(
            f"broker {self.broker.bootstrap} unreachable ({self.broker.error}): "
            f"{_what(name)} not restarted ({what}); the run cannot go on"
        )


def run_stall_s(settings: Mapping[str, Any]) -> float:
    """The hang time of a run's settings (a handle's ``settings``): ``stall_s``, else
    :data:`STALL_S`."""
    return float(settings.get("stall_s") or STALL_S)


@dataclass
class StallRule:
    """The hang rule (docs/live-run.md, "skewlab.live.driver.supervise"), on a clock the
    caller reads: a worker is hung when, its ready marker written, its committed offset has
    not moved for ``stall_s`` while its partition's end offset is above it (the time counts
    from the last look that saw it move, saw no record waiting, or saw a new process).

    Not judged before its ready marker exists: a worker writes it after restoring its state
    (a scale-out shadow's restore may wait for a checkpoint), a warm instance not yet
    released has none, and a restart removes the old one. An unknown progress (None, or the
    look failed) neither starts nor stops the count. The driver's :class:`Supervisor` and a
    Spark task watching its worker (:mod:`skewlab.live.mains.workers_app`) both judge by it."""

    stall_s: float
    _since: dict[str, tuple[Any, int, float]] = field(default_factory=dict)
    """Worker name -> (its process, committed offset, clock time since when that offset
    has not moved while records waited)."""

    def __post_init__(self) -> None:
        if not self.stall_s > 0:
            raise ConfigError(f"stall_s must be > 0, got {self.stall_s}")

    def look(
        self,
        name: str,
        proc: Any,
        ready: bool,
        progress: Callable[[], tuple[int, int] | None],
        now: float,
    ) -> tuple[float, int] | None:
        """One look at worker ``name`` run by ``proc`` at ``now``: (seconds without progress,
        records waiting) once it is hung, else None. ``progress()`` gives (committed offset,
        end offset of its partition) and is only called once ``ready``."""
        if not ready:
            self._since.pop(name, None)
            return None
        try:
            seen = progress()
        except Exception as exc:  # a failed look is no evidence either way
            log.debug("progress of %s not read: %s", name, exc)
            return None
        if seen is None:
            return None
        committed, end = seen
        last = self._since.get(name)
        if last is None or last[0] is not proc or last[1] != committed or end <= committed:
            self._since[name] = (proc, committed, now)
            return None
        if now - last[2] < self.stall_s:
            return None
        return now - last[2], end - committed

    def forget(self, name: str) -> None:
        """Start ``name``'s count afresh at its next look (it was killed)."""
        self._since.pop(name, None)


def hang_line(name: str, stalled_s: float, waiting: int, restarted: bool) -> str:
    """The ``hangs.txt`` line of a hung worker killed and restarted (or with no restart left)."""
    done = "killed and restarted" if restarted else "killed, no restart left"
    return f"{name} hung {stalled_s:.0f} s with {waiting:,} records waiting: {done}"


def record_hang(files: RunDir, line: str) -> None:
    """Append ``line`` (:func:`hang_line`) to the run's ``hangs.txt`` (a write that fails is
    logged, not raised: the restart matters more than its record)."""
    try:
        with files.hangs.open("a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError as exc:
        log.warning("could not record the hang (%s) in %s: %s", line, files.hangs, exc)


def hangs(files: RunDir) -> list[str]:
    """The hung workers the run's supervisors found and what they did, oldest first."""
    try:
        text = files.hangs.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [line for line in text.splitlines() if line.strip()]


def stop_guarded(loop: Any, guard: Callable[[], None], tick_s: float = 0.25) -> None:
    """``loop.stop()`` (which waits for the loop to end) while ``guard()`` runs every
    ``tick_s`` in this thread.

    A scale-out state manager keeps deciding after the input is produced until its
    instances have worked off their backlog; an instance that dies then must be
    restarted meanwhile (the manager waits for it), not only once the drain begins.
    An exception of ``guard`` (a child out of restarts, the broker lost) is raised
    at once; the loop was asked to stop already."""
    done = threading.Event()

    def stop() -> None:
        try:
            loop.stop()
        finally:
            done.set()

    threading.Thread(target=stop, name="loop-stop", daemon=True).start()
    while not done.wait(tick_s):
        guard()


def _bind(procs: Procs, i: int) -> Callable[[], None]:
    return lambda: procs.restart_worker(i)


def _what(name: str) -> str:
    return "route job" if name == "route" else name.replace("-", " ")


def _tcp_connect(host: str, port: int, timeout_s: float) -> None:
    with socket.create_connection((host, port), timeout=timeout_s):
        pass


@dataclass
class BrokerProbe:
    """Fails the run when no bootstrap server accepts a TCP connection for ``grace_s``.

    :meth:`check` probes at most once per ``interval_s`` (``connect`` and ``clock``
    injected for tests); :attr:`lost` is set once it raised.
    """

    bootstrap: str
    grace_s: float = 3.0
    interval_s: float = 1.0
    timeout_s: float = 1.0
    clock: Callable[[], float] = time.monotonic
    connect: Callable[[str, int, float], None] = _tcp_connect
    lost: bool = False
    _last: float | None = None
    _down_since: float | None = None
    _error: str = ""

    def _servers(self) -> list[tuple[str, int]]:
        out = []
        for item in self.bootstrap.split(","):
            host, _, port = item.strip().rpartition(":")
            if host and port.isdigit():
                out.append((host.strip("[]"), int(port)))
        return out

    @property
    def error(self) -> str:
        """The last connection error :meth:`reachable` saw."""
        return self._error

    def reachable(self) -> bool:
        """True if some bootstrap server accepts a TCP connection (or none is parseable:
        nothing to probe); remembers the last error for the failure message."""
        for host, port in self._servers():
            try:
                self.connect(host, port, self.timeout_s)
                return True
            except OSError as exc:
                self._error = f"{host}:{port}: {exc.strerror or exc}"
        return not self._servers()  # nothing to probe: not our call

    def check(self) -> None:
        """Probe if ``interval_s`` has passed since the last probe; raises :class:`BrokerLost`
        (and sets :attr:`lost`) once the broker has been unreachable for ``grace_s``."""
        now = self.clock()
        if self._last is not None and now - self._last < self.interval_s:
            return
        self._last = now
        if self.reachable():
            self._down_since = None
            return
        if self._down_since is None:
            self._down_since = now
        if now - self._down_since >= self.grace_s:
            self.lost = True
            raise BrokerLost(
                f"broker {self.bootstrap} unreachable for {now - self._down_since:.0f} s "
                f"({self._error}); the run cannot go on"
            )
