"""``skewlab advise``'s core: which strategy a user's own stream needs, from its figures.

Pure Python + numpy. The steps of :func:`advise`:

1. the stream (:class:`Stream`, from :func:`read_trace` or an adapter's sample) is
   replayed as recorded (:class:`StreamWorkload`): its own timestamps, or Poisson
   arrivals at the given rate when it has none;
2. it is characterised (:func:`~skewlab.advise.profile.profile`);
3. every candidate (:func:`~skewlab.advise.candidates.candidates`) is simulated on it;
4. the outcomes are ranked, the Pareto set marked and one recommendation named with
   its reason (:mod:`skewlab.advise.rank`).

The command, its table and ``--verify``: docs/advise.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from skewlab.advise.base import AdviseError, Stream, StreamWorkload, stream_of
from skewlab.advise.candidates import (
    Candidate,
    Outcome,
    SimSettings,
    candidates,
    evaluate,
    rebalance_interval,
    window_of,
)
from skewlab.advise.command import run_args
from skewlab.advise.profile import StreamProfile, profile
from skewlab.advise.rank import LATENCY_SLACK, Ranked, Recommendation, rank, recommend
from skewlab.advise.readers import TRACE_FORMATS, read_trace
from skewlab.errors import ConfigError

__all__ = [
    "LATENCY_SLACK",
    "TRACE_FORMATS",
    "Advice",
    "AdviseError",
    "Candidate",
    "Outcome",
    "Ranked",
    "Recommendation",
    "SimSettings",
    "Stream",
    "StreamProfile",
    "StreamWorkload",
    "advise",
    "candidates",
    "evaluate",
    "read_trace",
    "run_args",
    "stream_of",
]

Progress = Callable[[int, int], None]
"""``progress(events simulated, events to simulate)`` over every candidate."""

DEFAULT_LOAD = 0.8
"""Without timestamps or ``rate``: arrivals at 80 % of the workers' capacity
(``skewlab simulate``'s default)."""


@dataclass(frozen=True)
class Advice:
    """What :func:`advise` found: the stream's profile, the settings every candidate ran
    with, the ranked outcomes and the recommendation."""

    profile: StreamProfile
    settings: SimSettings
    workload: StreamWorkload
    ranked: tuple[Ranked, ...]
    recommendation: Recommendation

    @property
    def best(self) -> Candidate:
        """The recommended candidate."""
        return self.recommendation.choice.outcome.candidate


def replay(
    stream: Stream, workers: int, service_s: float, rate: float | None
) -> tuple[StreamWorkload, str]:
    """Step 1: the replay of ``stream`` and where its rate comes from (``--rate``,
    ``timestamps``, or ``80 % of capacity``)."""
    if rate is not None:
        return StreamWorkload(stream, rate=rate), "--rate"
    if stream.native_rate() is not None:
        return StreamWorkload(stream), "timestamps"
    return StreamWorkload(stream, rate=DEFAULT_LOAD * workers / service_s), "80 % of capacity"


def advise(
    stream: Stream,
    workers: int,
    service_s: float,
    rate: float | None = None,
    *,
    only: Sequence[Candidate] | None = None,
    slack: float = LATENCY_SLACK,
    seed: int = 0,
    progress: Progress | None = None,
) -> Advice:
    """Steps 1-4 of the module doc for ``workers`` workers at ``service_s`` seconds per event.

    ``rate`` (events/s) replaces the stream's own rate (its timestamps are stretched
    to it); ``only`` limits the candidates (default: all of them).
    """
    if not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    if not (math.isfinite(service_s) and service_s > 0):
        raise ConfigError(f"service time must be > 0 s, got {service_s!r}")
    workload, rate_from = replay(stream, workers, service_s, rate)
    times = workload.times()
    span = float(times[-1] - times[0])
    settings = SimSettings(
        workers=workers,
        service_s=service_s,
        window_s=window_of(span),
        interval_s=rebalance_interval(span),
        seed=seed,
        poisson=stream.native_rate() is None,
    )
    prof = profile(stream, workers, workload.arrival_rate, rate_from, service_s, times)
    todo = tuple(only) if only is not None else candidates(workers)
    n = len(stream)
    total = n * len(todo)
    outcomes: list[Outcome] = []
    for i, c in enumerate(todo):
        step = None
        if progress is not None:
            base = i * n

            def step(done: int, _: int, base: int = base) -> None:
                progress(base + done, total)

        outcomes.append(evaluate(c, workload, settings, progress=step))
    ranked = rank(outcomes, service_s, slack, prof.offered_load)
    return Advice(prof, settings, workload, tuple(ranked), recommend(prof, ranked))
