"""The live state manager: worker scores -> scale-out policy -> processes, checkpoints, routing.

Details: docs/control.md, section ``skewlab.control.scaleout_loop``.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from skewlab.clock import Clock, EpochClock
from skewlab.control.loop import ThreadLoop
from skewlab.control.scaleout_state import score_from_backlog, write_checkpoint
from skewlab.errors import ConfigError
from skewlab.faults import crash_point
from skewlab.io.delta import DeltaStore
from skewlab.pipeline.handoff import META_KEY
from skewlab.rebalance.base import hash_worker
from skewlab.rundir import RunDir, app_id
from skewlab.spec import DEFAULTS, SCALE_OUT_LIBRARY
from skewlab.state import (
    FairnessTracker,
    Level,
    Phase,
    Replay,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
    ThresholdConfig,
    app_fairness,
    make_policy,
    owner,
    split_hash,
)
from skewlab.state.base import Action

log = logging.getLogger(__name__)

POLICIES = dict(SCALE_OUT_LIBRARY)
"""``skewlab run --scale-out`` names -> library policy names."""


def parse_ramp(text: str) -> tuple[float, float]:
    """``"2x/500s"`` -> (factor 2.0, interval 500.0 s)."""
    try:
        f, _, i = text.lower().partition("x/")
        factor, interval = float(f), float(i.rstrip("s"))
    except ValueError:
        factor = interval = float("nan")
    if not (factor >= 1 and interval > 0):
        raise ConfigError(
            f"load ramp must look like 2x/500s (factor >= 1, interval > 0), got {text!r}"
        )
    return factor, interval


@dataclass(frozen=True)
class StateManagerSettings:
    """The loop's configuration (validated at the edge)."""

    run_id: str
    delta_root: str
    policy: str
    workers: int
    service_us: float
    max_instances: int = DEFAULTS["max_instances"]
    interval_s: float = DEFAULTS["scale_out_interval_s"]
    lead_s: float = DEFAULTS["scale_out_lead_s"]
    signal_window_s: float = 5.0
    """Input / processed rates are measured over this much time (step 1)."""
    params: dict[str, Any] = field(default_factory=dict)
    """Threshold fields (alarming=45...), cooldown_s, checkpoint interval_s, startup_s."""

    def __post_init__(self) -> None:
        if self.policy not in POLICIES:
            raise ConfigError(
                f"scale-out must be one of {', '.join(POLICIES)}, got {self.policy!r}"
            )
        if not self.service_us > 0:
            raise ConfigError(
                f"--scale-out needs --service-us > 0 (capacity), got {self.service_us}"
            )
        if not 2 <= self.max_instances <= 16:
            raise ConfigError(
                f"max instances per operator must be in 2..16, got {self.max_instances}"
            )
        if not self.interval_s > 0 or self.lead_s < 0:
            raise ConfigError(f"interval must be > 0 s and lead >= 0 s, got {self.interval_s}")
        if not self.startup_s >= 0:
            raise ConfigError(f"scale-out startup_s must be >= 0, got {self.startup_s}")
        _ = self.settle_s
        self.policy_config()

    @property
    def startup_s(self) -> float:
        """Longest start-up before the policies observe anyway (module doc)."""
        value = self.params.get("startup_s", 20.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"scale-out startup_s must be a number of seconds, got {value!r}")
        return float(value)

    @property
    def settle_s(self) -> float:
        """Longest the manager keeps deciding after the input is produced and ``routed``
        stopped growing (:meth:`run`)."""
        value = self.params.get("settle_s", 120.0)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ConfigError(f"scale-out settle_s must be a number of seconds >= 0, got {value!r}")
        return float(value)

    @property
    def partitions(self) -> int:
        """Partitions of ``routed``: the W groups plus their spare instances."""
        return self.workers * self.max_instances

    def spares(self, group: int) -> list[int]:
        m = self.max_instances - 1
        return list(range(self.workers + group * m, self.workers + (group + 1) * m))

    def policy_config(self) -> Any:
        th_names = set(ThresholdConfig.__dataclass_fields__)
        th = {k: v for k, v in self.params.items() if k in th_names}
        local = {"startup_s", "settle_s"}
        rest = {k: v for k, v in self.params.items() if k not in th_names | local}
        kw: dict[str, Any] = {"cooldown_s": 10.0, **rest}
        if self.policy == "active-backup":
            kw.pop("interval_s", None)
        return make_policy(
            POLICIES[self.policy],
            thresholds=ThresholdConfig(**th),
            start_instances=1,
            max_instances=self.max_instances,
            scale_in=False,
            **kw,
        )


