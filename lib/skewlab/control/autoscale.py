"""The autoscale step: Delta ``partition_loads`` -> bin packing -> ``consumer_assignments``.

:func:`autoscale_step` decides one data interval ``[start, end)`` (the code marks each step):

1. ``v`` = the version (``interval_end_ms``); ``consumer_assignments`` holds ``v``: done;
2. the interval's speed per partition (mean summed ``bytes_per_s`` over its windows);
3. the previous iteration ``X(t_{k-1})`` of the run's ``consumer_assignments``;
4. the Sentinel's reason and ``reassign(config, k - 1, X, speeds)`` (Landau Sec. V-C);
5. :func:`record_reassignment`: the ``decisions`` row, then the assignment rows, both
   version ``v``; the assignment rows go last, so a retry completes the same decision.

Rationale and the table columns: docs/control.md, section ``skewlab.control.autoscale``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from skewlab.autoscale.algorithms import ALGORITHM_NAMES, AutoscalerConfig, Reassignment
from skewlab.autoscale.base import Assignment
from skewlab.autoscale.controller import reassign, sentinel_reason, sized
from skewlab.clock import Clock, EpochClock
from skewlab.control.base import StepCall, StepResult, StepStatus
from skewlab.errors import ConfigError
from skewlab.rundir import app_id

if TYPE_CHECKING:
    from skewlab.pipeline.store import Store

__all__ = [
    "POLICIES",
    "STEP",
    "AutoscaleParams",
    "autoscale_step",
    "check_autoscale",
    "consumer_assignment_rows",
    "interval_speeds",
    "previous_assignment",
    "reassignment_row",
    "record_reassignment",
]

log = logging.getLogger(__name__)

STEP = "autoscale"
POLICIES = ALGORITHM_NAMES
"""The bin-packing heuristics (Kafka's assignors need a live group; not scheduled)."""
KEYS = ("capacity", "bin_capacity", "topic", "partitions")


def _positive(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"autoscale {name} must be a number > 0 (bytes/s), got {value!r}")
    return float(value)


@dataclass(frozen=True)
class AutoscaleParams:
    """``capacity`` (``C_bar``, bytes/s), optional ``bin_capacity`` (``C``, default 5/6
    ``C_bar``), ``topic`` (default: the only topic in the interval) and ``partitions``
    (default: the highest partition seen + 1)."""

    algorithm: str
    capacity: float
    bin_capacity: float | None = None
    topic: str | None = None
    partitions: int | None = None

    @classmethod
    def of(cls, algorithm: str, params: Mapping[str, Any]) -> AutoscaleParams:
        """Validate; one-line ConfigError naming what is allowed."""
        if algorithm not in POLICIES:
            raise ConfigError(f"autoscale must be one of {', '.join(POLICIES)}, got {algorithm!r}")
        unknown = sorted(set(params) - set(KEYS))
        if unknown:
            raise ConfigError(
                f"autoscale has no parameter {', '.join(unknown)}; valid: {', '.join(KEYS)}"
            )
        if "capacity" not in params:
            raise ConfigError("autoscale needs capacity (C_bar, bytes/s a consumer reads)")
        bin_c = params.get("bin_capacity")
        topic, parts = params.get("topic"), params.get("partitions")
        if topic is not None and not (isinstance(topic, str) and topic.strip()):
            raise ConfigError(f"autoscale topic must be a non-empty string, got {topic!r}")
        if parts is not None and (isinstance(parts, bool) or not isinstance(parts, int)
                                  or not 1 <= parts <= 4096):  # fmt: skip
            raise ConfigError(f"autoscale partitions must be an integer in 1..4096, got {parts!r}")
        out = cls(
            algorithm,
            _positive("capacity", params["capacity"]),
            None if bin_c is None else _positive("bin_capacity", bin_c),
            topic,
            parts,
        )
        out.config()
        return out

    def config(self) -> AutoscalerConfig:
        """The library config: ``consumer_capacity = capacity`` (``C_bar``), bin capacity
        ``bin_capacity`` (``C``; None = its 5/6 ``C_bar`` default); raises
        :class:`ConfigError` if the library refuses them."""
        return AutoscalerConfig(self.algorithm, self.capacity, self.bin_capacity)


def check_autoscale(algorithm: str, params: Mapping[str, Any]) -> None:
    """Validate an autoscale ``algorithm`` and its ``params`` (no I/O)."""
    AutoscaleParams.of(algorithm, params)


def interval_speeds(
    store: Store, run_id: str, start_ms: int, end_ms: int, topic: str | None
) -> tuple[str | None, np.ndarray]:
    """Step 2: the topic and its per-partition speeds (bytes/s); ``(topic, [])`` if no rows.

    ``topic=None`` takes the only topic of the interval; several: ConfigError naming them.
    """
    filters: list[Any] = [("window_start", ">=", start_ms), ("window_start", "<", end_ms)]
    if topic is not None:
        filters.append(("topic", "=", topic))
    t = store.read(
        "partition_loads",
        run_id=run_id,
        columns=["window_start", "topic", "partition", "bytes_per_s"],
        filters=filters,
    )
    topics = sorted(set(t["topic"].to_pylist()))
    if len(topics) > 1:
        raise ConfigError(
            f"partition_loads of run {run_id} has several topics in the interval "
            f"({', '.join(topics)}); set the autoscale topic param"
        )
    if not topics:
        return topic, np.zeros(0)
    windows = t["window_start"].to_pylist()
    parts = t["partition"].to_pylist()
    sums = np.zeros(max(parts) + 1)
    for p, s in zip(parts, t["bytes_per_s"].to_pylist()):
        sums[p] += float(s)
    return topics[0], sums / len(set(windows))


def previous_assignment(store: Store, run_id: str, topic: str) -> tuple[int, Assignment | None]:
    """Step 3: ``(iteration, X)`` of the newest ``consumer_assignments`` iteration (or 0, None)."""
    t = store.read(
        "consumer_assignments",
        run_id=run_id,
        columns=["iteration", "consumer", "partition"],
        filters=[("topic", "=", topic)],
    )
    if t.num_rows == 0:
        return 0, None
    its = t["iteration"].to_pylist()
    last = max(its)
    owner: dict[int, int] = {}
    for it, c, p in zip(its, t["consumer"].to_pylist(), t["partition"].to_pylist()):
        if it == last:
            try:
                owner[int(p)] = int(c)
            except ValueError:
                raise ConfigError(
                    f"consumer_assignments of run {run_id} name consumer {c!r}; "
                    "the autoscaler needs integer consumer ids"
                ) from None
    size = max(owner) + 1
    return int(last), Assignment(tuple(owner.get(j, -1) for j in range(size)))


def consumer_assignment_rows(decision: Reassignment, topic: str) -> list[dict[str, Any]]:
    """One row per partition of ``decision.assignment``: its consumer and ``keep`` /
    ``assign`` (no previous owner) / ``move``."""
    prev = decision.previous.owner if decision.previous is not None else ()
    rows = []
    for j, c in enumerate(decision.assignment.owner):
        before = prev[j] if j < len(prev) else -1
        action = "keep" if before == c else ("assign" if before < 0 else "move")
        rows.append(
            {
                "iteration": decision.iteration,
                "consumer": str(c),
                "topic": topic,
                "partition": j,
                "action": action,
            }
        )
    return rows


def reassignment_row(
    decision: Reassignment,
    *,
    policy: str,
    reason: str,
    ts_ms: int,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``decisions`` row: detail = iteration, consumers, moved, Rscore, overloaded + extra."""
    detail = {
        "iteration": decision.iteration,
        "consumers": decision.consumers,
        "moved": list(decision.moved),
        "rscore": decision.rscore,
        "overloaded": list(decision.overloaded),
        **(extra or {}),
    }
    return {
        "ts": int(ts_ms),
        "loop": STEP,
        "policy": policy,
        "detail": json.dumps(detail),
        "cost": float(decision.rscore),
        "imbalance_before": None,
        "imbalance_after": None,
        "reason": reason,
    }


def record_reassignment(
    store: Store,
    run_id: str,
    topic: str,
    decision: Reassignment,
    *,
    policy: str,
    reason: str,
    ts_ms: int,
    app: str,
    version: int,
    extra: Mapping[str, Any] | None = None,
) -> tuple[str, ...]:
    """Write a reassignment: ``decisions`` row, then ``consumer_assignments`` rows.

    Both under app transaction ``(app, version)``; returns the tables committed
    now (a replay commits neither).
    """
    row = reassignment_row(decision, policy=policy, reason=reason, ts_ms=ts_ms, extra=extra)
    written = []
    if store.append("decisions", [row], app_id=app, version=version, run_id=run_id):
        written.append("decisions")
    rows = consumer_assignment_rows(decision, topic)
    if store.append("consumer_assignments", rows, app_id=app, version=version, run_id=run_id):
        written.append("consumer_assignments")
    return tuple(written)


def autoscale_step(
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
    """Steps 1-5 of the module docstring for one interval.

    Args:
        policy: the bin-packing algorithm (``mwf``, ``bfd``...).
        params: ``capacity`` (required), ``bin_capacity``, ``topic``, ``partitions``.
        clock: wall time in epoch seconds for the decision's ``ts``.
        version: the app-transaction version (default ``interval_end_ms``).
    """
    call = StepCall.begin(STEP, run_id, policy, interval_start_ms, interval_end_ms, version)
    start, end, v, result = call.start, call.end, call.version, call.result
    p = AutoscaleParams.of(policy, params)
    app = app_id(STEP, run_id)

    if (done := call.already_done(store, "consumer_assignments", app)) is not None:  # 1.
        return done
    topic, speeds = interval_speeds(store, run_id, start, end, p.topic)  # 2.
    if topic is None or not speeds.size:
        return result(StepStatus.NO_LOAD, "no partition_loads rows in the interval")
    iteration, prev = previous_assignment(store, run_id, topic)  # 3.
    size = max(len(speeds), prev.partitions if prev is not None else 0, p.partitions or 0)
    speeds = np.pad(speeds, (0, size - len(speeds)))
    current = sized(prev, size)
    cfg = p.config()
    reason = sentinel_reason(current, speeds, cfg.capacities.c, timed_out=True) or "timeout"  # 4.
    decision = reassign(cfg, iteration, current, speeds)
    now = (clock or EpochClock()).now()
    extra = {
        "interval_ms": [start, end],
        "topic": topic,
        "speeds": [round(float(s), 3) for s in speeds],
    }
    written = record_reassignment(  # 5.
        store, run_id, topic, decision, policy=policy, reason=reason,
        ts_ms=round(now * 1000), app=app, version=v, extra=extra,
    )  # fmt: skip
    log.info(
        "autoscale %s iteration %d (%s): %d consumers, %d moved, Rscore %.3f",
        policy, decision.iteration, reason, decision.consumers, len(decision.moved),
        decision.rscore,
    )  # fmt: skip
    numbers = {
        "iteration": decision.iteration,
        "partitions": size,
        "consumers": decision.consumers,
        "moved": len(decision.moved),
        "rscore": float(decision.rscore),
        "load_bytes_per_s": float(speeds.sum()),
    }
    return result(
        StepStatus.DECIDED, reason, written=written, numbers=numbers,
        decision=decision,
    )  # fmt: skip
