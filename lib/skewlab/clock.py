"""Injected time (STYLE.md rule 5).

Library code never reads the wall clock itself: it takes a :class:`Clock`. This
module holds the only real clocks (:class:`SystemClock`, monotonic, and
:class:`EpochClock`, wall time); :mod:`skewlab.testing` holds the fake one and
the simulator drives a :class:`ManualClock` with simulated time.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Anything with ``now()`` returning seconds as a float, never decreasing."""

    def now(self) -> float: ...


class SystemClock:
    """Monotonic seconds of this process (the production clock)."""

    def now(self) -> float:
        return time.monotonic()


class EpochClock:
    """Seconds since the Unix epoch: the time base of event ``ts``, ``effective_ms`` and
    of Airflow's data intervals (the control loops stamp their decisions with it)."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that only moves when told to (simulated time, tests).

    Invariant: time never goes backwards; ``set`` to an earlier time raises.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        return self._now

    def set(self, t: float) -> None:
        if t < self._now:
            raise ValueError(f"clock cannot go back from {self._now} to {t}")
        self._now = float(t)

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative amount ({seconds})")
        self._now += seconds
        return self._now
