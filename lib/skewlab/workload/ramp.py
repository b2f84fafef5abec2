"""A load ramp: the input rate multiplies by a factor every interval (seed Fig. 9).

:func:`parse_ramp` reads ``--load-ramp`` (``FACTORx/INTERVALs``, e.g. ``2x/500s``);
:func:`ramp_events` counts the events of a ramped run. The producer paces its sends
by the same steps (:meth:`skewlab.live.driver.producer.ProduceSettings.due`).
"""

from __future__ import annotations

from skewlab.errors import ConfigError

__all__ = ["parse_ramp", "ramp_events"]


def parse_ramp(text: str) -> tuple[float, float]:
    """``"2x/500s"`` -> (factor 2.0, interval 500.0 s)."""
    try:
        f, _, i = text.lower().partition("x/")
        factor, interval = float(f), float(i.rstrip("s"))
    except ValueError:
        factor = interval = float("nan")
    if not (factor >= 1 and interval > 0):
        raise ConfigError(
            f"load ramp must look like 2x/500s (factor >= 1, interval > 0), got {text!r}"
        )
    return factor, interval


def ramp_events(rate: float, duration_s: float, factor: float, interval_s: float) -> int:
    """Events of a run of ``duration_s`` whose rate starts at ``rate`` and ramps by ``factor``."""
    n, t = 0.0, 0.0
    while t < duration_s:
        dt = min(interval_s, duration_s - t)
        n += rate * dt
        t += dt
        rate *= factor
    return max(1, round(n))
