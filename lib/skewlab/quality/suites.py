"""Great Expectations (1.x) suites for the data of a skewlab run.

Each suite (``events``, ``key_loads``, ``partition_loads``, ``results``, ``quarantine``) is a
list of :class:`FrameCheck`: a pandas frame, the expectations on it and the columns that
identify an offending row; checks GX has no expectation for (windows complete, exactness)
become derived frames. :func:`run_suite` validates them with a runner of
:mod:`skewlab.quality.context`. What each suite checks: docs/quality.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from itertools import pairwise
from typing import Any, Protocol

import pandas as pd

from skewlab.errors import ConfigError
from skewlab.io.delta.schemas import KEY_LOADS, PARTITION_LOADS, QUARANTINE, RESULTS
from skewlab.pipeline.events import REASONS
from skewlab.quality.report import MAX_ROWS, Checked, Failure, SuiteResult

log = logging.getLogger(__name__)

EVENTS_COLUMNS = ("partition", "offset", "key", "ts", "seq")
"""Columns of a frame of decoded input events (``ts`` in seconds, as produced)."""

MAX_WINDOWS = 1_000_000
"""Largest window grid a completeness check builds (a wrong window size would be huge)."""

_NUMERIC = ["int8", "int16", "int32", "int64", "uint32", "uint64", "float32", "float64"]
_NUMERIC += ["Int64", "Float64", "int64[pyarrow]", "double[pyarrow]"]


@dataclass(frozen=True, slots=True)
class Expect:
    """One expectation, before GE builds it: the GE class name, its kwargs, what it checks.

    ``check`` (the expectation's GE ``description``) must be unique within a
    :class:`FrameCheck`: it is how a result is matched back to its expectation.
    """

    kind: str
    check: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def columns(self) -> set[str]:
        """The columns this expectation reads (empty for table-level ones)."""
        cols = {self.kwargs[k] for k in ("column", "column_A", "column_B") if k in self.kwargs}
        cols.update(self.kwargs.get("column_list", ()))
        return {str(c) for c in cols}


@dataclass(frozen=True)
class FrameCheck:
    """One GE batch: a named frame, the expectations on it, the columns naming a row.

    Expectations on columns the frame lacks are not run (the suite's schema
    expectation reports the missing column once instead).
    """

    name: str
    frame: pd.DataFrame
    expects: tuple[Expect, ...]
    index: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        checks = [e.check for e in self.expects]
        if len(set(checks)) != len(checks):
            raise ConfigError(f"frame check {self.name!r}: expectation descriptions must differ")


class Runner(Protocol):
    """Where GX validates a frame: its validation result and Data Docs page (or None)."""

    def validate(
        self, check: FrameCheck, expects: Sequence[Expect], max_rows: int
    ) -> tuple[Any, Any]:
        """Validate ``check.frame`` against ``expects`` (quoting up to ``max_rows`` offending
        rows each); GX's suite validation result and the Data Docs page, or None."""
        ...


# ---------------------------------------------------------------------------- building blocks


def _schema(columns: Iterable[str]) -> Expect:
    cols = list(columns)
    return Expect(
        "ExpectTableColumnsToMatchSet",
        "has columns " + ", ".join(cols),
        {"column_set": cols, "exact_match": False},
    )


def _non_negative(*columns: str) -> list[Expect]:
    return [
        Expect("ExpectColumnValuesToBeBetween", f"{c} >= 0", {"column": c, "min_value": 0})
        for c in columns
    ]


def _present(*columns: str) -> list[Expect]:
    return [
        Expect("ExpectColumnValuesToNotBeNull", f"{c} is present", {"column": c}) for c in columns
    ]


def _has_rows(table: str) -> Expect:
    return Expect("ExpectTableRowCountToBeBetween", f"the run has {table} rows", {"min_value": 1})


def _columns(spec_names: Sequence[str]) -> list[str]:
    return [c for c in spec_names if c != "run_id"]


def _check_window(window_ms: int | None) -> None:
    if window_ms is not None and (
        isinstance(window_ms, bool) or not isinstance(window_ms, int) or window_ms < 1
    ):
        raise ConfigError(f"window_ms must be an integer >= 1 (milliseconds), got {window_ms!r}")


def window_grid(
    starts: pd.Series, window_ms: int | None = None, expected: Iterable[int] | None = None
) -> pd.DataFrame:
    """One row per window the table should have: ``window_start``, ``rows`` (0 = missing).

    ``rows`` counts the entries of ``starts`` in each window. The windows the
    table should have are ``expected`` when given (the windows of the input, or
    of another table); else every window between the first and the last start,
    stepping by ``window_ms``, else by the greatest common divisor of the gaps
    between the distinct starts (which finds a hole unless every gap is a
    multiple of the hole's size). Starts off that set are kept as their own rows.
    """
    _check_window(window_ms)
    counts = pd.to_numeric(starts.dropna()).astype("int64").value_counts()
    present = sorted(int(w) for w in counts.index)
    grid = set(present)
    if expected is not None:
        grid.update(int(w) for w in expected)
    elif len(present) > 1:
        gaps = [b - a for a, b in pairwise(present)]
        step = window_ms or reduce(math.gcd, gaps)
        if (present[-1] - present[0]) // step > MAX_WINDOWS:
            raise ConfigError(
                f"window grid of {(present[-1] - present[0]) // step} windows of {step} ms "
                f"exceeds {MAX_WINDOWS}; pass the run's window size"
            )
        grid.update(range(present[0], present[-1] + 1, step))
    windows = sorted(grid)
    return pd.DataFrame(
        {
            "window_start": pd.Series(windows, dtype="int64"),
            "rows": pd.Series([int(counts.get(w, 0)) for w in windows], dtype="int64"),
        }
    )


def _windows_check(
    table: str, frame: pd.DataFrame, window_ms: int | None, expected: Iterable[int] | None
) -> FrameCheck | None:
    if "window_start" not in frame.columns:
        return None
    what = "between the first and the last" if expected is None else "of the reference"
    return FrameCheck(
        f"{table}.windows",
        window_grid(frame["window_start"], window_ms, expected),
        (
            Expect(
                "ExpectColumnValuesToBeBetween",
                f"every window {what} has rows",
                {"column": "rows", "min_value": 1},
            ),
        ),
        ("window_start",),
    )


def counts_frame(counts: Mapping[tuple[float, str], tuple[int, int]]) -> pd.DataFrame:
    """The input counts of :func:`skewlab.live.report.aggregate.plain_count` as a frame.

    ``(window_start ms, key) -> (count, bytes)`` becomes columns
    ``window_start`` (int64 ms), ``key``, ``count``.
    """
    items = list(counts.items())
    return pd.DataFrame(
        {
            "window_start": pd.Series([round(w) for (w, _), _ in items], dtype="int64"),
            "key": pd.Series([k for (_, k), _ in items], dtype="object"),
            "count": pd.Series([int(c) for _, (c, _) in items], dtype="int64"),
        }
    )


def totals_frame(results: pd.DataFrame, expected: pd.DataFrame) -> pd.DataFrame:
    """Merged ``count`` beside the input count (``expected``) per key (or window and key).

    The grain is ``(window_start, key)`` if ``expected`` has ``window_start``,
    else ``key``; a key missing on one side counts 0 there.
    """
    missing = {"key", "count"} - set(expected.columns)
    if missing:
        raise ConfigError(
            f"input counts need columns key and count (window_start optional); "
            f"missing {sorted(missing)}"
        )
    grain = ["window_start", "key"] if "window_start" in expected.columns else ["key"]
    exp = expected.assign(count=pd.to_numeric(expected["count"]))
    if "window_start" in grain:
        exp = exp.assign(window_start=pd.to_numeric(exp["window_start"]).round().astype("int64"))
        results = results.assign(window_start=results["window_start"].astype("int64"))
    actual = results.groupby(grain)["count"].sum().rename("count")
    wanted = exp.groupby(grain)["count"].sum().rename("expected")
    merged = pd.concat([actual, wanted], axis=1).fillna(0).astype("int64")
    return merged.reset_index()


# ---------------------------------------------------------------------------- the suites


def events_checks(
    frame: pd.DataFrame,
    expected_rows: int | None = None,
    foreign: Collection[tuple[int, int]] = (),
) -> list[FrameCheck]:
    """Schema, key present, ``ts`` monotone per partition (offset order); the row count.

    ``expected_rows``: how many valid events the frame must hold (every event the
    run's producer sent plus the valid foreign ones: what the route job read), when
    the frame is the whole topic. ``foreign``: ``(partition, offset)`` of records written
    from outside the run; their ``ts`` is the writer's, so the monotone rule is over the
    run's own events only (a foreign row is skipped, the next own row is compared with
    the last own one).
    """
    expects = [
        *(
            [
                Expect(
                    "ExpectTableRowCountToEqual",
                    f"holds every produced event ({expected_rows})",
                    {"value": expected_rows},
                )
            ]
            if expected_rows is not None
            else []
        ),
        _schema(EVENTS_COLUMNS),
        *_present("key", "ts", "partition", "offset"),
        Expect(
            "ExpectColumnValueLengthsToBeBetween",
            "key is non-empty",
            {"column": "key", "min_value": 1},
        ),
        Expect(
            "ExpectColumnValuesToBeInTypeList",
            "ts is numeric",
            {"column": "ts", "type_list": _NUMERIC},
        ),
        *_non_negative("partition", "offset"),
    ]
    if {"partition", "offset", "ts"} <= set(frame.columns):
        frame = frame.sort_values(["partition", "offset"], kind="stable").reset_index(drop=True)
        outside = set(foreign)
        own = pd.Series(
            [(int(p), int(o)) not in outside for p, o in zip(frame["partition"], frame["offset"])],
            index=frame.index,
            dtype=bool,
        )
        own_ts = frame["ts"].where(own)
        last_own = own_ts.groupby(frame["partition"]).ffill()
        frame = frame.assign(ts_prev=last_own.groupby(frame["partition"]).shift(1).where(own))
        expects.append(
            Expect(
                "ExpectColumnPairValuesAToBeGreaterThanB",
                "ts never decreases within a partition (offset order)",
                {
                    "column_A": "ts",
                    "column_B": "ts_prev",
                    "or_equal": True,
                    "ignore_row_if": "either_value_is_missing",
                },
            )
        )
    return [FrameCheck("events", frame, tuple(expects), ("partition", "offset"))]


def key_loads_checks(
    frame: pd.DataFrame,
    window_ms: int | None = None,
    require_rows: bool = True,
    windows: Iterable[int] | None = None,
) -> list[FrameCheck]:
    """Schema, key present, count / bytes / worker >= 0, windows complete (see ``window_grid``)."""
    expects = [
        _schema(_columns(KEY_LOADS.schema.names)),
        *([_has_rows("key_loads")] if require_rows else []),
        *_present("window_start", "key"),
        *_non_negative("count", "bytes", "worker"),
    ]
    checks = [FrameCheck("key_loads", frame, tuple(expects), ("window_start", "key", "worker"))]
    grid = _windows_check("key_loads", frame, window_ms, windows)
    return checks + ([grid] if grid is not None else [])


def partition_loads_checks(
    frame: pd.DataFrame,
    window_ms: int | None = None,
    require_rows: bool = True,
    windows: Iterable[int] | None = None,
) -> list[FrameCheck]:
    """Schema, bytes / records / bytes_per_s / partition >= 0, windows complete."""
    expects = [
        _schema(_columns(PARTITION_LOADS.schema.names)),
        *([_has_rows("partition_loads")] if require_rows else []),
        *_present("window_start", "topic"),
        *_non_negative("bytes", "records", "bytes_per_s", "partition"),
    ]
    index = ("window_start", "topic", "partition")
    checks = [FrameCheck("partition_loads", frame, tuple(expects), index)]
    grid = _windows_check("partition_loads", frame, window_ms, windows)
    return checks + ([grid] if grid is not None else [])


def results_checks(
    frame: pd.DataFrame, expected: pd.DataFrame | None = None, require_rows: bool = True
) -> list[FrameCheck]:
    """Schema, one row per (window_start, key), count >= 0; exactness if ``expected``."""
    expects = [
        _schema(_columns(RESULTS.schema.names)),
        *([_has_rows("results")] if require_rows else []),
        *_present("window_start", "key"),
        *_non_negative("count"),
        Expect(
            "ExpectCompoundColumnsToBeUnique",
            "one row per (window_start, key)",
            {"column_list": ["window_start", "key"]},
        ),
    ]
    checks = [FrameCheck("results", frame, tuple(expects), ("window_start", "key"))]
    if expected is not None and {"key", "count"} <= set(frame.columns):
        totals = totals_frame(frame, expected)
        grain = ("window_start", "key") if "window_start" in totals.columns else ("key",)
        what = "per-key totals" if grain == ("key",) else "per-(window, key) totals"
        exact = Expect(
            "ExpectColumnPairValuesToBeEqual",
            f"{what} equal the input count",
            {"column_A": "count", "column_B": "expected"},
        )
        checks.append(FrameCheck("results.totals", totals, (exact,), grain))
    return checks


def quarantine_checks(frame: pd.DataFrame) -> list[FrameCheck]:
    """Schema; every row has a reason from ``REASONS``; partition / offset >= 0."""
    expects = [
        _schema(_columns(QUARANTINE.schema.names)),
        *_present("reason"),
        Expect(
            "ExpectColumnValuesToBeInSet",
            "reason is one of " + ", ".join(REASONS),
            {"column": "reason", "value_set": list(REASONS)},
        ),
        *_non_negative("partition", "offset"),
    ]
    return [FrameCheck("quarantine", frame, tuple(expects), ("topic", "partition", "offset"))]


# ---------------------------------------------------------------------------- running GE


def _ordered(row: Mapping[str, Any], index: Sequence[str]) -> dict[str, Any]:
    """``row`` with its identifying columns first, then the values checked."""
    first = {c: row[c] for c in index if c in row}
    return {**first, **{k: v for k, v in row.items() if k not in first}}


def _observed(result: Any) -> str:
    """What GX saw for one expectation, in a few words."""
    info = result.exception_info or {}
    if info.get("raised_exception"):
        return "GX raised: " + " ".join(str(info.get("exception_message") or "").split())[:300]
    res = dict(result.result or {})
    if "unexpected_count" in res:
        return f"{res['unexpected_count']} of {res.get('element_count', 0)} rows unexpected"
    missing = ((res.get("details") or {}).get("mismatched") or {}).get("missing")
    if missing:
        return f"missing columns {sorted(missing)}"
    if "observed_value" in res:
        return f"observed {res['observed_value']!r}"
    return ""


def _failure(check: FrameCheck, suite: str, description: str, result: Any) -> Failure:
    """A :class:`Failure` from one failed GX ``ExpectationValidationResult``."""
    kind = str(result.expectation_config.type)
    res = dict(result.result or {})
    if "unexpected_count" in res and not (result.exception_info or {}).get("raised_exception"):
        rows = res.get("partial_unexpected_index_list") or [
            {"value": v} for v in res.get("partial_unexpected_list") or []
        ]
        return Failure(
            suite,
            check.name,
            kind,
            description,
            unexpected=int(res["unexpected_count"]),
            total=int(res.get("element_count", 0)),
            rows=tuple(_ordered(r, check.index) for r in rows),
        )
    return Failure(suite, check.name, kind, description, detail=_observed(result) or "no result")


def run_suite(
    suite: str, checks: Sequence[FrameCheck], runner: Runner | None = None, note: str = ""
) -> SuiteResult:
    """Validate every frame of ``checks`` with GX; every expectation's result, the failures.

    ``runner``: where GX runs (:class:`skewlab.quality.context.Project` renders
    Data Docs pages, recorded in ``SuiteResult.pages``); default the in-memory
    context. ``note`` says what the suite's rows are.
    """
    from skewlab.quality.context import ephemeral

    gx = runner if runner is not None else ephemeral()
    failures: list[Failure] = []
    checked: list[Checked] = []
    pages: dict[str, str] = {}
    rows = 0
    for check in checks:
        if check.name == suite:
            rows = len(check.frame)
        columns = set(check.frame.columns)
        expects = [e for e in check.expects if e.columns() <= columns]
        if not expects:
            continue
        outcome, page = gx.validate(check, expects, MAX_ROWS)
        if page is not None:
            pages[check.name] = str(page)
        by_check = {e.check: e for e in expects}
        for r in outcome.results:
            description = str(r.expectation_config.description or r.expectation_config.type)
            e = by_check.get(description)
            column = ", ".join(sorted(e.columns())) if e is not None else ""
            kind = str(r.expectation_config.type)
            checked.append(
                Checked(check.name, kind, column, description, bool(r.success), _observed(r))
            )
            if not r.success:
                failures.append(_failure(check, suite, description, r))
    order = {e.check: i for c in checks for i, e in enumerate(c.expects)}
    failures.sort(key=lambda f: (f.frame != suite, f.frame, order.get(f.check, 0)))
    checked.sort(key=lambda c: (c.frame != suite, c.frame, order.get(c.check, 0)))
    for f in failures:
        log.warning("data quality: %s", f.line())
    return SuiteResult(
        suite=suite,
        rows=rows,
        evaluated=len(checked),
        failures=tuple(failures),
        checked=tuple(checked),
        note=note,
        pages=pages,
    )
