"""The controller process: the pure Sec. V-C state machine, executed for real.

It wraps :class:`skewlab.autoscale.controller.Controller` (which decides) and does the I/O its
actions ask for: consumer instances (local processes or Spark tasks, :mod:`.instances`), inbox
messages, Delta records, the persisted group state. Its lifecycle:

1. restore the persisted group state; skip to the end of its inbox and the newest measurement;
2. synchronize: query every known consumer; the replies become the believed group;
3. loop every ``poll_s``: inbox messages, the newest measurement, dead consumers, the
   Sentinel timeout; the actions of each reply are executed at once;
4. record each finished reassignment (``decisions``, ``consumer_assignments``);
5. stop (the run's stop file): ``exit`` to every consumer, wait, kill stragglers.

More: docs/autoscale.md, "The controller process".
"""

from __future__ import annotations

import json
import logging
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
from skewlab.live.autoscale.instances import (
    ConsumerProc,
    ConsumerTask,
    Instance,
    instances_state,
    load_instances,
    resume_actions,
    start_consumer,
)
from skewlab.live.autoscale.protocol import (
    CONTROLLER_INBOX,
    LiveSettings,
    Measurement,
    Message,
    inbox,
    read_new,
)
from skewlab.rundir import RunDir, app_id

__all__ = ["LiveController", "load_state", "main"]

log = logging.getLogger(__name__)

EXIT_WAIT_S = 15.0


def load_state(
    path: Path,
) -> tuple[ControllerSnapshot | None, dict[int, Instance], list[tuple[int, Instance]]]:
    """The persisted snapshot, ``{consumer: instance}`` and the retiring ``(consumer,
    instance)`` (:func:`~skewlab.live.autoscale.instances.load_instances`); nothing: a fresh
    start."""
    if not path.exists():
        return None, {}, []
    d = json.loads(path.read_text())
    snap = ControllerSnapshot(
        d["iteration"],
        Assignment(tuple(d["owner"]), tuple(d["members"])) if d["owner"] is not None else None,
        d["last_reassign"],
    )
    return (snap, *load_instances(d))


@dataclass
class _Pending:
    """A reassignment whose group management is under way."""

    decision: Reassignment
    reason: str
    decide_ms: float
    began: float
    handoffs: dict[int, dict[str, Any]] = field(default_factory=dict)


