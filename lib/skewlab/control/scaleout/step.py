"""The scale-out step: worker signals from Delta -> policy -> ``operator_state`` + ``decisions``.

:func:`scaleout_step` is the scheduled DAG's decision for one interval ``[start, end)``:

1. ``v`` = the version (``interval_end_ms``); the loop's state holds ``v``: done;
2. each operator's policy snapshot restored from the state checkpoint before ``v``;
3. signals per worker from Delta only (input rate, lag, busy), scored; no rows: no load;
4. per operator: the policy, on data time, observes the score (and acknowledgements);
5. ``TakeCheckpoint`` carried out (the operator's committed worker state);
6. one ``decisions`` row per action, in one commit under ``(scale-out:<run>, v)``;
7. the state after the decision, as checkpoint ``v``: written last, it marks the interval.

Starting and stopping instances stays with the live state manager
(:mod:`skewlab.control.scaleout.manager`). Details: docs/control.md, section
``skewlab.control.scaleout.step``.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skewlab.clock import Clock, EpochClock, ManualClock
from skewlab.control.base import StepCall, StepResult, StepStatus
from skewlab.errors import ConfigError
from skewlab.rebalance.base import hash_worker
from skewlab.rundir import app_id
from skewlab.runsettings import StateManagerSettings
from skewlab.spec import DEFAULTS, SCALE_OUT_POLICIES
from skewlab.state.base import Phase, PolicySnapshot, TakeCheckpoint
from skewlab.state.checkpoint import Checkpoint
from skewlab.state.operator_state import OperatorState
from skewlab.state.score import Level, Signals, ThresholdConfig, bottleneck_score

if TYPE_CHECKING:
    from skewlab.pipeline.store import Store
    from skewlab.state.base import Action

__all__ = [
    "KEYS",
    "POLICIES",
    "STEP",
    "OperatorDecision",
    "ScaleOutParams",
    "check_scaleout",
    "operator_instances",
    "scaleout_step",
    "snapshot_from_dict",
    "snapshot_to_dict",
    "state_run_id",
    "worker_signals",
]

log = logging.getLogger(__name__)

STEP = "scale-out"
POLICIES = SCALE_OUT_POLICIES
"""The ``scale_out`` values, as ``skewlab run --scale-out`` names them
(:data:`skewlab.runsettings.POLICIES` maps them to library policies)."""
THRESHOLD_KEYS = tuple(f.name for f in dataclasses.fields(ThresholdConfig))
POLICY_KEYS = (*THRESHOLD_KEYS, "cooldown_s", "interval_s")
"""Keys passed to the policy config (thresholds, cool-down, checkpoint interval)."""
KEYS = ("workers", "service_us", "max_instances", *POLICY_KEYS)
"""Every key of the step's ``params``."""


def state_run_id(run_id: str) -> str:
    """The ``operator_state`` run id holding the scheduled loop's policy states."""
    return f"{run_id}#control-{STEP}"


def _number(name: str, value: Any, *, integer: bool = False) -> None:
    kinds = int if integer else int | float
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if integer else "a number"
        raise ConfigError(f"scale-out {name} must be {what}, got {value!r}")


