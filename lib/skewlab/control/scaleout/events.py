"""Scale events of the live state manager: the switch's end-of-set markers, closing events.

:class:`EventTracking` (a mixin of the state manager) ends the sets a switch moved once the
input is produced and routed (a switch decided after the last event applies at no
splitter, so the manager sends each splitter's end-of-set marker itself; duplicates are
ignored by the workers), and closes each scale event with its pause, drain and
throughput figures for the summary. Details: docs/scaleout.md (take-over at the switch; pause).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from typing import Any

from skewlab.io.progress import committed_progress
from skewlab.pipeline import events as ev_records
from skewlab.pipeline.store import Store
from skewlab.rundir import RunDir, app_id

log = logging.getLogger(__name__)

Move = tuple[str, int, int, int]
"""A key moved by a switch: (key, old instance, old set id, new instance)."""


class EventTracking:
    """Mixin of :class:`~skewlab.control.scaleout.manager.StateManager`: its scale events.

    **Switch markers.** A switch is a new ``assignments`` version; each splitter
    of the route job applies it at its first event whose time reaches the
    version's ``effective_ms``, and ends every moved key's set there with an
    end-of-set marker in the old instance's partition. A switch decided after
    the input's last event (a busy machine's route job delivers the input
    late, and the overload shows only in that backlog) never applies at any
    splitter: no marker, so the new instance's shadow never takes the keys and
    the old instance keeps them. Once the input is produced *and* routed (no
    splitter will route anything any more, so every record of the old sets is
    already in the old partitions), the manager ends every moved set itself,
    one marker per splitter (:meth:`end_moved_sets`). A marker a splitter also
    sent is a duplicate the workers ignore (``ended`` is a set; a completed or
    taken set drops later markers)."""

    store: Store
    kafka: Any
    topic: str
    events: list[dict[str, Any]]
    timeline: list[tuple[float, int, int, float, float]]
    _walls: list[float]
    _unmarked: list[Move]
    input_ended: bool
    _n_splitters: int | None

    s: Any
    wall: Callable[[], float]
    n_decisions: int

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

    def _input_routed(self) -> bool:
        """Whether ``key_loads`` + ``quarantine`` account for every event in ``events``
        (the route job appends them after producing and flushing the batch's records,
        so then every routed record is in ``routed``)."""
        topic = RunDir.of(self.s.run_id).events_topic
        produced = sum(self.kafka.end_offsets(topic).values())
        kl = self.store.read("key_loads", run_id=self.s.run_id, columns=["count"])
        q = self.store.read("quarantine", run_id=self.s.run_id, columns=["offset"])
        return sum(kl["count"].to_pylist()) + q.num_rows >= produced

    def _splitters(self) -> int:
        """The route job's splitters: one per partition of ``events``."""
        if self._n_splitters is None:
            topic = RunDir.of(self.s.run_id).events_topic
            parts = getattr(self.kafka, "partitions", None)
            n = parts(topic) if callable(parts) else len(self.kafka.end_offsets(topic))
            self._n_splitters = int(n)
        return self._n_splitters

    def end_moved_sets(self) -> int:
        """Send the end-of-set markers of every moved set not yet ended by the manager,
        once the input is produced and routed (class doc); returns the markers sent."""
        if not self._unmarked or not self.input_ended or not self._input_routed():
            return 0
        moves, self._unmarked = self._unmarked, []
        n = self._splitters()
        for key, old, sid, new in moves:
            for sp in range(n):
                self.kafka.produce(
                    self.topic,
                    b"",
                    key=key.encode(),
                    partition=old,
                    headers=[(ev_records.EOS_HEADER, f"{sid}:{new}:{sp}".encode())],
                )
        self.kafka.flush()
        self._decide(
            {
                "action": "EndSets",
                "keys": len(moves),
                "markers": len(moves) * n,
                "note": "input produced and routed: the manager ends the moved sets",
            },
            0.0,
        )
        return len(moves) * n

    def track_events(self, final: bool = False) -> None:
        """Close a scale event once its moved keys are processing on their new instances.

        ``pause_s``: the longest time a moved key waited, from the scale-out
        decision (``t_decide``: the take-over for active backup, the start of the
        replacements for checkpointing, the stop for restart) to its new instance
        taking it (``handoffs.applied_ms``: its shadow reached the switch, or the
        old holder's hand-off was applied); for restart also from stopping the
        operator to its restarted instance being ready. ``pause_p50_s`` is the
        median over moved keys; ``gap_s`` / ``gap_p50_s`` the time a moved key was
        processed nowhere: from its old instance stopping it (its cut, or the
        operator's stop for restart) to its new instance taking it; ``handoff_s`` the
        longest hand-off in flight (``applied - sent``). ``drain_s``: how long the old
        instance worked off its backlog after the switch. ``restored_*`` /
        ``replayed_records``: what the moved keys' new instances restored and replayed
        (``handoffs`` rows of sets taken from a shadow carry them). Called each step and once more,
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
            stop = self._stopped_at(e)
            gaps = sorted(
                max(b - (a if stop is None else stop), 0.0) for a, b in known
            )  # no stop known: a hand-off's time in flight
            e["gap_s"] = gaps[-1] if gaps else 0.0
            e["gap_p50_s"] = gaps[len(gaps) // 2] if gaps else 0.0
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
            e["cuts"] = self._cuts(e)
            self._decide(
                {
                    "group": e["group"],
                    "action": "Restored",
                    "keys": len(keys),
                    "records_replayed": e["replayed_records"],
                    "bytes_restored": e["restored_bytes"],
                    "cuts": e["cuts"],
                    "pause_s": round(pause, 3),
                    "gap_s": round(e["gap_s"], 3),
                    "ready_s": round(e["t_ready"] - e["t_start"], 3)
                    if "t_ready" in e and "t_start" in e
                    else None,
                },
                0.0,
            )

    def _stopped_at(self, e: dict[str, Any]) -> float | None:
        """When event ``e``'s moved keys stopped on their old instance: the operator's stop
        (restart), else the first cut an old instance promised after the switch (its
        ``Cut`` row in ``decisions``, policy ``cut``, written before it stops a key);
        None when no old instance cut (the keys took hand-offs)."""
        if "t_kill" in e:
            return float(e["t_kill"])
        t = self.store.read(
            "decisions",
            run_id=self.s.run_id,
            columns=["ts", "detail"],
            filters=[("policy", "=", "cut")],
        )
        olds = {int(w) for w in e.get("from", [])}
        at = [
            ts / 1000
            for ts, d in zip(t["ts"].to_pylist(), t["detail"].to_pylist())
            if int(json.loads(d).get("worker", -1)) in olds and ts / 1000 >= e["t_switch"] - 1.0
        ]
        return min(at, default=None)

    def _cuts(self, e: dict[str, Any]) -> dict[str, Any]:
        """Per old instance of event ``e``: its committed cut for the event's new instances
        (``{"at": P, "keys": stopped, "v": version}``, docs/scaleout.md "The cut");
        an old instance that made none (its keys took the hand-off path) is left out."""
        out: dict[str, Any] = {}
        new = {str(w) for w in e.get("to", []) if w not in e.get("from", [])}
        for src in e.get("from", []):
            try:
                _, cuts = committed_progress(
                    self.store, self.s.run_id, int(src), RunDir.worker_app(int(src), self.s.run_id)
                )
            except Exception as exc:  # a report, never the reason a run fails
                log.warning("scale event: cut of instance %s unreadable: %s", src, exc)
                continue
            for c in cuts:
                if new & set(c.get("plans", {})):
                    out[str(src)] = {"at": c["at"], "keys": c["keys"], "v": c["v"]}
        return out

    def _processed(self, t0: float, t1: float) -> float:
        """Mean processed records/s of all instances over the steps in wall time [t0, t1]."""
        rates = [tl[4] for w, tl in zip(self._walls, self.timeline) if t0 <= w <= t1]
        if not rates:  # shorter than a step: the first step after t0, else the last one
            after = [tl[4] for w, tl in zip(self._walls, self.timeline) if w >= t0]
            rates = after[:1] or [tl[4] for tl in self.timeline[-1:]]
        return sum(rates) / len(rates) if rates else math.nan
