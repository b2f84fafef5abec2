"""The controller process: the pure Sec. V-C state machine, executed for real.

It wraps :class:`skewlab.autoscale.Controller` (which decides) and does the I/O its actions ask
for: consumer processes, inbox messages, Delta records, the persisted group state. Its
lifecycle (restore, synchronize, loop, record, stop): docs/autoscale.md, "The controller process".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewlab.autoscale.algorithms import Reassignment
from skewlab.autoscale.base import Assignment
from skewlab.autoscale.controller import (
    Action,
    Controller,
    ControllerConfig,
    ControllerSnapshot,
    Phase,
    QueryAssignment,
    StartConsumer,
    StartPartition,
    StopConsumer,
    StopPartition,
)
from skewlab.clock import Clock, SystemClock
from skewlab.control.autoscale import record_reassignment
from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.autoscale.protocol import (
    CONTROLLER_INBOX,
    LiveSettings,
    Measurement,
    Message,
    inbox,
    read_new,
)
from skewlab.rundir import RunDir, app_id

__all__ = ["ConsumerProc", "LiveController", "load_state", "main"]

log = logging.getLogger(__name__)

CONSUMER_MODULE = "skewlab.live.autoscale.consumer"
EXIT_WAIT_S = 15.0


@dataclass
class ConsumerProc:
    """A consumer process: our child (``popen``) or adopted from a previous controller."""

    pid: int
    popen: subprocess.Popen[bytes] | None = None

    def alive(self) -> bool:
        """True while the consumer runs: our child not yet exited, or (started by an earlier
        controller) ``/proc/<pid>`` is a live, non-zombie consumer process (a reused pid is not)."""
        if self.popen is not None:
            return self.popen.poll() is None
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes()
        except OSError:
            return False
        state = stat.rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X") and CONSUMER_MODULE.encode() in cmdline

    def kill(self) -> None:
        """SIGKILL the consumer if it is still alive, and reap it if it is our child."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        if self.popen is not None:
            self.popen.wait()


def load_state(path: Path) -> tuple[ControllerSnapshot | None, dict[int, int], list[int]]:
    """The persisted snapshot, ``{consumer: pid}`` and retiring pids (nothing: a fresh start)."""
    if not path.exists():
        return None, {}, []
    d = json.loads(path.read_text())
    snap = ControllerSnapshot(
        d["iteration"],
        Assignment(tuple(d["owner"]), tuple(d["members"])) if d["owner"] is not None else None,
        d["last_reassign"],
    )
    return snap, {int(c): int(p) for c, p in d["pids"].items()}, list(d.get("retiring", []))


@dataclass
class _Pending:
    """A reassignment whose group management is under way."""

    decision: Reassignment
    reason: str
    decide_ms: float
    began: float
    handoffs: dict[int, dict[str, Any]] = field(default_factory=dict)


