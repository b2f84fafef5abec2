"""Shared helpers of the benchmarks: timing and the printed figure format.

Every benchmark prints absolute numbers and a ratio against a baseline measured
in the same run, because these machines are noisy.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any


def keep_flag(ap: argparse.ArgumentParser) -> None:
    """``--keep``: leave the bench's data dir in place (it is removed otherwise)."""
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the data dir (broker log, tables, run dirs) for inspection; removed otherwise",
    )


def scratch_dir(prefix: str) -> str:
    """A new data dir for one bench run (see :func:`drop_scratch`)."""
    return tempfile.mkdtemp(prefix=prefix)


def drop_scratch(path: str, keep: bool) -> None:
    """Remove a bench's data dir (a bench run writes 0.3-0.4 GB there), or say where it is."""
    if keep:
        say(f"data dir kept: {path}")
    else:
        shutil.rmtree(path, ignore_errors=True)


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


def slices(sent_s: Any, lat_ms: Any, over_ms: float, width_s: float = 1.0) -> list[list[float]]:
    """Latency per ``width_s`` slice of send time: one ``[start s since the first send,
    events, p50 ms, p99 ms, max ms, events over over_ms]`` per slice holding events,
    oldest first (``over_ms`` the whole run's p99: where its slowest 1 % were sent)."""
    import numpy as np

    sent, ms = np.asarray(sent_s, dtype=np.float64), np.asarray(lat_ms, dtype=np.float64)
    if not sent.size:
        return []
    idx = np.floor((sent - sent.min()) / width_s).astype(np.int64)
    out = []
    for i in np.unique(idx):
        m = ms[idx == i]
        p50, p99 = np.percentile(m, [50, 99])
        top, over = float(m.max()), int((m > over_ms).sum())
        out.append([float(i * width_s), int(m.size), float(p50), float(p99), top, over])
    return out


def slice_lines(got: list[list[float]]) -> list[str]:
    """:func:`slices` as a table."""
    widths = (10, 9, 9, 9, 9, 12)
    head = ("sent at s", "events", "p50 ms", "p99 ms", "max ms", "over run p99")
    lines = [row(*head, widths=widths)]
    for start, n, p50, p99, top, over in got:
        cells = (f"{start:.0f}", f"{n:,.0f}", f"{p50:,.0f}", f"{p99:,.0f}", f"{top:,.0f}")
        lines.append(row(*cells, f"{over:,.0f}", widths=widths))
    return lines
