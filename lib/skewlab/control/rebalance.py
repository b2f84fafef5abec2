"""The rebalance step: Delta ``key_loads`` -> rebalancer -> ``assignments`` + ``decisions``.

:func:`rebalance_step` is the decision of both loops (in-process and the DAG), per interval:

1. ``v`` = the version (``interval_end_ms``); ``decisions`` holds ``v``: done;
2. the :class:`RebalanceState`: the caller's, or restored from the newest checkpoint before
   ``v`` (none: seeded from the run's newest ``assignments`` and saved as checkpoint 0);
3. the interval's loads per key (``key_loads``, placed by the state's map);
4. ``decision = rebalancer.decide(now, snapshot)``;
5. a key changes worker: ``assignments`` version ``n + 1`` (every key the map named);
6. restored state only: the state after the decision, as checkpoint ``v``;
7. the ``decisions`` row, last: it marks the interval decided (a retry redoes 5-7 alike).

Why each step is safe to redo: docs/control.md, section ``skewlab.control.rebalance``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.clock import Clock, EpochClock
from skewlab.control.base import StepCall, StepResult, StepStatus
from skewlab.errors import ConfigError
from skewlab.rebalance import make_rebalancer
from skewlab.rebalance.base import Decision, LoadSnapshot, Rebalancer, RebalancerConfig, hash_worker
from skewlab.rebalance.codec import seeded, snapshot_from_dict, snapshot_to_dict
from skewlab.rundir import app_id
from skewlab.spec import DEFAULTS, REBALANCE_POLICIES
from skewlab.state.checkpoint import Checkpoint
from skewlab.state.operator_state import OperatorState

if TYPE_CHECKING:
    from skewlab.pipeline.store import Store

__all__ = [
    "POLICIES",
    "STEP",
    "RebalanceParams",
    "RebalanceState",
    "check_rebalance",
    "interval_loads",
    "next_assignment_rows",
    "rebalance_step",
    "state_run_id",
]

log = logging.getLogger(__name__)

STEP = "rebalance"
POLICIES = REBALANCE_POLICIES
"""The policies a rebalance loop runs (live and scheduled)."""
OPTIONS = ("workers", "lead_s")
"""Keys of the step's ``params`` that are not the policy's."""


def state_run_id(run_id: str) -> str:
    """The ``operator_state`` run id holding the scheduled loop's checkpoints."""
    return f"{run_id}#control-{STEP}"


@dataclass(frozen=True)
class RebalanceParams:
    """The step's settings: ``workers`` (W of the run), ``lead_s`` and the policy's params."""

    policy: str
    workers: int
    lead_s: float = DEFAULTS["rebalance_lead_s"]
    policy_params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: str, params: Mapping[str, Any]) -> RebalanceParams:
        """Split and validate ``params``; one-line ConfigError naming what is allowed."""
        if policy not in POLICIES:
            raise ConfigError(f"rebalance must be one of {', '.join(POLICIES)}, got {policy!r}")
        if "workers" not in params:
            raise ConfigError("rebalance needs workers (the run's worker count, an integer >= 1)")
        workers, lead_s = params["workers"], params.get("lead_s", 1.0)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
        if isinstance(lead_s, bool) or not isinstance(lead_s, int | float) or not lead_s >= 0:
            raise ConfigError(f"rebalance lead must be a number of seconds >= 0, got {lead_s!r}")
        rest = {k: v for k, v in params.items() if k not in OPTIONS}
        out = cls(policy, workers, float(lead_s), rest)
        out.rebalancer()
        return out

    def rebalancer(self) -> RebalancerConfig:
        """The validated policy config (``make_rebalancer`` names unknown parameters)."""
        return make_rebalancer(self.policy, workers=self.workers, **self.policy_params)


def check_rebalance(policy: str, params: Mapping[str, Any]) -> None:
    """Validate a rebalance ``policy`` and its ``params`` (no I/O)."""
    RebalanceParams.of(policy, params)