@dataclass(frozen=True)
class Processes:
    """What the experiment lends the manager: start / stop / readiness of instance ``j``."""

    start: Callable[[int], None]
    stop: Callable[[int], None]
    ready: Callable[[int], float | None]
    """Wall time instance ``j`` became ready to read (restored its state), or None."""


@dataclass
class Group:
    """One scaled operator: the policy and its logical -> physical instance map."""

    g: int
    policy: Any
    phys: dict[int, int]
    active: list[int]
    """Partitions holding the group's keys, in hash-part order."""
    spare: list[int]
    fair: FairnessTracker = field(default_factory=FairnessTracker)
    caught_up_at: float | None = None
    """When the instance first caught up with its input (start-up, module doc)."""
    started: bool = False
    """Past start-up: the policy observes."""
    bottlenecked: bool = False
    event: dict[str, Any] | None = None


class StateManager:
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
    ) -> None:
        self.s, self.kafka, self.topic, self.procs = s, kafka, routed_topic, procs
        self.clock = clock or EpochClock()
        self.wall = wall
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
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="checkpoint")
        self._cp_store = DeltaStore(s.delta_root)  # the checkpoint thread's own handles
        self._writing: dict[int, Future[dict[str, Any]]] = {}
        self._ends: dict[int, int] = {}
        """End offsets of ``routed`` at the last step (beta of a checkpoint ends there)."""
        self._grew_at = self.clock.now()
        """When ``routed`` last grew (:meth:`settled`)."""
        self._cp_taus: dict[int, dict[int, int]] = {}
        """Per group: the commit versions of its last completed checkpoint."""

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
        limit = getattr(pol.cfg, "change_fraction", None)
        taus = self._cp_taus.get(grp.g)
        if limit is None or pol.phase is not Phase.ALARMED or not taus:
            return None
        changed: set[str] = set()
        for j, tau in taus.items():
            t = self.store.read(
                "operator_state",
                run_id=self.s.run_id,
                columns=["key"],
                filters=[("instance", "=", int(j)), ("checkpoint", ">", int(tau))],
            )
            changed.update(k for k in t["key"].to_pylist() if k != META_KEY)
        total = max(self.group_keys[grp.g], len(changed), 1)
        return len(changed) / total

    # ------------------------------------------------------------ steps 1-5

    def step(self) -> None:
        now = self.clock.now()
        scores = self.scores(now)
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
            actions = pol.observe(score, self._changed_share(grp))
            log.debug("group %d: score %.1f need %.2f level %s", grp.g, score, need, pol.phase)
            if pol.detector.level >= Level.ALARMING and grp.event is None:
                grp.event = {"group": grp.g, "t_alarm": self.wall(), "score": score}
            elif pol.detector.level < Level.ALARMING and pol.phase is Phase.NORMAL:
                grp.event = None  # back to normal without a scale event
            ready = [self.procs.ready(grp.phys[p]) if p in grp.phys else None for p in pol.pending]
            if pol.pending and all(t is not None for t in ready):
                t_ready = max(t for t in ready if t is not None)
                if grp.event is not None:
                    grp.event.setdefault("t_ready", t_ready)
                for ev in self.events:  # a restart switched before its instances were up
                    if ev["group"] == grp.g and "t_kill" in ev:
                        ev.setdefault("t_ready", t_ready)
                actions += pol.on_ready(pol.pending)
                if self.s.policy == "checkpoint":
                    actions += pol.on_caught_up(pol.pending)
            self.execute(grp, actions, score)
        self._sweep()
        self.track_events()
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

    # ------------------------------------------------------------ step 3: actions

    def execute(self, grp: Group, actions: list[Action], score: float) -> None:
        for a in actions:
            detail: dict[str, Any] = {"group": grp.g, "action": type(a).__name__}
            if isinstance(a, TakeCheckpoint):
                detail |= self._request_checkpoint(grp, a.checkpoint)
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
        if split is not None:
            epoch = round(self.wall() * 1000)
            for i, j in enumerate(phys):
                if j in todo and j not in sources:
                    plans[str(j)] = {
                        "epoch": epoch,
                        "group": grp.g,
                        "sources": sources,
                        "part": i,
                        "parts": len(phys),
                        "checkpoint": split.checkpoint is not None,
                    }
        role = a.role.value
        detail |= {"instances": phys, "started": todo, "role": role, "plans": plans}
        self._decide(detail, score)
        for j in todo:
            self.procs.start(j)
            self.running.add(j)
        if grp.event is not None and role != "secondary":
            grp.event.setdefault("t_start", self.wall())

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

    def _request_checkpoint(self, grp: Group, cp_id: int) -> dict[str, Any]:
        """Write checkpoint ``cp_id`` in the background (one at a time per group).

        Copying the state takes longer than a step on a big state; the loop must
        keep scoring meanwhile. A request while the group's previous checkpoint
        is still being written is skipped (the next one is at most one interval
        later); a take-over uses the last checkpoint that completed."""
        busy = self._writing.get(grp.g)
        if busy is not None and not busy.done():
            self.checkpoints_skipped += 1
            return {"checkpoint": cp_id, "skipped": "previous checkpoint still writing"}
        self._writing[grp.g] = self._pool.submit(self._checkpoint, grp, cp_id)
        return {"checkpoint": cp_id, "async": True}

    def _checkpoint(self, grp: Group, cp_id: int) -> dict[str, Any]:
        out = write_checkpoint(
            self._cp_store, self.s.run_id, grp.g, list(grp.active), cp_id, dict(self._ends)
        )
        self.checkpoints += int(out["new"])
        self._cp_taus[grp.g] = out["tau"]
        return out

    def _switch(self, grp: Group, logical: tuple[int, ...]) -> dict[str, Any]:
        crash_point("scaleout.between_checkpoint_and_switch")  # active backup: state copied
        old = list(grp.active)
        grp.active = [grp.phys[lid] for lid in logical]
        moved = self._sweep()
        if old != grp.active:
            ev = grp.event or {"group": grp.g, "t_alarm": self.wall()}
            grp.event = None
            ev.setdefault("t_decide", ev.get("t_start", self.wall()))
            ev |= {
                "policy": self.s.policy,
                "from": old,
                "to": list(grp.active),
                "t_switch": self.effective_ms / 1000,
                "t_rel": self.clock.now() - self.t0,
                "keys_moved": len(moved),
                "state_keys": self.group_keys[grp.g],
                "pending": sorted(moved),
            }
            self.events.append(ev)
        return {"from": old, "to": grp.active, "keys_moved": len(moved), "version": self.version}

    # ------------------------------------------------------------ step 4: routing

    def _sweep(self) -> list[tuple[str, int]]:
        """Write a version moving every seen key whose instance changed; returns (key, set)."""
        keys = self.store.read("key_loads", run_id=self.s.run_id, columns=["key"])["key"]
        W = self.s.workers
        rows: list[dict[str, Any]] = []
        moved: list[tuple[str, int]] = []
        self.group_keys = [0] * W
        for k in sorted(set(keys.to_pylist()) | set(self.map)):
            grp = self.groups[hash_worker(k, W)]
            self.group_keys[grp.g] += 1
            want = grp.active[owner(k, len(grp.active), split_hash)]
            cur, sid = self.map.get(k, (grp.g, 0))
            if want != cur:
                moved.append((k, sid + 1))
            if k in self.map or want != cur:
                rows.append({"key": k, "worker": want, "set_id": sid + int(want != cur)})
                rows[-1]["reason"] = "scale-out" if want != cur else "kept"
        if not moved:
            return []
        self.version += 1
        self.effective_ms = max(self.effective_ms, round((self.wall() + self.s.lead_s) * 1000))
        for r in rows:
            r["version"], r["effective_ms"] = self.version, self.effective_ms
        self.store.append(
            "assignments",
            rows,
            app_id=app_id("scaleout", self.s.run_id),
            version=self.version,
            run_id=self.s.run_id,
        )
        self.map = {r["key"]: (r["worker"], r["set_id"]) for r in rows}
        log.info("assignments v%d: %d keys moved", self.version, len(moved))
        return moved

    def track_events(self, final: bool = False) -> None:
        """Close a scale event once its moved keys are processing on their new instances.

        ``pause_s``: the longest time a moved key waited, from the scale-out
        decision (``t_decide``: the take-over for active backup, the start of the
        replacements for checkpointing, the stop for restart) to its new instance
        taking it (``handoffs.applied_ms``: its shadow reached the switch, or the
        old holder's hand-off was applied); for restart also from stopping the
        operator to its restarted instance being ready. ``pause_p50_s`` is the
        median over moved keys; ``handoff_s`` the longest hand-off in flight
        (``applied - sent``). ``drain_s``: how long the old instance worked off its
        backlog after the switch. ``restored_*`` / ``replayed_records``: what the
        moved keys' new instances restored and replayed (``handoffs`` rows of
        sets taken from a shadow carry them). Called each step and once more,
        ``final``, after the workers exited: then an event closes with what is known."""
        open_ = [e for e in self.events if "t_done" not in e]
        if not open_:
            return
        ho = self.store.read(
            "handoffs",
            run_id=self.s.run_id,
            columns=["key", "set_id", "sent_ms", "applied_ms", "tuples", "bytes"],
        )
        times = dict(
            zip(
                zip(ho["key"].to_pylist(), ho["set_id"].to_pylist()),
                zip(
                    ho["sent_ms"].to_pylist(),
                    ho["applied_ms"].to_pylist(),
                    ho["tuples"].to_pylist(),
                    ho["bytes"].to_pylist(),
                ),
            )
        )
        now = self.wall()
        for e in open_:
            keys = e["pending"]
            have = [times[(k, sid)] for k, sid in keys if (k, sid) in times]
            waiting = len(have) < len(keys) or ("t_kill" in e and "t_ready" not in e)
            if waiting and not final:
                continue
            known = [(a / 1000, b / 1000) for a, b, _, _ in have if a is not None and b is not None]
            t0 = float(e.get("t_decide", e["t_switch"]))
            e["t_done"] = max((b for _, b in known), default=now)
            waits = sorted(max(b - t0, 0.0) for _, b in known)
            pause = waits[-1] if waits else 0.0
            if "t_kill" in e:
                pause = max(pause, e.get("t_ready", now) - e["t_kill"])
            e["pause_s"] = pause
            e["pause_p50_s"] = waits[len(waits) // 2] if waits else pause
            e["handoff_s"] = max((b - a for a, b in known), default=0.0)
            e["drain_s"] = max(max((a for a, _ in known), default=0.0) - e["t_switch"], 0.0)
            e["handoffs_missing"] = len(keys) - len(have)
            e["replayed_records"] = int(sum(t for _, _, t, _ in have))
            e["restored_bytes"] = int(sum(b for _, _, _, b in have))
            e["throughput_before"] = self._processed(e["t_alarm"] - 10.0, e["t_alarm"])
            e["throughput_during"] = self._processed(
                min(e["t_switch"], e.get("t_kill", e["t_switch"])), e["t_done"]
            )
            e.pop("pending")
            self._decide(
                {
                    "group": e["group"],
                    "action": "Restored",
                    "keys": len(keys),
                    "records_replayed": e["replayed_records"],
                    "bytes_restored": e["restored_bytes"],
                    "pause_s": round(pause, 3),
                    "ready_s": round(e["t_ready"] - e["t_start"], 3)
                    if "t_ready" in e and "t_start" in e
                    else None,
                },
                0.0,
            )

    def _processed(self, t0: float, t1: float) -> float:
        """Mean processed records/s of all instances over the steps in wall time [t0, t1]."""
        rates = [tl[4] for w, tl in zip(self._walls, self.timeline) if t0 <= w <= t1]
        if not rates:  # shorter than a step: the first step after t0, else the last one
            after = [tl[4] for w, tl in zip(self._walls, self.timeline) if w >= t0]
            rates = after[:1] or [tl[4] for tl in self.timeline[-1:]]
        return sum(rates) / len(rates) if rates else math.nan

    # ------------------------------------------------------------ step 5: log

    def _decide(self, detail: dict[str, Any], score: float) -> None:
        self.n_decisions += 1
        self.store.append(
            "decisions",
            [
                {
                    "ts": round(self.wall() * 1000),
                    "loop": "scale-out",
                    "policy": self.s.policy,
                    "detail": json.dumps(detail, sort_keys=True, default=str),
                    "cost": 0.0,
                    "imbalance_before": None,
                    "imbalance_after": None,
                    "reason": f"score {score:.1f}",
                }
            ],
            app_id=app_id("scaleout-decisions", self.s.run_id),
            version=self.n_decisions,
            run_id=self.s.run_id,
        )
        log.info("scale-out decision: %s", detail)

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

    def run(self, stop: threading.Event) -> None:
        """Step every ``interval_s`` until ``stop`` is set (errors are logged, not raised),
        then on until the operators settled (:meth:`settled`), or ``settle_s`` passed
        without ``routed`` growing once every event was routed, or ``5 x settle_s``
        passed in all.

        ``stop`` comes when the input is produced; on a busy machine the route job
        and the instances are still behind then, and the overload the state manager
        exists for shows only in that backlog: it keeps deciding until the
        instances have worked it off."""
        while not stop.wait(self.s.interval_s):
            self._safe_step()
        t_stop = self.clock.now()
        pause = threading.Event()
        while not self.settled():
            now = self.clock.now()
            quiet = now - max(t_stop, self._grew_at)
            # a route job still behind (or restarting) gets up to 5 x settle_s in all
            if (quiet >= self.s.settle_s and self._input_routed()) or (
                now - t_stop >= 5 * self.s.settle_s
            ):
                log.warning(
                    "state manager: not settled %.0f s after the input stopped", self.s.settle_s
                )
                break
            pause.wait(self.s.interval_s)
            self._safe_step()
        self._pool.shutdown(wait=True)

    def _input_routed(self) -> bool:
        """Whether ``key_loads`` + ``quarantine`` account for every event in ``events``."""
        topic = RunDir.of(self.s.run_id).events_topic
        produced = sum(self.kafka.end_offsets(topic).values())
        kl = self.store.read("key_loads", run_id=self.s.run_id, columns=["count"])
        q = self.store.read("quarantine", run_id=self.s.run_id, columns=["offset"])
        return sum(kl["count"].to_pylist()) + q.num_rows >= produced

    def _safe_step(self) -> None:
        try:
            self.step()
        except Exception:  # the loop must outlive one bad round; the log says why
            log.exception("state manager step failed")

    def settled(self, quiet_s: float = 10.0) -> bool:
        """The route job routed (or quarantined) every produced event, every running
        instance committed all its routed input, ``routed`` has not grown for
        ``quiet_s`` (a busy machine's route job delivers late, in big micro-batches)
        and no scale event is under way."""
        if self.clock.now() - self._grew_at < quiet_s or not self._input_routed():
            return False
        ends, done = self._ends, self._done()
        if any(done.get(j, 0) < ends.get(j, 0) for j in self.running):
            return False
        if any(g.policy.phase is Phase.SCALING for g in self.groups):
            return False
        return all("t_done" in e for e in self.events)


def start_loop(
    s: StateManagerSettings, kafka: Any, routed_topic: str, procs: Processes
) -> ThreadLoop[StateManager]:
    """:meth:`StateManager.run` started in a daemon thread (``stop()`` ends it)."""
    from skewlab.control.scaleout_recovery import recover  # a resumed run's manager

    loop = ThreadLoop("state-manager", recover(StateManager(s, kafka, routed_topic, procs)))
    loop.start()
    return loop
