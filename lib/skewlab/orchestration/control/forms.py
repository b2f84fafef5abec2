"""The ``skewlab_control`` DAG form of each control step: its params and their mapping.

Each entry of :data:`FORMS` gives a step's DAG params (its switch first) and turns
validated DAG values into the step's ``params`` (what :mod:`skewlab.control` runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from skewlab.control import autoscale, rebalance
from skewlab.control.scaleout import step as scaleout
from skewlab.orchestration.params import REBALANCE_KEYS, SCALE_OUT_KEYS
from skewlab.orchestration.paramspec import OFF, ParamSpec


def rebalance_form() -> tuple[ParamSpec, ...]:
    """The ``skewlab_control`` params of this step (``rebalance`` is the switch).

    Built when called (the in-process loop never needs a form).
    """

    return (
        ParamSpec(
            "rebalance", "rebalance", OFF, "string", "Rebalance policy",
            "Move hot keys of the run: smalops (heavy hitters, best fit, Eq. 4), dlb-h / "
            "dlb-l (DLB's heaviest / lightest key), lptf (re-pack all keys). none: off.",
            enum=(OFF, *rebalance.POLICIES), section="Rebalance",
        ),
        ParamSpec(
            "workers", "workers", 4, "integer", "Workers (W)",
            "The run's worker count: KEY grouping's hash space (must match the run).",
            1, 1024, section="Rebalance",
        ),
        ParamSpec(
            "rebalance_lead", "lead_s", 1.0, "number", "Lead (s)",
            "A new assignments version routes events from its write time + this lead.",
            minimum=0, section="Rebalance",
        ),
        ParamSpec(
            "rebalance_params", "policy_params", {}, "object", "Rebalance policy params",
            'The policy\'s parameters, e.g. {"threshold": 0.05, "gate": false} (smalops) or '
            '{"theta": 15} (dlb-h, dlb-l, lptf).',
            properties=REBALANCE_KEYS, section="Rebalance",
        ),
    )  # fmt: skip


def rebalance_params_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The step's ``params`` from validated DAG values."""
    return {
        "workers": values["workers"],
        "lead_s": values["rebalance_lead"],
        **values["rebalance_params"],
    }


def autoscale_form() -> tuple[ParamSpec, ...]:
    """The ``skewlab_control`` params of this step (``autoscale`` is the switch)."""

    def key(name: str, kind: Any, description: str, **bounds: Any) -> ParamSpec:
        return ParamSpec(name, name, None, kind, name, description, **bounds)

    return (
        ParamSpec(
            "autoscale", "algorithm", OFF, "string", "Autoscale algorithm",
            "Bin-pack the partitions of partition_loads onto consumers with this heuristic "
            "(Landau et al.; mwf, bfd, ...). none: off.",
            enum=(OFF, *autoscale.POLICIES), section="Autoscale",
        ),
        ParamSpec(
            "autoscale_capacity", "capacity", 120_000.0, "number", "Consumer capacity (bytes/s)",
            "C_bar, bytes/s one consumer reads at most; the bin capacity C is 5/6 of it.",
            exclusive_minimum=0, section="Autoscale",
        ),
        ParamSpec(
            "autoscale_params", "params", {}, "object", "Autoscale params",
            'Optional: {"bin_capacity": C, "topic": "routed-...", "partitions": P}; default '
            "C = 5/6 C_bar, the only topic of the interval, the highest partition seen + 1.",
            properties=(
                key("bin_capacity", "number", "bin capacity C (bytes/s), at most C_bar",
                    exclusive_minimum=0),
                key("topic", "string", "the partition_loads topic to scale"),
                key("partitions", "integer", "partitions of the topic", minimum=1,
                    maximum=4096),
            ),
            section="Autoscale",
        ),
    )  # fmt: skip


def autoscale_params_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The step's ``params`` from validated DAG values."""
    return {"capacity": values["autoscale_capacity"], **values["autoscale_params"]}


def scaleout_form() -> tuple[ParamSpec, ...]:
    """The ``skewlab_control`` params of this step (``scale_out`` is the switch).

    ``workers`` is the rebalance step's param (one per DAG); the rest sits in
    the JSON object ``scale_out_params``.
    """

    workers = next(p for p in rebalance_form() if p.name == "workers")
    policy_keys = tuple(p for p in SCALE_OUT_KEYS if p.name in scaleout.POLICY_KEYS)
    return (
        ParamSpec(
            "scale_out", "scale_out", OFF, "string", "Scale-out policy",
            "Score each worker from key_loads / partials and run a scale-out policy per "
            "operator: checkpoint (state saved from alarming), active-backup, restart "
            "(baseline). Checkpoints are written; starting / stopping instances and the "
            "routing switch are recorded for skewlab run --scale-out. none: off.",
            enum=(OFF, *scaleout.POLICIES), section="Scale out",
        ),
        workers,
        ParamSpec(
            "scale_out_params", "scale_out_params", {}, "object", "Scale-out params",
            'service_us (required: capacity = 1e6 / service_us events/s per instance), '
            'max_instances (2), thresholds and policy keys, e.g. {"service_us": 500, '
            '"alarming": 40, "scale_out": 70, "dwell": 2, "interval_s": 60}.',
            properties=(
                ParamSpec("service_us", "service_us", None, "number", "service_us",
                          "microseconds one event costs a worker (required)",
                          exclusive_minimum=0),
                ParamSpec("max_instances", "max_instances", None, "integer", "max_instances",
                          "instances one operator may be split onto (2)", 2, 16),
                *policy_keys,
            ),
            section="Scale out",
        ),
    )  # fmt: skip


def scaleout_params_of(values: Mapping[str, Any]) -> dict[str, Any]:
    """The step's ``params`` from validated DAG values."""
    return {"workers": values["workers"], **values["scale_out_params"]}


@dataclass(frozen=True)
class StepForm:
    """A step's DAG params (``form()``, its switch first) and ``params_of(values)``."""

    form: Callable[[], tuple[ParamSpec, ...]]
    params_of: Callable[[Mapping[str, Any]], dict[str, Any]]


FORMS: dict[str, StepForm] = {
    "rebalance": StepForm(rebalance_form, rebalance_params_of),
    "autoscale": StepForm(autoscale_form, autoscale_params_of),
    "scale-out": StepForm(scaleout_form, scaleout_params_of),
}
"""Step name (a key of :data:`skewlab.control.STEPS`) -> its DAG form."""
