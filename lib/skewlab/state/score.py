"""Bottleneck score 0..100 per operator instance and the three thresholds with hysteresis.

The seed scores each node 0..100 with a fuzzy-logic detector and compares the score with
``scale_in (delta_1) < alarming (delta'_2) < scale_out (delta_2)``; we use a weighted sum of
four saturating terms instead, monotone in load::

    S = 100 * (w_rho * min(rho, 1) + w_q * w / (w + queue_ref_s)
               + w_busy * min(busy, 1) + w_lat * min(latency_s / latency_ref_s, 1))

with ``rho = input_rate / service_rate`` and ``w = queue_len / service_rate``. Why these
defaults (0.4 / 0.3 / 0.15 / 0.15, thresholds 25 / 45 / 70): docs/state.md, "Bottleneck score".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from skewlab.errors import ConfigError, StateError

__all__ = [
    "Level",
    "ScoreConfig",
    "Signals",
    "ThresholdConfig",
    "ThresholdDetector",
    "bottleneck_score",
]


@dataclass(frozen=True, slots=True)
class Signals:
    """Runtime signals of one instance over one measurement interval."""

    input_rate: float
    """Tuples per second offered to the instance."""
    service_rate: float
    """Tuples per second the instance can process (its capacity)."""
    queue_len: float = 0.0
    """Tuples waiting (buffer length or consumer lag)."""
    busy: float = 0.0
    """Fraction of the interval spent processing, 0..1."""
    latency_s: float = 0.0
    """Recent end-to-end latency of the instance's tuples, seconds."""


@dataclass(frozen=True)
class ScoreConfig:
    """Weights and reference scales of :func:`bottleneck_score` (docs/state.md for the defaults).

    Raises :class:`ConfigError` unless the weights are >= 0 and sum to 1 and both reference
    scales are > 0.
    """

    w_rho: float = 0.4
    w_queue: float = 0.3
    w_busy: float = 0.15
    w_latency: float = 0.15
    queue_ref_s: float = 1.0
    latency_ref_s: float = 2.0

    def __post_init__(self) -> None:
        weights = (self.w_rho, self.w_queue, self.w_busy, self.w_latency)
        if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
            raise ConfigError(f"score weights must be >= 0 and sum to 1, got {weights}")
        if not (self.queue_ref_s > 0 and self.latency_ref_s > 0):
            raise ConfigError("queue_ref_s and latency_ref_s must be > 0")


def bottleneck_score(s: Signals, cfg: ScoreConfig | None = None) -> float:
    """The score ``S`` of the module doc, in [0, 100]; non-decreasing in every signal.

    Negative signals count as 0; raises :class:`ConfigError` if ``service_rate <= 0``.
    """
    cfg = cfg or ScoreConfig()
    if not s.service_rate > 0:
        raise ConfigError(f"service_rate must be > 0, got {s.service_rate!r}")
    rho = max(s.input_rate, 0.0) / s.service_rate
    work_s = max(s.queue_len, 0.0) / s.service_rate
    score = (
        cfg.w_rho * min(rho, 1.0)
        + cfg.w_queue * work_s / (work_s + cfg.queue_ref_s)
        + cfg.w_busy * min(max(s.busy, 0.0), 1.0)
        + cfg.w_latency * min(max(s.latency_s, 0.0) / cfg.latency_ref_s, 1.0)
    )
    return 100.0 * score


class Level(enum.IntEnum):
    """Where an operator's score stands; ordered, so ``level >= ALARMING`` reads naturally."""

    SCALE_IN = 0
    NORMAL = 1
    ALARMING = 2
    SCALE_OUT = 3


@dataclass(frozen=True)
class ThresholdConfig:
    """``scale_in <= alarming < scale_out`` on the 0..100 score, with hysteresis and dwell.

    A threshold fires exactly at its value; going back needs a margin of
    ``hysteresis`` points (leave SCALE_OUT below ``scale_out - h``, leave
    ALARMING below ``alarming - h``, leave SCALE_IN at ``scale_in + h``). A new
    level is taken only after ``dwell`` consecutive observations agree on it.
    ``scale_in = 0`` disables scale-in; ``alarming = 0`` alarms always (seed
    Fig. 12's left end).
    """

    scale_in: float = 25.0
    alarming: float = 45.0
    scale_out: float = 70.0
    hysteresis: float = 5.0
    dwell: int = 2

    def __post_init__(self) -> None:
        if not 0 <= self.scale_in <= self.alarming < self.scale_out <= 100:
            raise ConfigError(
                "thresholds must satisfy 0 <= scale_in <= alarming < scale_out <= 100, got "
                f"{self.scale_in} / {self.alarming} / {self.scale_out}"
            )
        if self.hysteresis < 0 or self.hysteresis >= self.scale_out - self.alarming:
            raise ConfigError(
                f"hysteresis must be in [0, scale_out - alarming), got {self.hysteresis}"
            )
        if isinstance(self.dwell, bool) or not isinstance(self.dwell, int) or self.dwell < 1:
            raise ConfigError(f"dwell must be an int >= 1, got {self.dwell!r}")

    def build(self, state: tuple[int, int, int] | None = None) -> ThresholdDetector:
        """A detector at NORMAL, or resumed from ``state`` (a ``ThresholdDetector.snapshot()``)."""
        return ThresholdDetector(self, state)


class ThresholdDetector:
    """Turns a score series into a :class:`Level` series without flapping (Schmitt trigger).

    Boundary ``i`` separates level ``i - 1`` from level ``i``; it counts as
    passed when the score is at or above its *enter* value (from below) or
    its *release* value (from at or above); the candidate level is the
    highest passed boundary. The candidate replaces the level after ``dwell``
    consecutive equal candidates.
    """

    def __init__(self, cfg: ThresholdConfig, state: tuple[int, int, int] | None = None) -> None:
        self.cfg = cfg
        h = cfg.hysteresis
        # (enter from below, release from above) per boundary 1..3
        self._bounds = (
            (cfg.scale_in + h, cfg.scale_in),
            (cfg.alarming, cfg.alarming - h),
            (cfg.scale_out, cfg.scale_out - h),
        )
        if state is None:
            self.level, self._candidate, self._streak = Level.NORMAL, int(Level.NORMAL), 0
        else:
            if len(state) != 3 or state[0] not in range(4):
                raise StateError(f"bad ThresholdDetector snapshot {state!r}")
            self.level, self._candidate, self._streak = Level(state[0]), state[1], state[2]

    def candidate(self, score: float) -> Level:
        """The level ``score`` points to from the current level (before dwell)."""
        top = 0
        for i, (enter, release) in enumerate(self._bounds, start=1):
            if score >= (release if self.level >= i else enter):
                top = i
        if self.cfg.scale_in == 0 and top == 0:
            top = 1
        return Level(top)

    def observe(self, score: float) -> Level:
        """Feed one score; returns the (possibly unchanged) level."""
        cand = self.candidate(score)
        if cand == self.level:
            self._streak = 0
        elif int(cand) == self._candidate and self._streak > 0:
            self._streak += 1
        else:
            self._candidate, self._streak = int(cand), 1
        if self._streak >= self.cfg.dwell:
            self.level, self._streak = cand, 0
        return self.level

    def snapshot(self) -> tuple[int, int, int]:
        """``(level, candidate, streak)``: all a restarted detector needs (see ``build``)."""
        return (int(self.level), self._candidate, self._streak)
