"""A new state manager continues the one that died: its state rebuilt from what the run recorded.

:func:`recover` rebuilds each group's policy state, partition maps, running instances, scale
events and routing version from the run's ``decisions`` and ``assignments`` rows, so a resumed
driver neither re-runs scale events nor writes versions the store drops as replays.
What is rebuilt from which rows, and the tie and restart rules: docs/control.md,
"skewlab.control.scaleout.recovery".
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from skewlab.rebalance.base import hash_worker
from skewlab.rundir import app_id
from skewlab.runsettings import StateManagerSettings
from skewlab.state.base import Phase
from skewlab.state.score import Level

if TYPE_CHECKING:
    from skewlab.control.scaleout.manager import StateManager

__all__ = ["ORDER", "GroupRecord", "Record", "recover", "replay_decisions"]

log = logging.getLogger(__name__)

ORDER: dict[str, dict[str, int]] = {
    "restart": {
        "TakeCheckpoint": 0,
        "StopInstances": 1,
        "StartInstances": 2,
        "SplitState": 3,
        "Replay": 4,
        "SwitchRouting": 5,
        "Restored": 6,
    },
    "default": {
        "TakeCheckpoint": 0,
        "StartInstances": 1,
        "SplitState": 2,
        "Replay": 3,
        "FeedInput": 4,
        "SwitchRouting": 5,
        "StopInstances": 6,
        "Restored": 7,
    },
}
"""Per policy, the order of one step's actions (rows in the same millisecond)."""


@dataclass
class GroupRecord:
    """One group's state as its decisions left it (the fields of ``Group`` + policy)."""

    g: int
    phys: dict[int, int]
    active: list[int]
    spare: list[int]
    phase: Phase = Phase.NORMAL
    policy_active: tuple[int, ...] = (0,)
    pending: tuple[int, ...] = ()
    next_instance: int = 1
    next_checkpoint: int = 0
    last_checkpoint: int | None = None
    last_checkpoint_at: float | None = None
    last_event_at: float | None = None
    unswitched: tuple[int, ...] = ()
    """Restart policy: logical instances started as primaries whose switch was not logged."""


@dataclass
class Record:
    """What :func:`replay_decisions` rebuilt (see docs/control.md,
    "skewlab.control.scaleout.recovery")."""

    groups: list[GroupRecord]
    running: set[int]
    decisions: int = 0
    checkpoints: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)


def replay_decisions(s: StateManagerSettings, rows: list[tuple[int, dict[str, Any]]]) -> Record:
    """The state that the ``(ts ms, detail)`` rows of ``decisions`` leave (docs/control.md)."""
    order = ORDER.get(s.policy, ORDER["default"])
    groups = [GroupRecord(g, {0: g}, [g], s.spares(g)) for g in range(s.workers)]
    rec = Record(groups, set(range(s.workers)), decisions=len(rows))
    ranked = sorted(rows, key=lambda r: (r[0], order.get(str(r[1].get("action")), 99)))
    for ts, d in ranked:
        g = d.get("group")
        if not isinstance(g, int) or not 0 <= g < s.workers:
            continue
        _apply(s, rec, groups[g], ts / 1000.0, d)
    return rec


