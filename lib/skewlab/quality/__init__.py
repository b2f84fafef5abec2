"""Data quality of a skewlab run, checked with Great Expectations (1.x).

The one call for a finished run::

    report = check_run(store, run_id, events_counts=counts, window_s=settings.window_s)
    log_quality(tracker, mlflow_run_id, report)
    report.raise_for_failures()  # QualityError: one line naming each failed expectation

:func:`check_run` reads the run's Delta tables (``quarantine``, ``key_loads``,
``partition_loads``, ``results``) and runs their suites
(:mod:`skewlab.quality.suites`); given the input counts (``events_counts``, what
:func:`skewlab.live.aggregate.plain_count` returns) it also checks exactness,
and given a frame of decoded input events (:func:`events_frame`,
:func:`read_events`) the ``events`` suite. A suite it cannot run is listed in
``report.skipped`` with the reason.

This is an adapter package: it imports pandas and (on first validation)
Great Expectations; nothing in the domain library imports it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pandas as pd

from skewlab.errors import ConfigError
from skewlab.pipeline import events as wire
from skewlab.quality.report import (
    MAX_ROWS,
    REPORT_JSON,
    REPORT_MD,
    Failure,
    QualityError,
    QualityReport,
    SuiteResult,
    log_quality,
)
from skewlab.quality.suites import (
    EVENTS_COLUMNS,
    counts_frame,
    events_checks,
    key_loads_checks,
    partition_loads_checks,
    quarantine_checks,
    results_checks,
    run_suite,
    window_grid,
)

if TYPE_CHECKING:
    from skewlab.io.delta import DeltaStore
    from skewlab.io.kafka.base import KafkaClient

__all__ = [
    "EVENTS_COLUMNS",
    "MAX_ROWS",
    "REPORT_JSON",
    "REPORT_MD",
    "Failure",
    "QualityError",
    "QualityReport",
    "SuiteResult",
    "check_run",
    "counts_frame",
    "events_frame",
    "log_quality",
    "read_events",
    "validate_events",
    "validate_key_loads",
    "validate_partition_loads",
    "validate_quarantine",
    "validate_results",
    "window_grid",
]

log = logging.getLogger(__name__)

TABLES = ("quarantine", "key_loads", "partition_loads", "results")
"""The Delta tables :func:`check_run` reads, in the order their suites run."""


def validate_events(frame: pd.DataFrame) -> SuiteResult:
    """The ``events`` suite on a frame of decoded events (:data:`EVENTS_COLUMNS`)."""
    return run_suite("events", events_checks(frame))


def validate_key_loads(
    frame: pd.DataFrame,
    window_ms: int | None = None,
    require_rows: bool = True,
    windows: Iterable[int] | None = None,
) -> SuiteResult:
    """The ``key_loads`` suite; ``windows``: the windows it must have (see ``window_grid``)."""
    return run_suite("key_loads", key_loads_checks(frame, window_ms, require_rows, windows))


def validate_partition_loads(
    frame: pd.DataFrame,
    window_ms: int | None = None,
    require_rows: bool = True,
    windows: Iterable[int] | None = None,
) -> SuiteResult:
    """The ``partition_loads`` suite; ``windows``: the windows it must have."""
    checks = partition_loads_checks(frame, window_ms, require_rows, windows)
    return run_suite("partition_loads", checks)


def validate_results(
    frame: pd.DataFrame, expected: pd.DataFrame | None = None, require_rows: bool = True
) -> SuiteResult:
    """The ``results`` suite; exactness against ``expected`` (key, count[, window_start])."""
    return run_suite("results", results_checks(frame, expected, require_rows))


def validate_quarantine(frame: pd.DataFrame) -> SuiteResult:
    """The ``quarantine`` suite."""
    return run_suite("quarantine", quarantine_checks(frame))


def events_frame(records: Iterable[tuple[int, int, bytes | None]]) -> pd.DataFrame:
    """Decoded input events from ``(partition, offset, value)`` records.

    Records the route job would quarantine are left out (the ``quarantine``
    suite covers them); the rest become rows of :data:`EVENTS_COLUMNS`.
    """
    parts: list[int] = []
    offsets: list[int] = []
    values: list[bytes | None] = []
    for partition, offset, value in records:
        parts.append(int(partition))
        offsets.append(int(offset))
        values.append(value)
    dec = wire.decode(values)
    return pd.DataFrame(
        {
            "partition": pd.Series([parts[i] for i in dec.index], dtype="int64"),
            "offset": pd.Series([offsets[i] for i in dec.index], dtype="int64"),
            "key": pd.Series(dec.keys, dtype="object"),
            "ts": pd.Series(dec.ts, dtype="float64"),
            "seq": pd.Series(dec.seq, dtype="int64"),
        }
    )


def read_events(client: KafkaClient, topic: str) -> pd.DataFrame:
    """Every record of ``topic`` (all partitions, begin to end) as :func:`events_frame`."""
    begins = client.begin_offsets(topic)
    records: list[tuple[int, int, bytes | None]] = []
    for p, end in sorted(client.end_offsets(topic).items()):
        records.extend(
            (p, r.offset, r.value) for r in client.fetch(topic, p, begins.get(p, 0), end)
        )
    return events_frame(records)


def _expected(
    events_counts: Mapping[tuple[float, str], tuple[int, int]] | pd.DataFrame | None,
    events: pd.DataFrame | None,
) -> pd.DataFrame | None:
    if isinstance(events_counts, pd.DataFrame):
        return events_counts
    if events_counts is not None:
        return counts_frame(events_counts)
    if events is not None and "key" in events.columns:
        counts = events.groupby("key").size()
        return pd.DataFrame({"key": counts.index.astype(object), "count": counts.to_numpy()})
    return None


def _reference_windows(expected: pd.DataFrame | None, results: pd.DataFrame) -> list[int] | None:
    """The windows the load tables must have: the input's, else the merged results'.

    A window with no input at all (a producer stalled for longer than a
    window) is no loss, so the load tables are held to the windows that had
    events rather than to every window between the first and the last.
    """
    for frame in (expected, results):
        if frame is not None and "window_start" in frame.columns and len(frame):
            return sorted({round(w) for w in pd.to_numeric(frame["window_start"]).tolist()})
    return None


def check_run(
    store: DeltaStore,
    run_id: str,
    events_counts: Mapping[tuple[float, str], tuple[int, int]] | pd.DataFrame | None = None,
    *,
    events: pd.DataFrame | None = None,
    window_s: float | None = None,
) -> QualityReport:
    """Run every data-quality suite on run ``run_id`` of ``store``; never raises on bad data.

    Args:
        store: the Delta tables of the run.
        run_id: the skewlab run id (the tables' ``run_id``).
        events_counts: the input count to check exactness against: the
            ``(window_start ms, key) -> (count, bytes)`` mapping of
            :func:`skewlab.live.aggregate.plain_count` (compared per window and
            key), or a frame with ``key``, ``count`` and optionally
            ``window_start``. Without it (and without ``events``) exactness is
            listed as skipped.
        events: decoded input events (:func:`read_events`) for the ``events``
            suite; also the input count (per key) when ``events_counts`` is None.
        window_s: the run's window in seconds: the step of the window
            completeness checks when there is neither input counts per window
            nor any ``results`` row to take the windows from (inferred if None).

    Returns the :class:`QualityReport`; ``report.ok`` is the verdict.
    """
    if window_s is not None and not window_s > 0:
        raise ConfigError(f"window_s must be > 0 seconds, got {window_s!r}")
    window_ms = round(window_s * 1000) if window_s is not None else None
    frames: dict[str, pd.DataFrame] = {}
    for table in TABLES:
        frame: Any = store.read(table, run_id=run_id).to_pandas()
        frames[table] = frame.drop(columns=["run_id"], errors="ignore")
    expected = _expected(events_counts, events)
    windows = _reference_windows(expected, frames["results"])
    skipped: dict[str, str] = {}
    results = [
        validate_quarantine(frames["quarantine"]),
        validate_key_loads(frames["key_loads"], window_ms, windows=windows),
        validate_partition_loads(frames["partition_loads"], window_ms, windows=windows),
        validate_results(frames["results"], expected),
    ]
    if expected is None:
        skipped["results.totals"] = "no input counts given (events_counts or events)"
    if events is not None:
        results.insert(0, validate_events(events))
    else:
        skipped["events"] = "no events frame given"
    report = QualityReport(run_id=run_id, suites=tuple(results), skipped=skipped)
    log.info("%s", report.summary())
    return report
