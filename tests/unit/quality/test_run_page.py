"""A run's own Data Docs page: its verdict and a working link to each validation page; in
MLflow the run's description links it (Markdown) and the tag names it, not the index."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from skewlab.quality.report import NOTE_TAG, Failure, QualityReport, SuiteResult, log_quality
from skewlab.quality.run_page import write_run_page

pytestmark = pytest.mark.unit


def _site_report(tmp_path: Path, *, failed: bool) -> QualityReport:
    site = tmp_path / "gx" / "uncommitted" / "data_docs" / "skewlab"
    index = site / "index.html"
    index.parent.mkdir(parents=True)
    index.write_text("<html>index</html>")
    pages = {}
    for frame in ("key_loads", "results"):
        page = site / "validations" / "skewlab" / frame / "run-1" / "t" / f"skewlab-{frame}.html"
        page.parent.mkdir(parents=True)
        page.write_text(f"<html>{frame}</html>")
        pages[frame] = str(page)
    bad = Failure("key_loads", "key_loads", "expect_x", "count >= 0", unexpected=1, total=2)
    suites = (
        SuiteResult("key_loads", rows=2, evaluated=7, failures=(bad,) if failed else (),
                    pages={"key_loads": pages["key_loads"]}),
        SuiteResult("results", rows=2, evaluated=3, pages={"results": pages["results"]}),
    )  # fmt: skip
    return QualityReport("run-1", suites, skipped={"events": "gone"}, data_docs=index)


def test_the_run_page_links_each_validation_page_and_says_the_verdict(tmp_path: Path) -> None:
    report = _site_report(tmp_path, failed=True)
    page = write_run_page(report)
    assert page is not None and report.run_page == page
    text = page.read_text()
    assert "FAILED" in text and "run-1" in text
    hrefs = re.findall(r'href="([^"]+)"', text)
    targets = {(page.parent / h).resolve() for h in hrefs}
    assert {Path(p).resolve() for s in report.suites for p in s.pages.values()} <= targets
    assert report.data_docs is not None and report.data_docs.resolve() in targets
    shown = html.unescape(text)
    assert "count >= 0" in shown and "gone" in shown  # the failure and what was not checked


def test_mlflow_links_the_run_page_not_the_index(tmp_path: Path) -> None:
    from skewlab.io.tracking import Tracker, TrackingSettings

    report = _site_report(tmp_path, failed=False)
    page = write_run_page(report)
    assert page is not None
    tracker = Tracker(TrackingSettings.for_data_dir(tmp_path / "home"))
    rid = tracker.start_run("quality-test", "run-1")
    log_quality(tracker, rid, report)
    tags = tracker.client.get_run(rid).data.tags
    assert tags["quality_data_docs"] == page.as_uri()
    assert f"]({page.as_uri()})" in tags[NOTE_TAG]  # a Markdown link in the description
    kept = tracker.list_artifacts(rid, "quality/data_docs/runs")
    assert kept == ["quality/data_docs/runs/run-1.html"]