def _apply(
    s: StateManagerSettings, rec: Record, grp: GroupRecord, t: float, d: dict[str, Any]
) -> None:
    act = d.get("action")
    if act == "TakeCheckpoint":
        cp = int(d["checkpoint"])
        grp.next_checkpoint = max(grp.next_checkpoint, cp + 1)
        grp.last_checkpoint, grp.last_checkpoint_at = cp, t
        rec.checkpoints += int("skipped" not in d)
        if s.policy == "checkpoint" and grp.phase is Phase.NORMAL:
            grp.phase = Phase.ALARMED
    elif act == "StartInstances":
        phys = [int(j) for j in d["instances"]]
        lids = tuple(range(grp.next_instance, grp.next_instance + len(phys)))
        grp.next_instance += len(phys)
        for lid, j in zip(lids, phys):
            grp.phys[lid] = j
            if j in grp.spare:
                grp.spare.remove(j)
        rec.running.update(int(j) for j in d.get("started", []))
        grp.pending = lids
        role = d.get("role")
        if role == "secondary":
            grp.phase = Phase.ALARMED
        elif role == "primary":  # restart: the new ones are active at once
            grp.policy_active, grp.phase, grp.last_event_at = lids, Phase.SCALING, t
            grp.unswitched = lids
        else:
            grp.phase = Phase.SCALING
    elif act == "SwitchRouting":
        grp.active = [int(j) for j in d["to"]]
        if s.policy == "restart":
            grp.unswitched = ()
        else:
            grp.policy_active, grp.pending, grp.phase = grp.pending, (), Phase.NORMAL
            grp.last_event_at = t
        if list(d.get("from", [])) != grp.active:
            rec.events.append(_event(s, grp.g, t, d))
    elif act == "StopInstances":
        stopped = {int(j) for j in d.get("stopped", [])}
        rec.running -= stopped
        pending = {grp.phys.get(lid) for lid in grp.pending}
        if s.policy == "active-backup" and grp.pending and stopped and stopped <= pending:
            gone = grp.pending  # secondaries stopped: the load fell below alarming
            grp.pending, grp.phase = (), Phase.NORMAL
        else:
            gone = tuple(lid for lid, j in grp.phys.items() if j in stopped)
        keep = {grp.phys[lid] for lid in grp.policy_active if lid in grp.phys}
        for lid in [x for x in gone if x in grp.phys]:
            j = grp.phys.pop(lid)
            if j not in keep and j not in grp.active and j != grp.g:
                grp.spare.insert(0, j)
        if s.policy != "restart":  # the old logical ids of a take-over are gone too
            for lid in [x for x in grp.phys if x not in grp.policy_active + grp.pending]:
                grp.phys.pop(lid)
    elif act == "Restored":
        for ev in rec.events:
            if ev["group"] == grp.g and "t_done" not in ev:
                ev |= {"t_done": t, "pause_s": float(d.get("pause_s") or 0.0)}
                ev["pause_p50_s"] = ev["pause_s"]
                break


def _event(s: StateManagerSettings, g: int, t: float, d: dict[str, Any]) -> dict[str, Any]:
    """A scale event as the dead manager's ``_switch`` opened it (times from its row)."""
    return {
        "group": g,
        "policy": s.policy,
        "from": [int(j) for j in d.get("from", [])],
        "to": [int(j) for j in d.get("to", [])],
        "t_alarm": t,
        "t_decide": t,
        "t_switch": t,
        "keys_moved": int(d.get("keys_moved", 0)),
        "version": d.get("version"),
        "recovered": True,
    }


def _rows(sm: StateManager) -> list[tuple[int, dict[str, Any]]]:
    t = sm.store.read("decisions", run_id=sm.s.run_id, columns=["ts", "loop", "detail"])
    out = []
    for ts, loop, detail in zip(
        t["ts"].to_pylist(), t["loop"].to_pylist(), t["detail"].to_pylist()
    ):
        if loop == "scale-out":
            d = json.loads(detail)
            if d.get("action") != "Cut":  # an old instance's own row, not the manager's
                out.append((int(ts), d))
    return out


def _routing(sm: StateManager) -> None:
    """The newest ``assignments`` version: version number, effective time, key map."""
    t = sm.store.read("assignments", run_id=sm.s.run_id)
    if t.num_rows == 0:
        return
    rows = t.to_pylist()
    top = max(int(r["version"]) for r in rows)
    committed = sm.store.committed_version("assignments", app_id("scaleout", sm.s.run_id))
    sm.version = max(top, committed or 0)
    sm.effective_ms = max(int(r["effective_ms"]) for r in rows)
    sm.map = {
        r["key"]: (int(r["worker"]), int(r["set_id"])) for r in rows if int(r["version"]) == top
    }


