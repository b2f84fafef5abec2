"""What every control step shares: the interval, the result record, the registry entry.

A *control step* is one decision of one control loop (rebalance, autoscale,
scale-out) over one **data interval** ``[start_ms, end_ms)`` of event time:
read the loop's input tables for the interval, run the configured policy
through the same library function the in-process loop uses, write the
outputs. Every write is a Delta app transaction ``(app_id, version)`` with
``app_id = "<step>:<run>"`` and, by default, ``version = end_ms``: a step run
again for the same interval (an Airflow retry, a cleared task) writes nothing
twice, and an interval at or before the last one decided is not decided again
(control decisions only move forward in time).

A step function has the signature of :class:`StepFunction`; it returns a
:class:`StepResult` whose :class:`StepStatus` says what happened.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from skewlab.errors import ConfigError

if TYPE_CHECKING:
    from skewlab.pipeline.store import Store

__all__ = ["ControlStep", "StepCall", "StepFunction", "StepResult", "StepStatus", "check_interval"]


class StepStatus(enum.Enum):
    """What one call of a step function did."""

    DECIDED = "decided"
    """The policy ran on the interval's load; its outputs are written."""
    ALREADY_DONE = "already-done"
    """This interval (or a later one) was decided before: nothing read, nothing written."""
    NO_LOAD = "no-load"
    """The interval has no rows in the input table: no decision, nothing written."""


def check_interval(start_ms: object, end_ms: object) -> tuple[int, int]:
    """``(start_ms, end_ms)`` as ints if ``0 <= start_ms < end_ms``, else a one-line ConfigError."""
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (start_ms, end_ms))
    if not ok or not 0 <= start_ms < end_ms:  # type: ignore[operator]
        raise ConfigError(
            f"data interval must be integer ms with 0 <= start < end, got [{start_ms!r}, "
            f"{end_ms!r})"
        )
    return int(start_ms), int(end_ms)  # type: ignore[call-overload]


def _json_number(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


@dataclass(frozen=True)
class StepResult:
    """The outcome of one step over one interval.

    ``written`` names the tables this call committed to (empty on a replay);
    ``numbers`` holds the decision's scalars (keys moved, imbalance, consumers,
    Rscore...), ``decision`` the library's decision object (not serialised).
    """

    step: str
    policy: str
    run_id: str
    interval_start_ms: int
    interval_end_ms: int
    version: int
    status: StepStatus
    reason: str
    written: tuple[str, ...] = ()
    numbers: Mapping[str, Any] = field(default_factory=dict)
    decision: Any = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """A strict-JSON dict (for XCom): everything but ``decision``."""
        return {
            "step": self.step,
            "policy": self.policy,
            "run_id": self.run_id,
            "interval_start_ms": self.interval_start_ms,
            "interval_end_ms": self.interval_end_ms,
            "version": self.version,
            "status": self.status.value,
            "reason": self.reason,
            "written": list(self.written),
            **{k: _json_number(v) for k, v in self.numbers.items()},
        }

    def describe(self) -> str:
        """One line for the task log."""
        extra = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                         for k, v in self.numbers.items())  # fmt: skip
        wrote = ",".join(self.written) or "nothing"
        return (
            f"{self.step} {self.policy} run {self.run_id} [{self.interval_start_ms}, "
            f"{self.interval_end_ms}): {self.status.value} ({self.reason}); wrote {wrote}"
            + (f"; {extra}" if extra else "")
        )


class StepFunction(Protocol):
    """``step(store, run_id, policy, params, interval_start_ms, interval_end_ms)``.

    ``params`` are the step's own settings and the policy's parameters (what
    the DAG form's ``params_of`` builds); bad ones raise a one-line
    :class:`~skewlab.errors.ConfigError`.
    """

    def __call__(
        self,
        store: Store,
        run_id: str,
        policy: str,
        params: Mapping[str, Any],
        interval_start_ms: int,
        interval_end_ms: int,
    ) -> StepResult: ...


@dataclass(frozen=True)
class ControlStep:
    """One registered control loop: its policies, its DAG params and its step function.

    * ``name``: the registry key and the Airflow task id (``rebalance``...).
    * ``switch``: the DAG param choosing the policy (``"none"``: the step is off).
    * ``policies``: what ``switch`` accepts besides ``"none"``.
    * ``check(policy, params)``: validates them (one-line ConfigError), no I/O.
    * ``run``: the step function.
    """

    name: str
    switch: str
    policies: tuple[str, ...]
    check: Callable[[str, Mapping[str, Any]], None]
    run: StepFunction
    description: str = ""


@dataclass(frozen=True)
class StepCall:
    """One call of a step over one interval: what every step checks and reports the same way."""

    step: str
    policy: str
    run_id: str
    start: int
    end: int
    version: int

    @classmethod
    def begin(
        cls,
        step: str,
        run_id: str,
        policy: str,
        interval_start_ms: object,
        interval_end_ms: object,
        version: int | None,
    ) -> StepCall:
        """Check the interval; the app-transaction version defaults to its end (ms)."""
        start, end = check_interval(interval_start_ms, interval_end_ms)
        return cls(step, policy, run_id, start, end, end if version is None else int(version))

    def result(self, status: StepStatus, reason: str, **kw: Any) -> StepResult:
        """This call's :class:`StepResult` with ``status`` and ``reason``; ``kw`` fills
        ``written``, ``numbers`` and ``decision``."""
        return StepResult(
            self.step,
            self.policy,
            self.run_id,
            self.start,
            self.end,
            self.version,
            status,
            reason,
            **kw,
        )

    def already_done(self, store: Store, table: str, app: str) -> StepResult | None:
        """``ALREADY_DONE`` if ``app`` committed this version (or a later one) to ``table``."""
        done = store.committed_version(table, app)
        if done is not None and self.version <= done:
            return self.result(StepStatus.ALREADY_DONE, f"decided up to version {done}")
        return None
