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

    def now(self) -> float:
        """Current time in seconds; successive calls never decrease."""
        ...


class SystemClock:
    """Monotonic seconds of this process (the production clock)."""

    def now(self) -> float:
        """``time.monotonic()``: only differences are meaningful."""
        return time.monotonic()


class EpochClock:
    """Seconds since the Unix epoch: the time base of event ``ts``, ``effective_ms`` and
    of Airflow's data intervals (the control loops stamp their decisions with it)."""

    def now(self) -> float:
        """``time.time()``: seconds since 1970-01-01 UTC."""
        return time.time()


class ManualClock:
    """A clock that only moves when told to (simulated time, tests).

    Invariant: time never goes backwards; ``set`` to an earlier time raises.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = float(start)

    def now(self) -> float:
        """The time last set or advanced to (``start`` initially)."""
        return self._now

    def set(self, t: float) -> None:
        """Move to time ``t``; raises ``ValueError`` if ``t`` is earlier than now."""
        if t < self._now:
            raise ValueError(f"clock cannot go back from {self._now} to {t}")
        self._now = float(t)

    def advance(self, seconds: float) -> float:
        """Move ``seconds`` (>= 0, else ``ValueError``) forward; returns the new time."""
        if seconds < 0:
            raise ValueError(f"cannot advance by a negative amount ({seconds})")
        self._now += seconds
        return self._now
