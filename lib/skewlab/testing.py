"""Helpers shipped with the library for tests of skewlab and of code built on it."""

from __future__ import annotations

from skewlab.clock import ManualClock


class FakeClock(ManualClock):
    """A :class:`~skewlab.clock.ManualClock` under the name tests expect."""


__all__ = ["FakeClock"]
