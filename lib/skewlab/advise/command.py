"""The ``skewlab run`` command line that runs a candidate live on the user's stream."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from skewlab.advise.candidates import Candidate

__all__ = ["run_args", "run_command"]


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return f"{v:g}" if isinstance(v, float) else str(v)


def run_args(
    candidate: Candidate,
    *,
    workers: int,
    workload: str,
    events: int,
    rate: float,
    service_us: float,
    window_s: float,
    interval_s: float,
    extra_params: Mapping[str, Any] | None = None,
) -> list[str]:
    """The arguments of ``skewlab run`` (after ``run``) for ``candidate`` on ``workload``
    (a ``trace:`` spec): the strategy and its params, the rebalance policy, its params and
    interval, and the run's size, rate, service time and window."""
    args = ["--strategy", candidate.grouping]
    for k, v in {**candidate.params, **(extra_params or {})}.items():
        args += ["--strategy-param", f"{k}={_value(v)}"]
    if candidate.rebalance is not None:
        args += ["--rebalance", candidate.rebalance]
        for k, v in candidate.rebalance_params.items():
            args += ["--rebalance-param", f"{k}={_value(v)}"]
        args += ["--rebalance-interval", _value(float(interval_s))]
    args += [
        "--workers", str(workers),
        "--workload", workload,
        "--events", str(events),
        "--rate", _value(float(rate)),
        "--service-us", _value(float(service_us)),
        "--window", _value(float(window_s)),
    ]  # fmt: skip
    return args


def run_command(args: list[str]) -> str:
    """``skewlab run ARGS`` quoted for a shell."""
    return "skewlab run " + " ".join(shlex.quote(a) for a in args)
