"""The outcome of the data-quality suites: every expectation checked, failures in one line.

A :class:`Checked` is one expectation as evaluated (frame, GX type, columns,
what it checks, passed or failed, what GX observed); a :class:`Failure` is a
failed one with up to :data:`MAX_ROWS` offending rows. :class:`QualityReport`
collects the :class:`SuiteResult` of every suite run on one skewlab run, with
the Data Docs index (``data_docs``) where GX rendered them; it renders as a dict
(the JSON artifact), a short text (the MLflow / CLI summary, one line per
expectation) or one line (an Airflow task failure). :func:`log_quality` stores
it, and the run's Data Docs pages, in MLflow.

Nothing here imports Great Expectations: results are plain data once
:mod:`skewlab.quality.suites` has read them out of GX's objects.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.errors import SkewlabError

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

log = logging.getLogger(__name__)

MAX_ROWS = 5
"""Offending rows quoted per failed expectation."""

REPORT_JSON = "quality/report.json"
REPORT_MD = "quality/report.md"
"""Artifact paths of the report in an MLflow run (``report.md``: :meth:`QualityReport.text`)."""
DATA_DOCS = "quality/data_docs"
"""Artifact dir of the run's Data Docs pages (index, validation and suite pages, styles)."""


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
        """The fields as JSON-safe data, plus ``message``: :meth:`line`."""
        return {**asdict(self), "rows": [dict(r) for r in self.rows], "message": self.line()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Failure:
        """The inverse of :meth:`to_dict` (``message`` is derived, not read)."""
        names = [f.name for f in fields(cls)]
        kwargs: dict[str, Any] = {k: v for k, v in data.items() if k in names}
        return cls(**{**kwargs, "rows": tuple(kwargs.get("rows", ()))})


@dataclass(frozen=True, slots=True)
class Checked:
    """One expectation as GX evaluated it on one frame.

    ``column`` names the columns it reads (``""`` for a table-level one);
    ``observed`` is what GX saw: ``"k of n rows unexpected"`` for a row-level
    expectation, else its observed value.
    """

    frame: str
    expectation: str
    column: str
    check: str
    success: bool
    observed: str = ""

    def line(self) -> str:
        """``passed|FAILED <frame>: <check> [<expectation>(<column>)]: <observed>``."""
        verdict = "passed" if self.success else "FAILED"
        what = f"{self.expectation}({self.column})" if self.column else self.expectation
        tail = f": {self.observed}" if self.observed else ""
        return f"{verdict} {self.frame}: {self.check} [{what}]{tail}"

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (``Checked(**d)`` reads it back)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class SuiteResult:
    """One suite on one run: rows checked, expectations evaluated, each result, the failures.

    ``checked`` lists every expectation evaluated (``len(checked) == evaluated``
    when the suite ran through :func:`skewlab.quality.suites.run_suite`);
    ``note`` says what the rows were (e.g. a sample of the events topic);
    ``pages`` maps each validated frame to its Data Docs page (a file path).
    """

    suite: str
    rows: int
    evaluated: int
    failures: tuple[Failure, ...] = ()
    checked: tuple[Checked, ...] = ()
    note: str = ""
    pages: Mapping[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no expectation of the suite failed."""
        return not self.failures

    def to_dict(self) -> dict[str, Any]:
        """The fields, ``ok``, failures and checks as dicts (:meth:`from_dict` reads it back)."""
        return {
            "suite": self.suite,
            "ok": self.ok,
            "rows": self.rows,
            "evaluated": self.evaluated,
            "note": self.note,
            "failures": [f.to_dict() for f in self.failures],
            "checked": [c.to_dict() for c in self.checked],
            "pages": dict(self.pages),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SuiteResult:
        """The inverse of :meth:`to_dict`."""
        return cls(
            suite=data["suite"],
            rows=data["rows"],
            evaluated=data["evaluated"],
            failures=tuple(Failure.from_dict(f) for f in data.get("failures", ())),
            checked=tuple(Checked(**c) for c in data.get("checked", ())),
            note=data.get("note", ""),
            pages=dict(data.get("pages", {})),
        )


@dataclass(frozen=True, slots=True)
class QualityReport:
    """Every suite run on one skewlab run; ``ok`` only if no expectation failed.

    ``skipped`` names suites that could not run and why (exactness without the
    input counts, the ``events`` suite when the run's events topic is gone), so
    a report never passes silently on checks it did not make. ``data_docs`` is
    the ``index.html`` of the GX Data Docs site holding this run's validations
    (``None`` when they ran in memory).
    """

    run_id: str
    suites: tuple[SuiteResult, ...]
    skipped: Mapping[str, str] = field(default_factory=dict)
    data_docs: Path | None = None

    @property
    def ok(self) -> bool:
        """True when every suite is ok (skipped checks do not make it fail)."""
        return all(s.ok for s in self.suites)

    @property
    def run_page(self) -> Path | None:
        """This run's page in the Data Docs site (:mod:`skewlab.quality.run_page`): its
        verdict and its validation pages; None when it was not written."""
        if self.data_docs is None:
            return None
        from skewlab.quality.run_page import run_page_path

        page = run_page_path(self.data_docs, self.run_id)
        return page if page.is_file() else None

    @property
    def failures(self) -> list[str]:
        """One line per failed expectation (see :meth:`Failure.line`)."""
        return [f.line() for s in self.suites for f in s.failures]

    @property
    def checked(self) -> list[Checked]:
        """Every expectation evaluated, suite by suite."""
        return [c for s in self.suites for c in s.checked]

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

    def text(self) -> str:
        """The short text summary: verdict, Data Docs link, per suite its rows and every
        expectation (:meth:`Checked.line`), the skipped checks (a Markdown list)."""
        verdict = "PASSED" if self.ok else "FAILED"
        lines = [f"# Data quality of `{self.run_id}`: {verdict}", ""]
        if self.data_docs is not None:
            lines += [f"Data Docs: {self.data_docs.as_uri()}", ""]
        for s in self.suites:
            note = f"; {s.note}" if s.note else ""
            lines.append(f"- {s.suite}: {s.rows} rows, {s.evaluated} expectations{note}")
            lines += [f"  - {c.line()}" for c in s.checked]
            lines += [f"  - {f.line()}" for f in s.failures if f.rows]
        lines += [f"- {name}: skipped: {why}" for name, why in self.skipped.items()]
        return "\n".join(lines) + "\n"

    def raise_for_failures(self) -> None:
        """Raise :class:`QualityError` (one line, every failure named) unless ``ok``."""
        if not self.ok:
            raise QualityError(" ".join(self.summary().split()))

    def to_dict(self) -> dict[str, Any]:
        """The JSON artifact: run id, ``ok``, every suite, skipped checks, failure lines and
        the Data Docs path; :meth:`from_dict` reads it back."""
        return {
            "run_id": self.run_id,
            "ok": self.ok,
            "suites": [s.to_dict() for s in self.suites],
            "skipped": dict(self.skipped),
            "failures": self.failures,
            "data_docs": str(self.data_docs) if self.data_docs is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> QualityReport:
        """The inverse of :meth:`to_dict` (a report saved by one task, read by the next)."""
        docs = data.get("data_docs")
        return cls(
            run_id=data["run_id"],
            suites=tuple(SuiteResult.from_dict(s) for s in data.get("suites", ())),
            skipped=dict(data.get("skipped", {})),
            data_docs=Path(docs) if docs else None,
        )


NOTE_TAG = "mlflow.note.content"
"""MLflow shows this tag as the run's description, rendering its Markdown (links too)."""


def note(report: QualityReport, docs: Path, copy: Path | None) -> str:
    """The run description MLflow shows: the verdict and a link to the run's Data Docs page
    (``docs``; ``copy``: where the artifacts hold the same page)."""
    verdict = "PASSED" if report.ok else "FAILED"
    text = (
        f"**Data quality: {verdict}** ({sum(s.evaluated for s in report.suites)} "
        f"expectations). [Data Docs of this run]({docs.as_uri()})"
    )
    if copy is not None:
        text += f"; a copy is in the artifacts: `{DATA_DOCS}/{copy.as_posix()}`"
    return text + "."


def log_quality(tracker: Tracker, mlflow_run_id: str, report: QualityReport) -> None:
    """Store ``report`` in MLflow run ``mlflow_run_id``.

    Writes ``quality/report.json`` (:meth:`QualityReport.to_dict`),
    ``quality/report.md`` (:meth:`QualityReport.text`), the run's Data Docs pages
    under ``quality/data_docs/`` (the site index, this run's validation pages,
    their suites' pages and the site's styles, in the site's own layout so the
    links between them work), the metrics ``quality_ok`` (1/0),
    ``quality_failures`` and ``quality_expectations``, the tags ``quality`` =
    ``passed`` / ``failed`` and ``quality_data_docs`` (the file URI of the run's own Data
    Docs page, else the site index), and the run's description: the verdict with a link
    to that page (:func:`note`).
    Logging again overwrites the same artifacts, so a retried task leaves one report.
    """
    tracker.log_dict(mlflow_run_id, report.to_dict(), REPORT_JSON)
    tracker.client.log_text(mlflow_run_id, report.text(), REPORT_MD)
    tags = {"quality": "passed" if report.ok else "failed"}
    if report.data_docs is not None and report.data_docs.is_file():
        from skewlab.quality.context import copy_site

        pages = [Path(p) for s in report.suites for p in s.pages.values()]
        run_page = report.run_page
        with tempfile.TemporaryDirectory(prefix="skewlab-docs-") as tmp:
            copied = copy_site(report.data_docs, pages, Path(tmp), extra=[run_page])
            tracker.log_artifact(mlflow_run_id, tmp, DATA_DOCS)
        docs = run_page or report.data_docs
        tags["quality_data_docs"] = docs.as_uri()
        kept = next((f for f in copied if run_page and f.name == run_page.name), None)
        tags[NOTE_TAG] = note(report, docs, kept)
    tracker.log_metrics(
        mlflow_run_id,
        {
            "quality_ok": 1.0 if report.ok else 0.0,
            "quality_failures": len(report.failures),
            "quality_expectations": sum(s.evaluated for s in report.suites),
        },
    )
    tracker.set_tags(mlflow_run_id, tags)
    log.info("logged data quality of %s to MLflow run %s", report.run_id, mlflow_run_id)