@dataclass(frozen=True)
class ScaleOutParams:
    """``workers`` (the run's W), ``service_us`` (> 0), ``max_instances`` (2..16) and the
    policy's keys (thresholds, ``cooldown_s``, checkpoint ``interval_s``)."""

    policy: str
    workers: int
    service_us: float
    max_instances: int = DEFAULTS["max_instances"]
    policy_params: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, policy: str, params: Mapping[str, Any]) -> ScaleOutParams:
        """Validate; one-line ConfigError naming what is allowed."""
        if policy not in POLICIES:
            raise ConfigError(f"scale_out must be one of {', '.join(POLICIES)}, got {policy!r}")
        unknown = sorted(set(params) - set(KEYS))
        if unknown:
            raise ConfigError(
                f"scale-out has no parameter {', '.join(unknown)}; valid: {', '.join(KEYS)}"
            )
        if "workers" not in params:
            raise ConfigError("scale-out needs workers (the run's worker count, an integer >= 1)")
        if "service_us" not in params:
            raise ConfigError(
                "scale-out needs service_us (microseconds per event; capacity = 1e6 / service_us)"
            )
        workers, service_us = params["workers"], params["service_us"]
        max_instances = params.get("max_instances", 2)
        _number("workers", workers, integer=True)
        if workers < 1:
            raise ConfigError(f"scale-out workers must be an integer >= 1, got {workers!r}")
        _number("service_us", service_us)
        if not service_us > 0:
            raise ConfigError(f"scale-out service_us must be a number > 0, got {service_us!r}")
        _number("max_instances", max_instances, integer=True)
        if not 2 <= max_instances <= 16:
            raise ConfigError(f"scale-out max_instances must be in 2..16, got {max_instances!r}")
        rest = {k: v for k, v in params.items() if k in POLICY_KEYS}
        for k, v in rest.items():
            _number(k, v, integer=k == "dwell")
        out = cls(policy, workers, float(service_us), max_instances, rest)
        try:
            out.settings()
        except ConfigError as exc:
            raise ConfigError(f"scale-out params: {exc}") from None
        return out

    @property
    def capacity(self) -> float:
        """Events per second one instance processes: ``1e6 / service_us``."""
        return 1e6 / self.service_us

    def settings(
        self,
        run_id: str = "",
        delta_root: str = "",
        interval_s: float = DEFAULTS["scale_out_interval_s"],
    ) -> StateManagerSettings:
        """The in-process loop's settings (its ``policy_config()`` builds the policy)."""
        return StateManagerSettings(
            run_id=run_id,
            delta_root=delta_root,
            policy=self.policy,
            workers=self.workers,
            service_us=self.service_us,
            max_instances=self.max_instances,
            interval_s=interval_s,
            params=dict(self.policy_params),
        )


def check_scaleout(policy: str, params: Mapping[str, Any]) -> None:
    """Validate a scale-out ``policy`` and its ``params`` (no I/O)."""
    ScaleOutParams.of(policy, params)


# ---------------------------------------------------------------- the policy's state as JSON


def snapshot_to_dict(s: PolicySnapshot) -> dict[str, Any]:
    """A JSON-safe dict of ``s`` (enums by value, tuples as lists)."""
    return {f.name: _plain(getattr(s, f.name)) for f in dataclasses.fields(s)}


def snapshot_from_dict(d: Mapping[str, Any]) -> PolicySnapshot:
    """Inverse of :func:`snapshot_to_dict`."""
    names = {f.name for f in dataclasses.fields(PolicySnapshot)}
    kw = {k: v for k, v in d.items() if k in names}
    kw["phase"] = Phase(d["phase"])
    for k in ("active", "pending", "detector"):
        kw[k] = tuple(int(x) for x in d[k])
    return PolicySnapshot(**kw)


# ---------------------------------------------------------------- step 3: signals


def worker_signals(
    store: Store, run_id: str, start_ms: int, end_ms: int, service_us: float
) -> dict[int, Signals]:
    """Step 3: the signals of every worker with rows up to ``end_ms`` (empty: no rows in the
    interval)."""
    cols = ["window_start", "worker", "count"]
    before = [("window_start", "<", end_ms)]
    loads = store.read("key_loads", run_id=run_id, columns=cols, filters=before)
    done = store.read("partials", run_id=run_id, columns=cols, filters=before)
    length_s = (end_ms - start_ms) / 1000.0
    offered: dict[int, int] = {}
    taken: dict[int, int] = {}
    backlog: dict[int, int] = {}
    for table, inside, sign in ((loads, offered, 1), (done, taken, -1)):
        for ws, w, c in zip(*(table[k].to_pylist() for k in cols)):
            backlog[w] = backlog.get(w, 0) + sign * int(c)
            if ws >= start_ms:
                inside[w] = inside.get(w, 0) + int(c)
    if not offered and not taken:
        return {}
    svc = service_us * 1e-6
    return {
        j: Signals(
            input_rate=offered.get(j, 0) / length_s,
            service_rate=1.0 / svc,
            queue_len=float(max(backlog[j], 0)),
            busy=min(1.0, taken.get(j, 0) * svc / length_s),
        )
        for j in sorted(backlog)
    }


