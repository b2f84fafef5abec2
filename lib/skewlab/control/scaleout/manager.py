"""The live state manager: worker scores -> scale-out policy -> processes, checkpoints, routing.

A thread of the run's driver when ``scale_out`` is set; each of the W workers is one group
with its own policy. One :meth:`StateManager.step` (every ``interval_s`` of the injected clock,
or at once when a group's pending instances are ready):

1. read every running instance's signals (input rate, lag, busy) and score it;
2. past start-up, feed each group's policy (``observe``, ``on_ready``, ``on_caught_up``);
3. execute the actions: start / stop workers, checkpoint, switch routing;
4. sweep keys seen since the last switch onto their instance (:mod:`.sweep`);
5. log every action as a ``decisions`` row and sample instances and fairness.

When it steps: :mod:`.pacing`. Start-up, instance ids and each policy's semantics:
docs/control.md, section ``skewlab.control.scaleout.manager``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from skewlab.clock import Clock, EpochClock
from skewlab.control.loop import ThreadLoop
from skewlab.control.scaleout.events import EventTracking, Move
from skewlab.control.scaleout.pacing import Pacing, event_wait
from skewlab.control.scaleout.recovery import recover
from skewlab.control.scaleout.settings import Group, Processes
from skewlab.control.scaleout.state import (
    Placement,
    VersionRows,
    changed_share,
    score_from_backlog,
    write_checkpoint,
)
from skewlab.control.scaleout.sweep import Sweeping
from skewlab.errors import ConfigError
from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.rundir import RunDir
from skewlab.runsettings import StateManagerSettings
from skewlab.state.base import (
    Action,
    Phase,
    Replay,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
)
from skewlab.state.fairness import app_fairness
from skewlab.state.score import Level

__all__ = ["StateManager", "start_loop"]

log = logging.getLogger(__name__)


_CopyRequest = tuple[Group, int, list[int], dict[int, int | None], dict[int, int]]
"""A checkpoint copy to write: group, checkpoint id, instances, commit versions, routed ends."""


class StateManager(Pacing, EventTracking, Sweeping):
    """Steps 1-5 of the module doc; ``run(stop)`` repeats them until ``stop`` is set."""

    def __init__(
        self,
        s: StateManagerSettings,
        kafka: Any,
        routed_topic: str,
        procs: Processes,
        clock: Clock | None = None,
        store: DeltaStore | None = None,
        wall: Callable[[], float] = time.time,
        wait: Callable[[threading.Event, float], bool] = event_wait,
    ) -> None:
        self.s, self.kafka, self.topic, self.procs = s, kafka, routed_topic, procs
        self.clock = clock or EpochClock()
        self.wall = wall
        self.wait = wait
        """``wait(event, s)``: block up to ``s`` (on :attr:`clock`), True once ``event`` is set."""
        self._unready: set[int] = set()
        """Groups whose pending instances were not all ready at the last step."""
        self.store = store or DeltaStore(s.delta_root)
        cfg = s.policy_config()
        self.groups = [
            Group(g, cfg.build(clock=self.clock), {0: g}, [g], s.spares(g))
            for g in range(s.workers)
        ]
        self.running: set[int] = set(range(s.workers))
        self.map: dict[str, tuple[int, int]] = {}
        self.version, self.effective_ms, self.n_decisions = 0, 0, 0
        self.t0 = self.clock.now()
        self._prev: dict[int, list[tuple[float, int, int]]] = {}
        """Per instance: (time, routed end, committed offset) over the signal window."""
        self.timeline: list[tuple[float, int, int, float, float]] = []
        """Per step: (s since start, instances running, holding keys, input /s, processed /s)."""
        self._walls: list[float] = []
        self.instance_s = 0.0
        self.events: list[dict[str, Any]] = []
        self.checkpoints = self.checkpoints_skipped = 0
        self.group_keys = [0] * s.workers
        """Keys seen per group at the last sweep (the scaled operator's state size)."""
        self._placement = Placement(s.workers)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._cp_store = DeltaStore(s.delta_root)  # the checkpoint thread's own handles
        self._writing: dict[int, Future[dict[str, Any]]] = {}
        self._skipped: set[tuple[int, int]] = set()
        """(group, checkpoint id) requests skipped while the group's previous one was writing."""
        self._cp_refs: dict[tuple[int, int], dict[str, dict[str, int | None]]] = {}
        """(group, checkpoint id) -> per instance the commit version (tau) and routed end
        (beta's end) the checkpoint was taken at: its theta is that instance's committed
        ``operator_state`` rows at tau (append-only), which a restore reads there without
        waiting for the copy (``refs`` of a plan, :meth:`_start`)."""
        self._deferred: list[_CopyRequest] = []
        """Copies of checkpoints the started instances restore by reference, written once
        their group's scale event ended (:meth:`_write_deferred`): on the decision's path
        the copy (0.6-0.9 s for 100k keys) competed with the restore and the switch."""
        self._ends: dict[int, int] = {}
        """End offsets of ``routed`` at the last step (beta of a checkpoint ends there)."""
        self._grew_at = self.clock.now()
        """When ``routed`` last grew (:meth:`settled`)."""
        self._cp_taus: dict[int, dict[int, int]] = {}
        """Per group: the commit versions of its last completed checkpoint."""
        self._unmarked: list[Move] = []
        """Moves whose sets the manager has not ended itself (:meth:`end_moved_sets`)."""
        self.input_ended = False
        """The input is produced (:meth:`run`'s ``stop`` came)."""
        self._n_splitters: int | None = None
        self._prepared: VersionRows | None = None
        """The version of a switch being prepared (:meth:`_prepare_switch`)."""
        self._newest_window: int | None = None
        """The newest ``key_loads`` window the sweeps read (:meth:`_sweep`)."""
        self._loads_read: set[str] = set()
        """The ``key_loads`` data files the sweeps read (``DeltaStore.read_new``)."""
        self._keys_read = False
        """A sweep has read ``key_loads`` (a switch's sweep reads it only if none has)."""
        self._last_score: dict[int, float] = {}
        """Per group: its score at the last full step (logged with a readiness step's rows)."""

    # ------------------------------------------------------------ step 1: signals

    def _done(self) -> dict[int, int]:
        t = self.store.read(
            "worker_progress", run_id=self.s.run_id, columns=["worker", "routed_offset"]
        )
        done: dict[int, int] = {}
        for w, o in zip(t["worker"].to_pylist(), t["routed_offset"].to_pylist()):
            done[w] = max(done.get(w, 0), o)
        return done

    def scores(self, now: float) -> dict[int, tuple[float, float, float]]:
        """Per running instance: (score, input rate, processed rate) in records/s.

        The score is :func:`score_from_backlog` of the records that arrived and
        were committed over the signal window and the backlog at its end: when
        the instance was busy throughout, its utilisation is arrivals over
        completions (both counted in records, so a machine that runs everything
        slower, or steps the loop late, gets the same score for the same backlog)."""
        ends, done = self.kafka.end_offsets(self.topic), self._done()
        if any(e > self._ends.get(j, 0) for j, e in ends.items()):
            self._grew_at = now
        self._ends = dict(ends)
        svc = self.s.service_us * 1e-6
        out = {}
        for j in sorted(self.running):
            end, fin = ends.get(j, 0), done.get(j, 0)
            hist = self._prev.setdefault(j, [])
            hist.append((now, end, fin))
            while len(hist) > 2 and now - hist[1][0] >= self.s.signal_window_s:
                hist.pop(0)  # over the last signal window: micro-batches come in bursts
            t_prev, e_prev, d_prev = hist[0]
            dt = now - t_prev
            arrived, completed = end - e_prev, fin - d_prev
            # per look: records routed by the look before and still not committed
            backlogs = [max(a[1] - b[2], 0) for a, b in itertools.pairwise(hist)]
            score = score_from_backlog(arrived, completed, backlogs, dt, svc)
            rate = arrived / dt if dt > 0 else 0.0
            proc = completed / dt if dt > 0 else 0.0
            out[j] = (score, rate, proc)
        return out

    def _past_startup(self, grp: Group, now: float) -> bool:
        """Whether ``grp`` has worked off its start-up backlog (module doc)."""
        if grp.started:
            return True
        j = grp.active[0]
        hist = self._prev.get(j, [])
        if grp.caught_up_at is None and len(hist) >= 2 and 0 < hist[-2][1] <= hist[-1][2]:
            grp.caught_up_at = now
            del hist[:-1]  # rates from here on, without the start-up burst
        settled = grp.caught_up_at is not None and now - grp.caught_up_at >= self.s.signal_window_s
        if not settled and now - self.t0 < self.s.startup_s:
            return False
        grp.started = True
        log.info("group %d: past start-up after %.1f s", grp.g, now - self.t0)
        return True

    def _changed_share(self, grp: Group) -> float | None:
        """Share of the group's keys its instances changed since its last checkpoint.

        Each worker flush writes the rows of the keys it changed (incremental
        ``operator_state``), so the changed keys are those with a row newer than
        the checkpoint's commit version. Only while a checkpointing policy with a
        ``change_fraction`` is alarmed (else None: nothing to feed)."""
        pol = grp.policy
        taus = self._cp_taus.get(grp.g)
        if getattr(pol.cfg, "change_fraction", None) is None or pol.phase is not Phase.ALARMED:
            return None
        return changed_share(self.store, self.s.run_id, taus or {}, self.group_keys[grp.g])

    # ------------------------------------------------------------ steps 1-5

    def step(self) -> None:
        """One interval: per group, the highest worker score and the instances needed go
        to its policy (``observe``; ``on_ready`` / ``on_caught_up`` once its pending
        instances are up) unless the group is still in start-up; the actions are executed
        (:meth:`execute`), moved sets ended, scale events tracked, one timeline row added."""
        now = self.clock.now()
        self._write_deferred()
        scores = self.scores(now)  # 1.
        t_sig = self.clock.now()
        dt = now - self.timeline[-1][0] - self.t0 if self.timeline else 0.0
        self.instance_s += dt * len(self.running)
        cap = 1e6 / self.s.service_us
        for grp in self.groups:
            mine = [scores[j] for j in grp.active if j in scores]
            score = max((sc for sc, _, _ in mine), default=0.0)
            need = sum(r for _, r, _ in mine) / cap
            grp.fair.add(dt, float(len(grp.active)), need)
            grp.bottlenecked |= need > len(grp.active)
            if not self._past_startup(grp, now):
                continue
            pol = grp.policy
            actions = pol.observe(score, self._changed_share(grp))  # 2.
            log.debug("group %d: score %.1f need %.2f level %s", grp.g, score, need, pol.phase)
            if pol.detector.level >= Level.ALARMING and grp.event is None:
                grp.event = {"group": grp.g, "t_alarm": self.wall(), "score": score}
            elif pol.detector.level < Level.ALARMING and pol.phase is Phase.NORMAL:
                grp.event = None  # back to normal without a scale event
            self._last_score[grp.g] = score
            self.execute(grp, actions + self._when_ready(grp), score)  # 3.
        self._after_actions()
        t_act = self.clock.now()
        self._sweep()  # 4.
        t_sw = self.clock.now()
        self.end_moved_sets()
        self.track_events()  # 5.
        log.debug(
            "step %.3f s: signals %.3f, actions %.3f, sweep %.3f, sets + events %.3f",
            self.clock.now() - now,
            t_sig - now,
            t_act - t_sig,
            t_sw - t_act,
            self.clock.now() - t_sw,
        )
        self.timeline.append(
            (
                now - self.t0,
                len(self.running),
                sum(len(g.active) for g in self.groups),
                sum(r for _, r, _ in scores.values()),
                sum(p for _, _, p in scores.values()),
            )
        )
        self._walls.append(self.wall())

    def step_ready(self) -> None:
        """The step on a readiness wake (:meth:`wait_step`): for each group whose pending
        instances are all ready, only ``on_ready`` (and ``on_caught_up``) and their
        actions, the switch; no signal reads and no ``observe``: they are what made
        the full step take 0.8 s between ready and switch. The next full step comes
        one interval later."""
        for grp in self.groups:
            if grp.g in self._unready:
                actions = self._when_ready(grp)
                if actions:
                    self.execute(grp, actions, self._last_score.get(grp.g, 0.0))
        self._after_actions()
        self.end_moved_sets()
        self.track_events()

    def _when_ready(self, grp: Group) -> list[Action]:
        """``grp``'s policy told that its pending instances are ready, once they all are
        (their ready time noted on the scale event): its actions (none before)."""
        pol = grp.policy
        ready = self._ready_times(grp)
        if not pol.pending or any(t is None for t in ready):
            return []
        t_ready = max(t for t in ready if t is not None)
        if grp.event is not None:
            grp.event.setdefault("t_ready", t_ready)
        for ev in self.events:  # a restart switched before its instances were up
            if ev["group"] == grp.g and "t_kill" in ev:
                ev.setdefault("t_ready", t_ready)
        actions = pol.on_ready(pol.pending)
        if self.s.policy == "checkpoint":
            actions += pol.on_caught_up(pol.pending)
        return actions

    def _after_actions(self) -> None:
        self._unready = {
            g.g
            for g in self.groups
            if g.started and g.policy.pending and None in self._ready_times(g)
        }

    # ------------------------------------------------------------ step 3: actions

    def execute(self, grp: Group, actions: list[Action], score: float) -> None:
        """Carry out ``actions`` of ``grp``'s policy in order (checkpoint request, start with
        plans, stop, routing switch; split / replay only noted) and log each as a
        ``decisions`` row with ``score``."""
        for a in actions:
            detail: dict[str, Any] = {"group": grp.g, "action": type(a).__name__}
            if isinstance(a, TakeCheckpoint):
                # one the instances started next restore (by reference): its copy waits
                restore = any(
                    isinstance(x, SplitState) and x.checkpoint == a.checkpoint for x in actions
                )
                detail |= self._request_checkpoint(grp, a.checkpoint, restored=restore)
            elif isinstance(a, StartInstances):
                split = next(
                    (x for x in actions if isinstance(x, SplitState) and x.targets == a.instances),
                    None,
                )
                self._start(grp, a, split, detail, score)
                continue  # _start logs its decision (with the plans) before starting
            elif isinstance(a, StopInstances):
                detail |= self._stop(grp, a.instances)
            elif isinstance(a, SwitchRouting):
                detail |= self._switch(grp, a.new)
            elif isinstance(a, SplitState):
                detail |= {
                    "checkpoint": a.checkpoint,
                    "note": "each started instance restores its hash part (its plan)",
                }
            elif isinstance(a, Replay):
                detail |= {
                    "checkpoint": a.checkpoint,
                    "note": "started instances replay their sources' routed from tau",
                }
            else:
                detail["note"] = "started instances read their sources' routed (shadow)"
            self._decide(detail, score)

    def _start(
        self,
        grp: Group,
        a: StartInstances,
        split: SplitState | None,
        detail: dict[str, Any],
        score: float,
    ) -> None:
        """Place ``a.instances`` on partitions, log the decision with each new instance's
        plan (docs/scaleout.md; the process reads it when it starts), then start them."""
        sources = list(grp.active)
        reuse = list(grp.active)
        for lid in a.instances:
            j = reuse.pop(0) if reuse else grp.spare.pop(0) if grp.spare else None
            if j is None:
                raise ConfigError(f"group {grp.g}: no spare partition left for instance {lid}")
            grp.phys[lid] = j
        phys = [grp.phys[lid] for lid in a.instances]
        todo = [j for j in phys if j not in self.running]
        plans = {}
        if (
            split is not None
            and split.checkpoint is not None
            and (grp.g, split.checkpoint) in self._skipped
        ):
            # the policy names a checkpoint the manager skipped (restart: the interval's one,
            # requested while the previous was writing): take it again now, so that it is
            # stored (its copy after the scale event) and the plans read what it holds
            detail["written_now"] = self._request_checkpoint(grp, split.checkpoint, restored=True)
        if split is not None:
            epoch = round(self.wall() * 1000)
            cp = split.checkpoint
            refs = self._cp_refs.get((grp.g, cp)) if cp is not None else None
            if refs is not None and not all(str(src) in refs for src in sources):
                refs = None  # taken over other instances: restore from the stored copy
            if refs is None and any(d[0] is grp and d[1] == cp for d in self._deferred):
                self._write_deferred(grp.g)  # the restore reads the copy: write it now
            for i, j in enumerate(phys):
                if j in todo and j not in sources:
                    plans[str(j)] = {
                        "epoch": epoch,
                        "group": grp.g,
                        "sources": sources,
                        "part": i,
                        "parts": len(phys),
                        "checkpoint": cp is not None,
                        "checkpoint_id": cp,
                    } | ({"refs": {str(s): refs[str(s)] for s in sources}} if refs else {})
        role = a.role.value
        detail |= {"instances": phys, "started": todo, "role": role, "plans": plans}
        self._decide(detail, score)
        for j in todo:
            self.procs.start(j)
            self.running.add(j)
        if grp.event is not None and role != "secondary":
            grp.event.setdefault("t_start", self.wall())
        if plans and role != "secondary":  # replacements: their switch follows once ready
            self._prepare_switch(grp, phys)

    def _stop(self, grp: Group, logical: tuple[int, ...]) -> dict[str, Any]:
        phys = [grp.phys.pop(lid) for lid in logical if lid in grp.phys]
        keep = {grp.phys[lid] for lid in grp.policy.active if lid in grp.phys}
        stopped = []
        for j in phys:
            if j in self.running and (j not in keep or self.s.policy == "restart"):
                self.procs.stop(j)
                self.running.discard(j)
                stopped.append(j)
                if grp.event is not None:
                    grp.event.setdefault("t_kill", self.wall())
            if j not in keep and j not in grp.active and j != grp.g:
                grp.spare.insert(0, j)
        return {"stopped": stopped}

    def _request_checkpoint(self, grp: Group, cp_id: int, restored: bool = False) -> dict[str, Any]:
        """Write checkpoint ``cp_id`` in the background (one at a time per group).

        Copying the state takes longer than a step on a big state; the loop must
        keep scoring meanwhile. What the checkpoint holds is fixed at the request
        (:attr:`_cp_refs`). A request while the group's previous checkpoint is still
        being written is skipped (the next one is at most one interval later) unless
        ``restored``: the checkpoint the instances started now restore (by reference,
        from the rows the copy is made of), whose copy is written once the group's
        scale event ended (:meth:`_write_deferred`)."""
        # what the checkpoint holds is fixed now, not when the thread gets to it: by then a
        # switch may have changed the instances and an old one may have cut its keys
        instances = list(grp.active)
        versions = {
            j: self.store.committed_version("partials", RunDir.worker_app(j, self.s.run_id))
            for j in instances
        }
        ends = dict(self._ends)
        self._cp_refs[(grp.g, cp_id)] = {
            str(j): {"version": versions[j], "end": ends.get(j)} for j in instances
        }
        if restored:  # read by reference (the plans' refs): the copy can wait
            self._deferred.append((grp, cp_id, instances, versions, ends))
            return {"checkpoint": cp_id, "async": True, "deferred": True}
        self._write_deferred(grp.g)  # copies in the order they were taken
        busy = self._writing.get(grp.g)
        if busy is not None and not busy.done():
            self.checkpoints_skipped += 1
            self._skipped.add((grp.g, cp_id))
            return {"checkpoint": cp_id, "skipped": "previous checkpoint still writing"}
        self._skipped.discard((grp.g, cp_id))
        self._writing[grp.g] = self._pool.submit(
            self._checkpoint, grp, cp_id, instances, versions, ends
        )
        return {"checkpoint": cp_id, "async": True}

    def _write_deferred(self, g: int | None = None) -> None:
        """Write the deferred copies of group ``g`` (None: of every group whose scale event
        ended, i.e. its moved keys are live) in the background, in the order taken."""
        keep = []
        for item in self._deferred:
            grp = item[0]
            ended = grp.event is None and all(
                "t_done" in e for e in self.events if e["group"] == grp.g
            )
            if grp.g == g or (g is None and ended):
                self._skipped.discard((grp.g, item[1]))
                self._writing[grp.g] = self._pool.submit(self._checkpoint, *item)
            else:
                keep.append(item)
        self._deferred = keep

    def write_all_deferred(self) -> None:
        """Every deferred copy now (the loop ends: the pool is shut down after this)."""
        for g in {item[0].g for item in self._deferred}:
            self._write_deferred(g)

    def _checkpoint(
        self,
        grp: Group,
        cp_id: int,
        instances: list[int],
        versions: dict[int, int | None],
        ends: dict[int, int],
    ) -> dict[str, Any]:
        out = write_checkpoint(
            self._cp_store, self.s.run_id, grp.g, instances, cp_id, ends, versions
        )
        self.checkpoints += int(out["new"])
        self._cp_taus[grp.g] = out["tau"]
        return out

    def _switch(self, grp: Group, logical: tuple[int, ...]) -> dict[str, Any]:
        crash_point("scaleout.between_checkpoint_and_switch")  # active backup: state copied
        old = list(grp.active)
        grp.active = [grp.phys[lid] for lid in logical]
        moved = self._sweep(read=False)
        if old != grp.active:
            ev = grp.event or {"group": grp.g, "t_alarm": self.wall()}
            grp.event = None
            ev.setdefault("t_decide", ev.get("t_start", self.wall()))
            ev |= {
                "policy": self.s.policy,
                "from": old,
                "to": list(grp.active),
                "t_switch": self.wall(),
                "t_rel": self.clock.now() - self.t0,
                "keys_moved": len(moved),
                "state_keys": self.group_keys[grp.g],
                "pending": sorted(moved),
            }
            self.events.append(ev)
        return {"from": old, "to": grp.active, "keys_moved": len(moved), "version": self.version}

    # ------------------------------------------------------------ step 5: log

    def report(self) -> dict[str, Any]:
        """What the summary shows: instances over time, events, resources, fairness."""

        fds = [g.fair.fd for g in self.groups]
        return {
            "timeline": self.timeline,
            "events": self.events,
            "instance_seconds": self.instance_s,
            "fairness": app_fairness(fds, [g.bottlenecked for g in self.groups]),
            "checkpoints": self.checkpoints,
            "running": sorted(self.running),
        }


def start_loop(
    s: StateManagerSettings, kafka: Any, routed_topic: str, procs: Processes
) -> ThreadLoop[StateManager]:
    """:meth:`StateManager.run` started in a daemon thread (``stop()`` ends it)."""
    loop = ThreadLoop("state-manager", recover(StateManager(s, kafka, routed_topic, procs)))
    loop.start()
    return loop
