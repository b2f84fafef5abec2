"""Shared helpers of the benchmarks: timing and the printed figure format.

Every benchmark prints absolute numbers and a ratio against a baseline measured
in the same run, because these machines are noisy.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Callable


def timed(fn: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MiB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def row(*cells: object, widths: tuple[int, ...] = (14, 16, 12, 30)) -> str:
    out = []
    for c, w in zip(cells, widths + (20,) * len(cells)):
        out.append(f"{c!s:<{w}}")
    return " ".join(out).rstrip()


def say(line: str) -> None:
    print(line, flush=True)
    sys.stdout.flush()


def raw_consume(bootstrap: str, topic: str) -> tuple[int, float]:
    """Records of ``topic`` and the seconds one default client took to read them all,
    as columns (``fetch_range``: how the route job's source and the workers read): the
    raw consume baseline of the live benches. One ``Record`` object per message (the
    client's ``fetch``) is 2-2.5x slower and understated it (session 12)."""
    from skewlab.io.kafka import KafkaSettings, connect, fetch_range

    c = connect(KafkaSettings(bootstrap))
    try:
        ends = c.end_offsets(topic)
        t0 = time.perf_counter()
        n = sum(len(fetch_range(c, topic, p, 0, end)) for p, end in ends.items())
        return n, time.perf_counter() - t0
    finally:
        c.close()
