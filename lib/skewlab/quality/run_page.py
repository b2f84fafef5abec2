"""One Data Docs page per skewlab run: its verdict and a link to each validation page.

GX's site index lists the validations of every run ever checked; a reader who comes
from one run (the CLI summary, its MLflow run, the Airflow task log) wants that run's.
:func:`write_run_page` writes ``<site>/runs/<run id>.html`` beside the index, styled with
the site's own Bootstrap (:mod:`skewlab.quality.assets`) when it is there: the verdict,
then one row per validated frame with its suite, rows, expectations, failures and a link
to its validation page, then the checks that were skipped.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from skewlab.quality.assets import FILES, VENDOR

if TYPE_CHECKING:
    from skewlab.quality.report import QualityReport

__all__ = ["RUNS_DIR", "run_page_path", "write_run_page"]

RUNS_DIR = "runs"
"""The folder of the run pages, beside the site's ``index.html``."""


def run_page_path(index: Path, run_id: str) -> Path:
    """Where the page of ``run_id`` is in the site whose index is ``index``."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", run_id).strip("_") or "run"
    return index.parent / RUNS_DIR / f"{name}.html"


def write_run_page(report: QualityReport) -> Path | None:
    """Write the page of ``report``'s run into its Data Docs site; its path (None when the
    run was validated in memory, without a site)."""
    if report.data_docs is None:
        return None
    page = run_page_path(report.data_docs, report.run_id)
    page.parent.mkdir(parents=True, exist_ok=True)
    site = report.data_docs.parent

    def rel(target: Path) -> str:
        return html.escape(os.path.relpath(target, page.parent))

    css = site / VENDOR / FILES["bootstrap.min.css"]
    style = f'<link rel="stylesheet" href="{rel(css)}">' if css.is_file() else ""
    verdict = "PASSED" if report.ok else "FAILED"
    tone = "success" if report.ok else "danger"
    rows = []
    for s in report.suites:
        failed = {f.frame for f in s.failures}
        for frame, where in sorted(s.pages.items()) or [("", "")]:
            ok = frame not in failed and (frame or not s.failures)
            link = f'<a href="{rel(Path(where))}">{html.escape(frame)}</a>' if where else "-"
            rows.append(
                f'<tr class="{"" if ok else "table-danger"}"><td>{"passed" if ok else "FAILED"}'
                f"</td><td>{html.escape(s.suite)}</td><td>{link}</td><td>{s.rows:,}</td>"
                f"<td>{s.evaluated}</td><td>{html.escape(s.note)}</td></tr>"
            )
    failures = "".join(f"<li>{html.escape(line)}</li>" for line in report.failures)
    skipped = "".join(
        f"<li>{html.escape(name)}: {html.escape(why)}</li>" for name, why in report.skipped.items()
    )
    body = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Data quality of {html.escape(report.run_id)}: {verdict}</title>{style}</head>
<body class="p-4"><div class="container-fluid">
<p><a href="{rel(report.data_docs)}">All runs (Data Docs index)</a></p>
<h1 class="h3">Data quality of <code>{html.escape(report.run_id)}</code>:
<span class="badge badge-{tone}">{verdict}</span></h1>
<table class="table table-sm table-bordered"><thead><tr><th>Status</th><th>Suite</th>
<th>Validation page</th><th>Rows</th><th>Expectations</th><th>Note</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
{f'<h2 class="h5">Failed expectations</h2><ul>{failures}</ul>' if failures else ""}
{f'<h2 class="h5">Not checked</h2><ul>{skipped}</ul>' if skipped else ""}
</div></body></html>
"""
    page.write_text(body, encoding="utf-8")
    return page