def _moves(sm: StateManager) -> list[tuple[str, int, int, int]]:
    """Every key move of the run's ``assignments`` versions: (key, old instance, old set,
    new instance), in version order."""
    t = sm.store.read("assignments", run_id=sm.s.run_id)
    cur: dict[str, tuple[int, int]] = {}
    out = []
    for r in sorted(t.to_pylist(), key=lambda r: (int(r["version"]), r["key"])):
        k = r["key"]
        old, sid = cur.get(k, (hash_worker(k, sm.s.workers), 0))
        if r["reason"] == "scale-out":
            out.append((k, old, sid, int(r["worker"])))
        cur[k] = (int(r["worker"]), int(r["set_id"]))
    return out


def _reopen(sm: StateManager, events: list[dict[str, Any]]) -> None:
    """An event without its ``Restored`` row waits again for its moved keys' hand-offs."""
    t = sm.store.read("assignments", run_id=sm.s.run_id)
    moved: dict[int, list[tuple[str, int]]] = {}
    for r in t.to_pylist():
        if r["reason"] == "scale-out":
            moved.setdefault(int(r["version"]), []).append((r["key"], int(r["set_id"])))
    for ev in events:
        v = ev.pop("version", None)
        if "t_done" not in ev:
            ev["pending"] = sorted(moved.get(int(v), [])) if v is not None else []
            ev["state_keys"] = ev["keys_moved"]


def recover(sm: StateManager) -> StateManager:
    """Rebuild ``sm`` (a new manager of a run that has decisions) from the run's tables;
    a run with no scale-out decision yet leaves it as built. Returns ``sm``."""
    rows = _rows(sm)
    _routing(sm)
    if not rows:
        return sm
    sm.n_decisions = max(
        len(rows),
        sm.store.committed_version("decisions", app_id("scaleout-decisions", sm.s.run_id)) or 0,
    )
    rec = replay_decisions(sm.s, rows)
    for grp, gr in zip(sm.groups, rec.groups):
        detector = grp.policy.snapshot().detector
        if gr.phase is not Phase.NORMAL and sm.s.policy != "restart":
            detector = (int(Level.ALARMING), int(Level.ALARMING), 0)  # alarmed when it died
        snap = replace(
            grp.policy.snapshot(),
            detector=detector,
            phase=gr.phase,
            active=gr.policy_active,
            pending=gr.pending,
            pending_ready=False,
            next_instance=gr.next_instance,
            next_checkpoint=gr.next_checkpoint,
            last_checkpoint=gr.last_checkpoint,
            last_checkpoint_at=gr.last_checkpoint_at,
            last_event_at=gr.last_event_at,
        )
        grp.policy = sm.s.policy_config().build(state=snap, clock=sm.clock)
        grp.phys, grp.active, grp.spare = dict(gr.phys), list(gr.active), list(gr.spare)
        grp.started = True  # decisions exist: the run was past start-up
    sm.running = set(rec.running)
    sm.checkpoints = rec.checkpoints
    _reopen(sm, rec.events)
    sm.events = rec.events
    if hasattr(sm, "_unmarked"):  # the manager ends moved sets at the input's end: again
        sm._unmarked = _moves(sm)
    log.info(
        "state manager of %s recovered %d decisions: running %s, groups %s, version %d",
        sm.s.run_id,
        len(rows),
        sorted(sm.running),
        [(g.active, g.policy.phase.value, g.policy.pending) for g in sm.groups],
        sm.version,
    )
    for grp, gr in zip(sm.groups, rec.groups):
        if gr.unswitched:  # restart: stopped, started, never switched
            detail = {"group": grp.g, "action": "SwitchRouting", "recovered": True}
            detail |= sm._switch(grp, gr.unswitched)
            sm._decide(detail, 0.0)
    return sm