@dataclass
class RebalanceState:
    """What a rebalance loop carries from one interval to the next.

    ``map`` is the key map in force (``key -> (worker, set_id)``), i.e. the
    newest assignments version this loop wrote or started from (``version``,
    routing from ``effective_ms``). ``rebalancer`` is the working policy.
    """

    rebalancer: Rebalancer
    policy: str
    workers: int
    version: int = 0
    effective_ms: int = 0
    map: dict[str, tuple[int, int]] = field(default_factory=dict)
    steps: int = 0

    @classmethod
    def start(cls, store: Store, run_id: str, p: RebalanceParams) -> RebalanceState:
        """Start from the run's newest assignments version (none: an empty map, version 0)."""
        rows = store.latest_assignments(run_id).to_pylist()
        kmap = {r["key"]: (int(r["worker"]), int(r["set_id"] or 0)) for r in rows}
        bad = sorted({w for w, _ in kmap.values() if not 0 <= w < p.workers})
        if bad:
            raise ConfigError(
                f"run {run_id}'s assignments name worker(s) {bad} but workers={p.workers}; "
                "set workers to the run's worker count"
            )
        pinned = {k: w for k, (w, _) in kmap.items() if w != hash_worker(k, p.workers)}
        return cls(
            rebalancer=seeded(p.rebalancer(), pinned),
            policy=p.policy,
            workers=p.workers,
            version=int(rows[0]["version"]) if rows else 0,
            effective_ms=max((int(r["effective_ms"] or 0) for r in rows), default=0),
            map=kmap,
        )

    def to_theta(self) -> dict[str, Any]:
        """The checkpoint's key/value state (JSON values)."""
        return {
            "policy": self.policy,
            "workers": self.workers,
            "snapshot": snapshot_to_dict(self.rebalancer.snapshot()),
            "version": self.version,
            "effective_ms": self.effective_ms,
            "map": [[k, w, s] for k, (w, s) in sorted(self.map.items())],
            "steps": self.steps,
        }

    @classmethod
    def from_theta(cls, theta: Mapping[str, Any], p: RebalanceParams) -> RebalanceState:
        """Inverse of :meth:`to_theta` under the configured policy.

        The workers must match (a run's W does not change). When the policy
        changed since the checkpoint, the new policy starts seeded with the
        keys the map pins (routing stays as it is until the new policy moves).
        """
        if int(theta["workers"]) != p.workers:
            raise ConfigError(
                f"the run was rebalanced over {theta['workers']} workers, params say "
                f"workers={p.workers}; set workers to the run's worker count"
            )
        kmap = {str(k): (int(w), int(s)) for k, w, s in theta["map"]}
        cfg = p.rebalancer()
        if theta["policy"] == p.policy:
            working = cfg.build(state=snapshot_from_dict(theta["snapshot"]))
        else:
            log.warning("rebalance policy changed from %s to %s", theta["policy"], p.policy)
            pinned = {k: w for k, (w, _) in kmap.items() if w != hash_worker(k, p.workers)}
            working = seeded(cfg, pinned)
        return cls(
            rebalancer=working,
            policy=p.policy,
            workers=p.workers,
            version=int(theta["version"]),
            effective_ms=int(theta["effective_ms"]),
            map=kmap,
            steps=int(theta["steps"]),
        )


def interval_loads(
    store: Store,
    run_id: str,
    start_ms: int,
    end_ms: int,
    kmap: Mapping[str, tuple[int, int]],
    workers: int,
    now: float,
) -> LoadSnapshot:
    """Step 3: the interval's per-key loads and bytes, placed by ``kmap`` (else hash)."""
    t = store.read(
        "key_loads",
        run_id=run_id,
        columns=["key", "count", "bytes"],
        filters=[("window_start", ">=", start_ms), ("window_start", "<", end_ms)],
    )
    loads: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for k, c, b in zip(t["key"].to_pylist(), t["count"].to_pylist(), t["bytes"].to_pylist()):
        loads[k] = loads.get(k, 0) + int(c)
        sizes[k] = sizes.get(k, 0) + int(b)
    keys = tuple(sorted(loads))
    return LoadSnapshot(
        now=now,
        interval_s=(end_ms - start_ms) / 1000.0,
        workers=workers,
        keys=keys,
        loads=np.asarray([loads[k] for k in keys], dtype=np.int64),
        placement=np.asarray(
            [kmap[k][0] if k in kmap else hash_worker(k, workers) for k in keys], dtype=np.int64
        ),
        bytes=np.asarray([sizes[k] for k in keys], dtype=np.int64),
    )


def next_assignment_rows(
    kmap: Mapping[str, tuple[int, int]], assignment: Mapping[str, int], workers: int
) -> list[dict[str, Any]]:
    """Step 5's rows (without version / effective_ms), or ``[]`` when no key changes worker."""
    rows, changed = [], False
    for k in sorted(set(kmap) | set(assignment)):
        home = hash_worker(k, workers)
        old_w, old_set = kmap.get(k, (home, 0))
        new_w = int(assignment.get(k, home))
        moved = new_w != old_w
        changed |= moved
        reason = ("moved" if k in assignment else "home") if moved else "kept"
        rows.append({"key": k, "worker": new_w, "set_id": old_set + int(moved), "reason": reason})
    return rows if changed else []