class LiveController:
    """Executes the pure controller's actions; the steps: docs/autoscale.md,
    "The controller process"."""

    def __init__(
        self,
        s: LiveSettings,
        client: KafkaClient | None = None,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.s = s
        self.client = client or connect(s.kafka)
        self.clock = clock or SystemClock()
        self.wall = wall
        self.store = DeltaStore(s.delta_root)
        snap, pids, retiring = load_state(s.state_file)
        cfg = ControllerConfig(s.algorithm, s.capacity, s.bin_capacity, s.iteration_s)
        self.ctrl: Controller = cfg.build(snap, self.clock)
        self.procs = {c: ConsumerProc(pid) for c, pid in pids.items()}
        self.retiring = [ConsumerProc(pid) for pid in retiring]
        self.pending: _Pending | None = None
        self._saved = ""
        self.inbox_pos = 0
        self.monitor_pos = 0

    # -- 1./2. restore and synchronize -------------------------------------------------

    def begin(self) -> None:
        """Steps 1-2: skip to the inbox's end and the newest measurement, then synchronize
        (``Controller.start`` queries every known consumer); persist the group state."""
        topics = self.s.topics
        self.inbox_pos = self.client.end_offsets(topics.metadata).get(CONTROLLER_INBOX, 0)
        self.monitor_pos = max(0, self.client.end_offsets(topics.monitor).get(0, 0) - 1)
        log.info("controller starts at iteration %d; synchronizing", self.ctrl.iteration)
        self._drive(self.ctrl.start)
        self._check_alive()
        self._persist()

    # -- 3. loop -----------------------------------------------------------------------

    def step(self) -> None:
        """One pass of step 3: new inbox messages, the newest measurement (if it has one
        speed per partition), dead consumers, the Sentinel ``tick``; each reply's actions
        executed at once, then the group state persisted."""
        values, self.inbox_pos = read_new(
            self.client, self.s.topics.metadata, CONTROLLER_INBOX, self.inbox_pos
        )
        for raw in values:
            self._on_message(Message.decode(raw))
        values, self.monitor_pos = read_new(self.client, self.s.topics.monitor, 0, self.monitor_pos)
        if values:
            m = Measurement.decode(values[-1])
            if len(m.speeds) == self.s.partitions:
                self._drive(self.ctrl.on_measurement, list(m.speeds))
        self._check_alive()
        self._drive(self.ctrl.tick)
        self._persist()

    def _on_message(self, msg: Message) -> None:
        if msg.op == "ready":
            self._drive(self.ctrl.on_consumer_ready, msg.consumer)
        elif msg.op == "report":
            self._drive(self.ctrl.on_report, msg.consumer, msg.partitions)
        elif msg.op == "ack":
            if self.pending is not None:
                h = self.pending.handoffs.get(msg.partition)
                if h is not None:
                    h["start_acked" if msg.started else "stop_acked"] = msg.t
            self._drive(self.ctrl.on_ack, msg.consumer, msg.partition, msg.started)

    def _check_alive(self) -> None:
        self.retiring = [p for p in self.retiring if p.alive()]
        members = self.ctrl.current.members if self.ctrl.current is not None else ()
        for c in members:
            if c not in self.procs:
                self.procs[c] = ConsumerProc(-1)  # known to the snapshot, no process: lost
        for c, proc in list(self.procs.items()):
            if not proc.alive():
                log.warning("consumer %d (pid %d) is gone", c, proc.pid)
                del self.procs[c]
                self._drive(self.ctrl.on_consumer_lost, c)

    def _drive(self, call: Callable[..., list[Action]], *args: Any) -> None:
        """Feed one event to the pure controller; execute and record what follows."""
        n = len(self.ctrl.decisions)
        began = time.perf_counter()
        actions = call(*args)
        took_ms = (time.perf_counter() - began) * 1e3
        if len(self.ctrl.decisions) > n:
            reason, decision = self.ctrl.decisions[-1]
            self.pending = _Pending(decision, reason, took_ms, self.wall())
        self._execute(actions)
        if self.pending is not None and self.ctrl.phase is Phase.SENTINEL:
            self._record(self.pending)
            self.pending = None
        self._persist()

    def _execute(self, actions: list[Action]) -> None:
        now = self.wall()
        handoffs = self.pending.handoffs if self.pending is not None else {}
        for a in actions:
            if isinstance(a, StartConsumer):
                self._spawn(a.consumer)
            elif isinstance(a, StopConsumer):
                self._send(Message("exit", a.consumer, t=now))
                proc = self.procs.pop(a.consumer, None)
                if proc is not None:
                    self.retiring.append(proc)
            elif isinstance(a, QueryAssignment):
                self._send(Message("query", a.consumer, t=now))
            elif isinstance(a, StopPartition):
                self._send(Message("stop", a.consumer, a.partition, t=now))
                handoffs[a.partition] = {"partition": a.partition, "from": a.consumer}
                handoffs[a.partition]["stop_sent"] = now
            elif isinstance(a, StartPartition):
                self._send(Message("start", a.consumer, a.partition, t=now))
                h = handoffs.setdefault(a.partition, {"partition": a.partition, "from": -1})
                h["to"], h["start_sent"] = a.consumer, now
        if actions:
            self.client.flush()
        if self.pending is not None and any(
            isinstance(a, (StopPartition, StartPartition)) for a in actions
        ):
            crash_point("autoscale.controller.mid_reassign")  # moves sent, not yet recorded

    def _send(self, msg: Message) -> None:
        self.client.produce(self.s.topics.metadata, msg.encode(), partition=inbox(msg.consumer))

    def _spawn(self, consumer: int) -> None:
        if consumer + 1 >= self.s.max_consumers + 1:
            log.error("consumer %d has no inbox (max_consumers=%d)", consumer, self.s.max_consumers)
        files = RunDir.of(self.s.run_dir)
        out = open(files.log(f"consumer-{consumer}"), "ab")  # noqa: SIM115 - the child's
        popen = subprocess.Popen(
            [sys.executable, "-m", CONSUMER_MODULE, str(files.settings), str(consumer)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        out.close()
        self.procs[consumer] = ConsumerProc(popen.pid, popen)
        log.info("started consumer %d (pid %d)", consumer, popen.pid)

    # -- 4. record ---------------------------------------------------------------------

    def _record(self, p: _Pending) -> None:
        """Step 4 through the shared record of every autoscale path."""
        d = p.decision
        extra = {
            "decide_ms": p.decide_ms,
            "manage_s": self.wall() - p.began,
            "handoffs": [h for h in p.handoffs.values() if "to" in h],
        }
        record_reassignment(
            self.store, self.s.run_id, self.s.topics.data, d, policy=self.s.algorithm,
            reason=p.reason, ts_ms=round(p.began * 1000), app=app_id("controller", self.s.run_id),
            version=d.iteration, extra=extra,
        )  # fmt: skip
        log.info(
            "iteration %d done (%s): %d consumers, %d moved, Rscore %.3f in %.2f s",
            d.iteration, p.reason, d.consumers, len(d.moved), d.rscore, extra["manage_s"],
        )  # fmt: skip

    def _persist(self) -> None:
        snap = self.ctrl.snapshot()
        state = {
            "iteration": snap.iteration,
            "owner": list(snap.assignment.owner) if snap.assignment is not None else None,
            "members": list(snap.assignment.members) if snap.assignment is not None else [],
            "last_reassign": snap.last_reassign,
            "phase": self.ctrl.phase.value,
            "pids": {str(c): p.pid for c, p in self.procs.items()},
            "retiring": [p.pid for p in self.retiring],
        }
        text = json.dumps(state)
        if text != self._saved:
            tmp = self.s.state_file.with_suffix(".tmp")
            tmp.write_text(text)
            tmp.replace(self.s.state_file)
            self._saved = text

    # -- 5. stop -----------------------------------------------------------------------

    def shutdown(self) -> None:
        """Step 5: ``exit`` to every consumer, wait up to :data:`EXIT_WAIT_S` for them, kill
        stragglers (and retiring ones), persist the empty group and close the client."""
        for c in list(self.procs):
            self._send(Message("exit", c, t=self.wall()))
        self.client.flush()
        everyone = [*self.procs.values(), *self.retiring]
        deadline = self.clock.now() + EXIT_WAIT_S
        while any(p.alive() for p in everyone) and self.clock.now() < deadline:
            time.sleep(0.1)
        for p in everyone:
            p.kill()
        self.procs.clear()
        self.retiring.clear()
        self._persist()
        self.client.close()

    def run(self) -> None:
        """Steps 1-5 until the run's stop file appears."""
        self.begin()
        while not self.s.stop_file.exists():
            self.step()
            time.sleep(self.s.poll_s)
        self.shutdown()


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.autoscale.controller SETTINGS_JSON``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.stderr.write("usage: controller SETTINGS_JSON\n")
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    LiveController(LiveSettings.from_file(args[0])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
