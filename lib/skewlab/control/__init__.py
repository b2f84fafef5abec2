"""Control steps: one rebalance / autoscale / scale-out decision per data interval.

:data:`STEPS` registers each step (:mod:`.rebalance`, :mod:`.autoscale`,
:mod:`.scaleout.step`) with its switch, policies and check; every step reads its loop's
Delta input for the interval, runs the policy through the library function the in-process
loop uses, and writes its decision idempotently (app transaction = interval end).
Details: docs/control.md, section ``skewlab.control``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skewlab.control import autoscale, rebalance
from skewlab.control.autoscale import (
    AutoscaleParams,
    autoscale_step,
    consumer_assignment_rows,
    reassignment_row,
    record_reassignment,
)
from skewlab.control.base import ControlStep, StepFunction, StepResult, StepStatus, check_interval
from skewlab.control.rebalance import (
    RebalanceParams,
    RebalanceState,
    rebalance_step,
)
from skewlab.control.scaleout import step as scaleout
from skewlab.control.scaleout.step import ScaleOutParams, scaleout_step
from skewlab.registry import resolve

if TYPE_CHECKING:
    from skewlab.pipeline.store import Store

__all__ = [
    "STEPS",
    "AutoscaleParams",
    "ControlStep",
    "RebalanceParams",
    "RebalanceState",
    "ScaleOutParams",
    "StepFunction",
    "StepResult",
    "StepStatus",
    "autoscale_step",
    "check_interval",
    "consumer_assignment_rows",
    "reassignment_row",
    "rebalance_step",
    "record_reassignment",
    "resolve_step",
    "run_step",
    "scaleout_step",
]

STEPS: dict[str, ControlStep] = {
    "rebalance": ControlStep(
        name="rebalance",
        switch="rebalance",
        policies=rebalance.POLICIES,
        check=rebalance.check_rebalance,
        run=rebalance_step,
        description="key_loads -> rebalancer -> assignments + decisions (+ operator_state)",
    ),
    "autoscale": ControlStep(
        name="autoscale",
        switch="autoscale",
        policies=autoscale.POLICIES,
        check=autoscale.check_autoscale,
        run=autoscale_step,
        description="partition_loads -> bin packing -> consumer_assignments + decisions",
    ),
    "scale-out": ControlStep(
        name="scale-out",
        switch="scale_out",
        policies=scaleout.POLICIES,
        check=scaleout.check_scaleout,
        run=scaleout_step,
        description="worker scores -> scale-out policy -> operator_state + decisions",
    ),
}
"""The control loops by name, in the order the DAG lists them (STYLE.md rule 2)."""


def resolve_step(name: str) -> ControlStep:
    """The registered step ``name``; an unknown name lists the valid ones."""
    return resolve(STEPS, name, "control step")


def run_step(
    name: str,
    store: Store,
    run_id: str,
    policy: str,
    params: Mapping[str, Any],
    interval_start_ms: int,
    interval_end_ms: int,
) -> StepResult:
    """Validate ``policy`` / ``params`` for step ``name`` and run it over the interval."""
    step = resolve_step(name)
    step.check(policy, params)
    return step.run(store, run_id, policy, params, interval_start_ms, interval_end_ms)