def operator_instances(store: Store, run_id: str, workers: int) -> dict[int, list[int]]:
    """Per operator ``g``: ``g`` and the workers the newest ``assignments`` put its keys on."""
    rows = store.latest_assignments(run_id)
    out = {g: {g} for g in range(workers)}
    for k, w in zip(rows["key"].to_pylist(), rows["worker"].to_pylist()):
        out[hash_worker(k, workers)].add(int(w))
    return {g: sorted(ws) for g, ws in out.items()}


# ---------------------------------------------------------------- steps 2, 4-7


@dataclass(frozen=True)
class OperatorDecision:
    """One operator's outcome of one interval: its score, level, phase and actions."""

    group: int
    instances: tuple[int, ...]
    score: float
    level: Level
    phase: Phase
    actions: tuple[Action, ...]
    snapshot: PolicySnapshot


def _restore(
    store: Store, run_id: str, p: ScaleOutParams, version: int
) -> dict[int, PolicySnapshot | None]:
    """Step 2: each operator's snapshot from the newest state checkpoint before ``version``."""
    from skewlab.io.state_store import CheckpointStore

    cps = CheckpointStore(store, state_run_id(run_id), f"control-{STEP}")
    before = [c for c in cps.checkpoints() if c < version]
    out: dict[int, PolicySnapshot | None] = dict.fromkeys(range(p.workers))
    if not before:
        return out
    for g, part in cps.read(before[-1]).items():
        theta = part.theta
        if int(theta["workers"]) != p.workers:
            raise ConfigError(
                f"the run was scaled out over {theta['workers']} workers, params say "
                f"workers={p.workers}; set workers to the run's worker count"
            )
        if theta["policy"] != p.policy:
            log.warning("scale-out policy changed from %s to %s", theta["policy"], p.policy)
            continue
        out[g] = snapshot_from_dict(theta["snapshot"])
    return out


def _save(
    store: Store, run_id: str, p: ScaleOutParams, version: int, tau: int,
    decided: list[OperatorDecision],
) -> bool:  # fmt: skip
    """Step 7: the state after the decision, as state checkpoint ``version``."""
    from skewlab.io.state_store import CheckpointStore

    parts = {
        d.group: Checkpoint(
            version,
            OperatorState(
                {
                    "policy": p.policy,
                    "workers": p.workers,
                    "snapshot": snapshot_to_dict(d.snapshot),
                    "instances": list(d.instances),
                    "score": round(d.score, 3),
                }
            ),
            tau,
        )
        for d in decided
    }
    return CheckpointStore(store, state_run_id(run_id), f"control-{STEP}").write(version, parts)


def _plain(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple):
        return list(value)
    return value


def _signals_dict(sig: Signals) -> dict[str, float]:
    out = {f.name: round(float(getattr(sig, f.name)), 3) for f in dataclasses.fields(sig)}
    out["score"] = round(bottleneck_score(sig), 3)
    return out