def _restore(
    store: Store, run_id: str, p: RebalanceParams, version: int
) -> tuple[RebalanceState, int]:
    """Step 2 (restored): the state before ``version``; also the table's newest version."""
    from skewlab.io.state_store import CheckpointStore

    cps = CheckpointStore(store, state_run_id(run_id), f"control-{STEP}")
    before = [c for c in cps.checkpoints() if c < version]
    if before:
        parts = cps.read(before[-1])
        state = RebalanceState.from_theta(parts[0].theta, p)
    else:
        state = RebalanceState.start(store, run_id, p)
        _checkpoint(store, run_id, 0, state, 0)
    rows = store.latest_assignments(run_id)
    newest = int(rows["version"][0].as_py()) if rows.num_rows else 0
    return state, newest


def _checkpoint(store: Store, run_id: str, version: int, state: RebalanceState, tau: int) -> bool:
    from skewlab.io.state_store import CheckpointStore

    cps = CheckpointStore(store, state_run_id(run_id), f"control-{STEP}")
    return cps.write(version, {0: Checkpoint(version, OperatorState(state.to_theta()), tau)})


def _decision_row(decision: Decision, start_ms: int, end_ms: int) -> dict[str, Any]:
    row = decision.to_row(STEP)
    detail = json.loads(row["detail"])
    detail["interval_ms"] = [start_ms, end_ms]
    row["detail"] = json.dumps(detail, sort_keys=True)
    return row


def rebalance_step(
    store: Store,
    run_id: str,
    policy: str,
    params: Mapping[str, Any],
    interval_start_ms: int,
    interval_end_ms: int,
    *,
    state: RebalanceState | None = None,
    clock: Clock | None = None,
    version: int | None = None,
) -> StepResult:
    """Steps 1-7 of the module docstring for one interval.

    Args:
        params: ``workers`` (required), ``lead_s`` (default 1.0) and the policy's
            parameters (``threshold``, ``theta``...).
        state: the in-process loop's working state (updated in place, never
            checkpointed); ``None`` restores it from Delta and checkpoints it.
        clock: wall time in epoch seconds (default :class:`~skewlab.clock.EpochClock`).
        version: the app-transaction version (default ``interval_end_ms``).
    """
    call = StepCall.begin(STEP, run_id, policy, interval_start_ms, interval_end_ms, version)
    start, end, v, result = call.start, call.end, call.version, call.result
    p = RebalanceParams.of(policy, params)
    app = app_id(STEP, run_id)

    if (done := call.already_done(store, "decisions", app)) is not None:  # 1.
        return done
    restored = state is None  # 2.
    newest = 0
    if state is None:
        state, newest = _restore(store, run_id, p, v)
    elif state.workers != p.workers or state.policy != p.policy:
        raise ConfigError(
            f"the loop's state is {state.policy} over {state.workers} workers, the params say "
            f"{p.policy} over {p.workers}"
        )
    now = (clock or EpochClock()).now()
    snap = interval_loads(store, run_id, start, end, state.map, p.workers, now)  # 3.
    if not snap.keys:
        return result(StepStatus.NO_LOAD, "no key_loads rows in the interval")
    decision = state.rebalancer.decide(now, snap)  # 4.
    state.steps += 1
    written: list[str] = []
    rows = next_assignment_rows(state.map, decision.assignment_map(), p.workers)  # 5.
    if rows:
        state.version = max(state.version, newest) + 1
        state.effective_ms = max(state.effective_ms, round((now + p.lead_s) * 1000))
        for r in rows:
            r["version"], r["effective_ms"] = state.version, state.effective_ms
        if store.append("assignments", rows, app_id=app, version=v, run_id=run_id):
            written.append("assignments")
        state.map = {r["key"]: (r["worker"], r["set_id"]) for r in rows}
        log.info(
            "assignments v%d from %d ms: %d keys moved (imbScore %.1f -> %.1f)",
            state.version, state.effective_ms, decision.keys_moved,
            decision.imbalance_before, decision.imbalance_after,
        )  # fmt: skip
    if restored and _checkpoint(store, run_id, v, state, end):  # 6.
        written.append("operator_state")
    row = _decision_row(decision, start, end)  # 7.
    if store.append("decisions", [row], app_id=app, version=v, run_id=run_id):
        written.append("decisions")
    numbers = {
        "keys": len(snap.keys),
        "load": decision.load_total,
        "keys_moved": decision.keys_moved,
        "tuples_moved": decision.tuples_moved,
        "imbalance_before": float(decision.imbalance_before),
        "imbalance_after": float(decision.imbalance_after),
        "assignments_version": state.version,
    }
    return result(
        StepStatus.DECIDED, decision.reason, written=tuple(written), numbers=numbers,
        decision=decision,
    )  # fmt: skip
