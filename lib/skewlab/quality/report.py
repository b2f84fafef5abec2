"""The outcome of the data-quality suites: failures as one line each, and the run's report.

A :class:`Failure` is one failed expectation: which suite and frame, the
expectation (its Great Expectations type and what it checks in words), how
many rows broke it and up to :data:`MAX_ROWS` of them. :class:`QualityReport`
collects the :class:`SuiteResult` of every suite run on one skewlab run and
renders as a dict (the JSON artifact), Markdown (the human artifact) or one
line (an Airflow task failure); :func:`log_quality` stores it in MLflow.

Nothing here imports Great Expectations: results are plain data once
:mod:`skewlab.quality.suites` has read them out of GE's objects.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from skewlab.errors import SkewlabError

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

log = logging.getLogger(__name__)

MAX_ROWS = 5
"""Offending rows quoted per failed expectation."""

REPORT_JSON = "quality/report.json"
REPORT_MD = "quality/report.md"
"""Artifact paths of the report in an MLflow run."""


class QualityError(SkewlabError):
    """A run's data broke at least one expectation; the message names them, one line."""


def _cell(value: Any) -> Any:
    """A JSON-safe scalar: numpy scalars unwrapped, NaN as ``None``, bytes shortened."""
    item = getattr(value, "item", None)
    if callable(item) and not isinstance(value, str | bytes):
        try:
            value = item()
        except (TypeError, ValueError):
            value = str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, bytes):
        return value[:32].hex() + ("..." if len(value) > 32 else "")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_cell(v) for v in value]
    return str(value)