def scaleout_step(
    store: Store,
    run_id: str,
    policy: str,
    params: Mapping[str, Any],
    interval_start_ms: int,
    interval_end_ms: int,
    *,
    clock: Clock | None = None,
    version: int | None = None,
) -> StepResult:
    """Steps 1-7 of the module docstring for one interval.

    Args:
        policy: ``checkpoint``, ``active-backup`` or ``restart``.
        params: ``workers`` and ``service_us`` (required), ``max_instances`` (2), the
            thresholds ``scale_in`` / ``alarming`` / ``scale_out`` / ``hysteresis`` /
            ``dwell``, ``cooldown_s`` and ``interval_s`` (checkpoint interval).
        clock: wall time in epoch seconds for the decisions' ``ts`` (the policies run
            on data time: the interval's end).
        version: the app-transaction version (default ``interval_end_ms``).
    """
    from skewlab.control.scaleout.state import write_checkpoint
    from skewlab.io.state_store import CheckpointStore

    call = StepCall.begin(STEP, run_id, policy, interval_start_ms, interval_end_ms, version)
    start, end, v, result = call.start, call.end, call.version, call.result
    p = ScaleOutParams.of(policy, params)
    app = app_id(STEP, run_id)

    marker = CheckpointStore(store, state_run_id(run_id), f"control-{STEP}").app_id
    if (done := call.already_done(store, "operator_state", marker)) is not None:  # 1.
        return done
    snapshots = _restore(store, run_id, p, v)  # 2.
    signals = worker_signals(store, run_id, start, end, p.service_us)  # 3.
    if not signals:
        return result(StepStatus.NO_LOAD, "no key_loads or partials rows in the interval")
    idle = Signals(0.0, p.capacity)
    scores = {j: bottleneck_score(s) for j, s in signals.items()}
    instances = operator_instances(store, run_id, p.workers)
    cfg = p.settings(run_id, store.root, (end - start) / 1000.0).policy_config()
    data_time = ManualClock(end / 1000.0)
    now_ms = round((clock or EpochClock()).now() * 1000)
    decided: list[OperatorDecision] = []
    rows: list[dict[str, Any]] = []
    written: list[str] = []
    checkpoints = 0
    for g in range(p.workers):
        mine = instances[g]
        score = max(scores.get(j, 0.0) for j in mine)
        pol = cfg.build(state=snapshots[g], clock=data_time)  # 4.
        actions: list[Action] = list(pol.observe(score))
        if pol.pending and len(mine) >= len(pol.pending):
            actions += pol.on_ready(pol.pending)
            if p.policy == "checkpoint":
                actions += pol.on_caught_up(pol.pending)
        sigs = {str(j): _signals_dict(signals.get(j, idle)) for j in mine}
        for a in actions:
            detail: dict[str, Any] = {
                "action": type(a).__name__,
                "group": g,
                "workers": mine,
                **{f.name: _plain(getattr(a, f.name)) for f in dataclasses.fields(a)},
                "score": round(score, 3),
                "signals": sigs,
                "level": pol.detector.level.name,
                "interval_ms": [start, end],
            }
            if isinstance(a, TakeCheckpoint):  # 5.
                out = write_checkpoint(store, run_id, g, mine, a.checkpoint)
                detail |= {"tau": out["tau"], "keys": out["keys"], "carried_out": True}
                checkpoints += 1
                if out["new"] and "operator_state" not in written:
                    written.append("operator_state")
            else:
                detail["carried_out"] = False  # for the run's executor (skewlab run --scale-out)
            rows.append(
                {
                    "ts": now_ms,
                    "loop": STEP,
                    "policy": policy,
                    "detail": json.dumps(detail, sort_keys=True, default=str),
                    "cost": 0.0,
                    "imbalance_before": None,
                    "imbalance_after": None,
                    "reason": f"score {score:.1f}",
                }
            )
        decided.append(
            OperatorDecision(
                g, tuple(mine), score, pol.detector.level, pol.phase, tuple(actions), pol.snapshot()
            )
        )
        if actions:
            log.info("operator %d (score %.1f): %s", g, score, [type(a).__name__ for a in actions])
    if rows and store.append("decisions", rows, app_id=app, version=v, run_id=run_id):  # 6.
        written.append("decisions")
    if _save(store, run_id, p, v, end, decided) and "operator_state" not in written:  # 7.
        written.append("operator_state")
    top = max(decided, key=lambda d: d.score)
    if rows:
        reason = "; ".join(
            f"g{d.group}: {', '.join(type(a).__name__ for a in d.actions)}"
            for d in decided
            if d.actions
        )
    else:
        reason = f"no action; top score {top.score:.1f} (g{top.group} {top.level.name})"
    numbers = {
        "operators": p.workers,
        "actions": len(rows),
        "checkpoints": checkpoints,
        "max_score": float(top.score),
        "alarmed": sum(d.level >= Level.ALARMING for d in decided),
        "scaling": sum(d.phase is Phase.SCALING for d in decided),
    }
    return result(
        StepStatus.DECIDED, reason, written=tuple(written), numbers=numbers, decision=decided
    )