class LiveController:
    """Executes the pure controller's actions: steps 1-5 of the module doc."""

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
        snap, procs, retiring = load_state(s.state_file)
        cfg = ControllerConfig(s.algorithm, s.capacity, s.bin_capacity, s.iteration_s)
        self.ctrl: Controller = cfg.build(snap, self.clock)
        self.procs: dict[int, Instance] = procs
        self.retiring: list[tuple[int, Instance]] = retiring
        self.starting: set[int] = set()
        """Consumers this controller started that have not said ``ready`` yet."""
        self.unacked: dict[tuple[int, int], bool] = {}
        """``(consumer, partition)`` -> start (True) or stop (False) sent, not yet acked."""
        self.queried: set[int] = set()
        """Consumers asked for their assignment that have not reported yet."""
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
            self._on_ready(msg.consumer)
        elif msg.op == "report":
            self.queried.discard(msg.consumer)
            self._drive(self.ctrl.on_report, msg.consumer, msg.partitions)
        elif msg.op == "ack":
            if self.unacked.get((msg.consumer, msg.partition)) == msg.started:
                del self.unacked[(msg.consumer, msg.partition)]
            if self.pending is not None:
                h = self.pending.handoffs.get(msg.partition)
                if h is not None:
                    h["start_acked" if msg.started else "stop_acked"] = msg.t
            self._drive(self.ctrl.on_ack, msg.consumer, msg.partition, msg.started)

    def _on_ready(self, consumer: int) -> None:
        """A consumer's ``ready``: the one awaited after its start, or (Spark tasks) a new
        attempt of one already running, which Spark started after the last one failed: it
        is sent again what it must hold (:func:`~.instances.resume_actions`), or ``exit``
        again if it was retiring."""
        proc = self.procs.get(consumer)
        if consumer not in self.starting and proc is None and self._retire_ready(consumer):
            return
        if consumer in self.starting or not isinstance(proc, ConsumerTask):
            self.starting.discard(consumer)
            self._drive(self.ctrl.on_consumer_ready, consumer)
            return
        owner = self.ctrl.current.owner if self.ctrl.current is not None else ()
        queried = consumer in self.queried and self.ctrl.phase is Phase.SYNCHRONIZE
        actions = resume_actions(consumer, owner, self.unacked, queried)
        log.warning(
            "consumer %d is back as Spark task attempt %d; sent again: %s",
            consumer, proc.attempts() - 1, actions,
        )  # fmt: skip
        self._resend(actions)

    def _resend(self, actions: list[Action]) -> None:
        """Send ``actions`` (queries, stops, starts) again to a new attempt of a consumer: no
        new hand-off, only what its dead attempt was told (:func:`~.instances.resume_actions`)."""
        now = self.wall()
        for a in actions:
            if isinstance(a, QueryAssignment):
                self._send(Message("query", a.consumer, t=now))
            elif isinstance(a, (StopPartition, StartPartition)):
                started = isinstance(a, StartPartition)
                self.unacked[(a.consumer, a.partition)] = started
                op = "start" if started else "stop"
                self._send(Message(op, a.consumer, a.partition, t=now))
        self.client.flush()

    def _retire_ready(self, consumer: int) -> bool:
        """Whether ``consumer`` is a retiring Spark task (a new attempt of it said ``ready``);
        it is then told ``exit`` again."""
        if not any(c == consumer and isinstance(p, ConsumerTask) for c, p in self.retiring):
            return False
        log.warning("retiring consumer %d is back as a new Spark task attempt: exit", consumer)
        self._send(Message("exit", consumer, t=self.wall()))
        self.client.flush()
        return True

    def _check_alive(self) -> None:
        self.retiring = [(c, p) for c, p in self.retiring if p.alive()]
        members = self.ctrl.current.members if self.ctrl.current is not None else ()
        for c in members:
            if c not in self.procs:
                self.procs[c] = ConsumerProc(-1)  # known to the snapshot, no process: lost
        for c, proc in list(self.procs.items()):
            if not proc.alive():
                log.warning("consumer %d (pid %d) is gone", c, proc.pid)
                del self.procs[c]
                self.starting.discard(c)
                self.unacked = {k: v for k, v in self.unacked.items() if k[0] != c}
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
                    self.retiring.append((a.consumer, proc))
            elif isinstance(a, QueryAssignment):
                self.queried.add(a.consumer)
                self._send(Message("query", a.consumer, t=now))
            elif isinstance(a, StopPartition):
                self.unacked[(a.consumer, a.partition)] = False
                self._send(Message("stop", a.consumer, a.partition, t=now))
                handoffs[a.partition] = {"partition": a.partition, "from": a.consumer}
                handoffs[a.partition]["stop_sent"] = now
            elif isinstance(a, StartPartition):
                self.unacked[(a.consumer, a.partition)] = True
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
        """Start ``consumer`` on the run's engine. A Spark task of the same id still retiring
        is cancelled first: a retry of it would read the new one's inbox."""
        if consumer + 1 >= self.s.max_consumers + 1:
            log.error("consumer %d has no inbox (max_consumers=%d)", consumer, self.s.max_consumers)
        for c, p in self.retiring:
            if c == consumer and isinstance(p, ConsumerTask):
                p.kill()
        proc = start_consumer(RunDir.of(self.s.run_dir).settings, consumer, self.s.engine)
        self.procs[consumer] = proc
        self.starting.add(consumer)
        if isinstance(proc, ConsumerTask):
            log.info("started consumer %d (Spark job group %s)", consumer, proc.proc.rid)
        else:
            log.info("started consumer %d (pid %d)", consumer, proc.pid)

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
            **instances_state(self.procs, self.retiring),
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
        everyone = [*self.procs.values(), *(p for _, p in self.retiring)]
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
