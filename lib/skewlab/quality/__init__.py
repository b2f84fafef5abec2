"""Data quality of a skewlab run, checked with Great Expectations (1.x), with Data Docs.

:func:`check_run` runs every suite on a finished run's Delta tables (and its events) and
returns a :class:`QualityReport`; with a data dir the results are rendered as GX Data Docs.
An adapter package (pandas, GX); nothing in the domain library imports it. Usage and what
each suite checks: docs/quality.md.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.quality.events import (
    EVENTS_LIMIT,
    EventsUnavailable,
    RunEvents,
    events_frame,
    read_events,
    run_events,
)
from skewlab.quality.report import (
    DATA_DOCS,
    MAX_ROWS,
    REPORT_JSON,
    REPORT_MD,
    Checked,
    Failure,
    QualityError,
    QualityReport,
    SuiteResult,
    log_quality,
)
from skewlab.quality.run_page import write_run_page
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
    from skewlab.io.delta.store import DeltaStore
    from skewlab.quality.suites import Runner

__all__ = [
    "DATA_DOCS",
    "EVENTS_COLUMNS",
    "EVENTS_LIMIT",
    "MAX_ROWS",
    "REPORT_JSON",
    "REPORT_MD",
    "Checked",
    "EventsUnavailable",
    "Failure",
    "QualityError",
    "QualityReport",
    "RunEvents",
    "SuiteResult",
    "check_run",
    "counts_frame",
    "events_frame",
    "log_quality",
    "read_events",
    "run_events",
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


def validate_events(
    frame: pd.DataFrame, expected_rows: int | None = None, runner: Runner | None = None
) -> SuiteResult:
    """The ``events`` suite on a frame of decoded events (:data:`EVENTS_COLUMNS`)."""
    return run_suite("events", events_checks(frame, expected_rows), runner)


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
    """The ``quarantine`` suite on ``frame`` (:func:`quarantine_checks`), in memory."""
    return run_suite("quarantine", quarantine_checks(frame))


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


def data_dir_of(store: DeltaStore, home: str | Path | None = None) -> Path | None:
    """The data dir of a run's tables: ``home``, else the parent of a local ``<home>/delta``
    store root, else ``$SKEWLAB_HOME`` if set; None if none of them applies."""
    if home is not None:
        return Path(home).resolve()
    root = str(store.root)
    if "://" not in root and Path(root).name == "delta":
        return Path(root).parent
    home = env_settings().home
    if home:
        return Path(home).expanduser().resolve()
    return None


@contextlib.contextmanager
def _runner(home: Path | None, run_id: str) -> Iterator[tuple[Runner | None, Path | None]]:
    if home is None:
        yield None, None
        return
    from skewlab.quality.context import Project

    with Project.open(home, run_id) as project:
        yield project, project.index


def check_run(
    store: DeltaStore,
    run_id: str,
    events_counts: Mapping[tuple[float, str], tuple[int, int]] | pd.DataFrame | None = None,
    *,
    events: pd.DataFrame | None = None,
    window_s: float | None = None,
    home: str | Path | None = None,
    events_limit: int | None = EVENTS_LIMIT,
) -> QualityReport:
    """Run every data-quality suite on run ``run_id`` of ``store``; never raises on bad data.

    Args:
        store: the Delta tables of the run.
        run_id: the skewlab run id (the tables' ``run_id``).
        events_counts: the input count to check exactness against: the
            ``(window_start ms, key) -> (count, bytes)`` mapping of
            :func:`skewlab.live.report.aggregate.plain_count` (compared per window and
            key), or a frame with ``key``, ``count`` and optionally
            ``window_start``. Without it (and without ``events``) exactness is
            listed as skipped.
        events: decoded input events (:func:`events_frame`) for the ``events``
            suite; also the input count (per key) when ``events_counts`` is None.
            None: read back from the run's topic (:func:`run_events`).
        window_s: the run's window in seconds: the step of the window
            completeness checks when there is neither input counts per window
            nor any ``results`` row to take the windows from (inferred if None).
        home: the data dir (see :func:`data_dir_of`): where the run's handle and
            the GX project live. Without one, GX runs in memory (no Data Docs)
            and the events topic is not looked up.
        events_limit: most records read back from the events topic (None: all).

    Returns the :class:`QualityReport`; ``report.ok`` is the verdict.
    """
    if window_s is not None and not window_s > 0:
        raise ConfigError(f"window_s must be > 0 seconds, got {window_s!r}")
    window_ms = round(window_s * 1000) if window_s is not None else None
    frames: dict[str, pd.DataFrame] = {}
    for table in TABLES:
        frame: Any = store.read(table, run_id=run_id).to_pandas()
        frames[table] = frame.drop(columns=["run_id"], errors="ignore")
    data_dir = data_dir_of(store, home)
    skipped: dict[str, str] = {}
    read: RunEvents | None = None
    if events is None and data_dir is None:
        skipped["events"] = "no data dir, so no run handle naming the events topic"
    elif events is None:
        assert data_dir is not None
        try:
            read = run_events(data_dir, run_id, events_limit)
            events = read.frame
        except EventsUnavailable as exc:
            skipped["events"] = str(exc)
    if data_dir is None:
        skipped["data_docs"] = "no data dir (pass home=): validated in memory"
    # A sample of the topic is no input count: exactness against it would fail every key.
    counted = events if read is None or read.full else None
    expected = _expected(events_counts, counted)
    windows = _reference_windows(expected, frames["results"])
    with _runner(data_dir, run_id) as (runner, index):
        results = []
        if events is not None:
            note = read.note() if read is not None else f"{len(events):,} events given"
            checks = (
                events_checks(events, read.expected_rows, read.foreign_rows)
                if read is not None
                else events_checks(events)
            )
            results.append(run_suite("events", checks, runner, note))
        results += [
            run_suite("quarantine", quarantine_checks(frames["quarantine"]), runner),
            run_suite(
                "key_loads",
                key_loads_checks(frames["key_loads"], window_ms, windows=windows),
                runner,
            ),
            run_suite(
                "partition_loads",
                partition_loads_checks(frames["partition_loads"], window_ms, windows=windows),
                runner,
            ),
            run_suite("results", results_checks(frames["results"], expected), runner),
        ]
    if expected is None:
        skipped["results.totals"] = "no input counts given (events_counts, or all events)"
    report = QualityReport(run_id=run_id, suites=tuple(results), skipped=skipped, data_docs=index)
    log.info("%s", report.summary())
    page = write_run_page(report)
    if page is not None:
        log.info("data docs of %s: %s", run_id, page.as_uri())
    return report