def _row_text(row: Mapping[str, Any]) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in row.items()) + "}"


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed expectation.

    ``unexpected`` / ``total`` count offending and evaluated rows (``None`` for
    a table-level expectation such as the column set); ``rows`` quotes at most
    :data:`MAX_ROWS` offending rows (the identifying columns and the values
    checked); ``detail`` says what a table-level expectation observed.
    """

    suite: str
    frame: str
    expectation: str
    check: str
    unexpected: int | None = None
    total: int | None = None
    rows: tuple[Mapping[str, Any], ...] = ()
    detail: str = ""

    def __post_init__(self) -> None:
        rows = tuple({str(k): _cell(v) for k, v in r.items()} for r in self.rows[:MAX_ROWS])
        object.__setattr__(self, "rows", rows)

    def line(self) -> str:
        """``<frame>: <check> [<expectation>] failed on N of M rows: {row}; {row}``."""
        head = f"{self.frame}: {self.check} [{self.expectation}] failed"
        if self.unexpected is not None:
            of = f" of {self.total}" if self.total is not None else ""
            head += f" on {self.unexpected}{of} rows"
        parts = [head]
        if self.rows:
            more = "; ..." if (self.unexpected or 0) > len(self.rows) else ""
            parts.append("; ".join(_row_text(r) for r in self.rows) + more)
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "frame": self.frame,
            "expectation": self.expectation,
            "check": self.check,
            "unexpected": self.unexpected,
            "total": self.total,
            "rows": [dict(r) for r in self.rows],
            "detail": self.detail,
            "message": self.line(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        """The inverse of :meth:`to_dict` (``message`` is derived, not read)."""
        return cls(
            suite=data["suite"],
            frame=data["frame"],
            expectation=data["expectation"],
            check=data["check"],
            unexpected=data.get("unexpected"),
            total=data.get("total"),
            rows=tuple(data.get("rows", ())),
            detail=data.get("detail", ""),
        )


@dataclass(frozen=True, slots=True)
class SuiteResult:
    """One suite on one run: rows checked, expectations evaluated, the failures."""

    suite: str
    rows: int
    evaluated: int
    failures: tuple[Failure, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "ok": self.ok,
            "rows": self.rows,
            "evaluated": self.evaluated,
            "failures": [f.to_dict() for f in self.failures],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SuiteResult:
        """The inverse of :meth:`to_dict`."""
        return cls(
            suite=data["suite"],
            rows=data["rows"],
            evaluated=data["evaluated"],
            failures=tuple(Failure.from_dict(f) for f in data.get("failures", ())),
        )


@dataclass(frozen=True, slots=True)
class QualityReport:
    """Every suite run on one skewlab run; ``ok`` only if no expectation failed.

    ``skipped`` names suites that could not run and why (the ``events`` suite
    without an events frame, exactness without the input counts), so a report
    never passes silently on checks it did not make.
    """

    run_id: str
    suites: tuple[SuiteResult, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.suites)

    @property
    def failures(self) -> list[str]:
        """One line per failed expectation (see :meth:`Failure.line`)."""
        return [f.line() for s in self.suites for f in s.failures]

    def summary(self) -> str:
        """One line: the verdict, then every failure separated by `` | ``."""
        evaluated = sum(s.evaluated for s in self.suites)
        names = ", ".join(s.suite for s in self.suites) or "no suites"
        if self.ok:
            return f"data quality of {self.run_id}: PASSED {evaluated} expectations ({names})"
        failed = self.failures
        return (
            f"data quality of {self.run_id}: FAILED {len(failed)} of {evaluated} expectations: "
            + " | ".join(failed)
        )

    def raise_for_failures(self) -> None:
        """Raise :class:`QualityError` (one line, every failure named) unless ``ok``."""
        if not self.ok:
            raise QualityError(" ".join(self.summary().split()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "suites": [s.to_dict() for s in self.suites],
            "skipped": dict(self.skipped),
            "failures": self.failures,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityReport:
        """The inverse of :meth:`to_dict` (a report saved by one task, read by the next)."""
        return cls(
            run_id=data["run_id"],
            suites=tuple(SuiteResult.from_dict(s) for s in data.get("suites", ())),
            skipped=dict(data.get("skipped", {})),
        )

    def to_markdown(self) -> str:
        """A heading, one table row per suite, then each failure with its rows."""
        verdict = "PASSED" if self.ok else "FAILED"
        lines = [
            f"# Data quality of `{self.run_id}`: {verdict}",
            "",
            "| suite | rows | expectations | failed |",
            "|---|---:|---:|---:|",
        ]
        lines += [
            f"| {s.suite} | {s.rows} | {s.evaluated} | {len(s.failures)} |" for s in self.suites
        ]
        for name, why in self.skipped.items():
            lines.append(f"| {name} | - | skipped: {_md(why)} | - |")
        failures = [f for s in self.suites for f in s.failures]
        if failures:
            lines += ["", "## Failures", ""]
            for f in failures:
                lines.append(f"- **{f.frame}**: {_md(f.check)} (`{f.expectation}`)")
                if f.unexpected is not None:
                    of = f" of {f.total}" if f.total is not None else ""
                    lines.append(f"  - offending rows: {f.unexpected}{of}")
                lines += [f"  - `{_row_text(r)}`" for r in f.rows]
                if f.detail:
                    lines.append(f"  - {_md(f.detail)}")
        return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|")


def log_quality(tracker: Tracker, mlflow_run_id: str, report: QualityReport) -> None:
    """Store ``report`` in MLflow run ``mlflow_run_id``.

    Writes ``quality/report.json`` and ``quality/report.md`` (artifacts), the
    metrics ``quality_ok`` (1/0) and ``quality_failures``, and the tag
    ``quality`` = ``passed`` / ``failed``. Logging again overwrites the same
    artifacts, so a retried task leaves one report.
    """
    tracker.log_dict(mlflow_run_id, report.to_dict(), REPORT_JSON)
    tracker.client.log_text(mlflow_run_id, report.to_markdown(), REPORT_MD)
    tracker.log_metrics(
        mlflow_run_id,
        {"quality_ok": 1.0 if report.ok else 0.0, "quality_failures": len(report.failures)},
    )
    tracker.set_tags(mlflow_run_id, {"quality": "passed" if report.ok else "failed"})
    log.info("logged data quality of %s to MLflow run %s", report.run_id, mlflow_run_id)
