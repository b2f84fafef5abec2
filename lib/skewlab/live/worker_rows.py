"""The rows a worker's flush writes to Delta (:meth:`skewlab.live.worker.Worker.flush`)."""

from __future__ import annotations

from collections.abc import Iterable

from skewlab.pipeline.handoff import Handoff
from skewlab.pipeline.worker import Partial, WindowLatency


def ms(seconds: float) -> int:
    """Seconds -> the int64 milliseconds Delta tables use for points in time."""
    return round(seconds * 1000)


def partial_rows(partials: Iterable[Partial], worker: int) -> list[dict[str, object]]:
    """``partials`` rows: one per (window, key) increment of ``worker``."""
    return [
        {
            "window_start": ms(p.window_start),
            "key": p.key,
            "worker": worker,
            "count": p.count,
            "sum": float(p.sum),
        }
        for p in partials
    ]


def latency_rows(windows: Iterable[WindowLatency], worker: int) -> list[dict[str, object]]:
    """``latency`` rows: one per window of ``worker`` (ms; its reservoir as float32 bytes)."""
    return [
        {
            "window_start": ms(r.window_start),
            "worker": worker,
            "p50": r.p50 * 1e3,
            "p90": r.p90 * 1e3,
            "p99": r.p99 * 1e3,
            "max": r.max * 1e3,
            "n": r.n,
            "sample_ms": (r.sample * 1e3).astype("<f4").tobytes(),
        }
        for r in windows
    ]


def handoff_row(
    h: Handoff,
    shadow: tuple[int, int, int, int] | None,
    applied: tuple[int, int] | None,
) -> dict[str, object]:
    """A ``handoffs`` row: a received hand-off (``applied``: its (sent, applied) wall ms,
    if known), or a set taken from a shadow (``shadow``: (sent, applied, restored state
    bytes, records replayed into it); then ``tuples`` = records replayed, ``bytes`` = its
    restored state, 0 if new)."""
    sent: int | None = None
    at: int | None = None
    if shadow is not None:
        sent, at, nbytes, tuples = shadow
    else:
        if applied is not None:
            sent, at = applied
        nbytes, tuples = len(h.value()), h.tuples
    return {
        "key": h.key,
        "set_id": h.set_id,
        "from_worker": h.src,
        "to_worker": h.dst,
        "value": h.value(),
        "tuples": tuples,
        "bytes": nbytes,
        "sent_ms": sent,
        "applied_ms": at,
    }
