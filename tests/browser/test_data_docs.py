"""The Great Expectations Data Docs of two runs, opened from file:// in headless chromium.

Two runs' Delta tables (one good, one with a negative count) are checked by
:func:`skewlab.quality.check_run` with a data dir, which renders them into the
GX site ``<home>/gx/uncommitted/data_docs/skewlab/`` with its CSS and scripts served
from the site (:mod:`skewlab.quality.assets`). Chromium opens the site's index with
every http(s) request blocked, so what it shows is what a user without network sees:
the page styled, bootstrap-table's index with its filters, the status icons, and no
request leaving the machine. The index must list each run's validations with their
verdict; searching for the bad run and clicking its ``key_loads`` row must open its
validation page naming the failed expectation; the Expectation Suites tab's
``key_loads`` row must open a page rendering an expectation on every column the suite
checked. Screenshots: ``screenshots/data-docs-index.png``, ``data-docs-validation.png``,
``data-docs-suite.png`` and ``data-docs-offline-styled.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from skewlab.io.delta import DeltaStore
from skewlab.quality import QualityReport, check_run

if TYPE_CHECKING:
    from tests.browser.conftest import Page

pytestmark = [pytest.mark.browser, pytest.mark.integration]

WINDOWS = (0, 1000)


def _write(store: DeltaStore, run_id: str, count: int) -> None:
    rows: dict[str, list[dict[str, Any]]] = {
        "key_loads": [
            {"window_start": w, "key": "a", "worker": 0, "count": count, "bytes": 10}
            for w in WINDOWS
        ],
        "partition_loads": [
            {
                "window_start": w,
                "topic": "routed",
                "partition": 0,
                "bytes": 10,
                "records": 1,
                "bytes_per_s": 10.0,
            }
            for w in WINDOWS
        ],
        "results": [{"window_start": w, "key": "a", "count": 1, "sum": 10.0} for w in WINDOWS],
        "quarantine": [],
    }
    for table, data in rows.items():
        store.append(table, data, app_id=f"test:{run_id}", version=0, run_id=run_id)


@pytest.fixture
def reports(tmp_path: Path) -> dict[str, QualityReport]:
    home = tmp_path / "home"
    store = DeltaStore(home / "delta")
    out = {}
    for run_id, count in (("dd-good", 1), ("dd-bad", -4)):
        _write(store, run_id, count)
        out[run_id] = check_run(store, run_id, window_s=1.0)
    return out


def _rows(page: Page) -> list[dict[str, str]]:
    """The validation rows the index lists (every page of bootstrap-table's, or the plain
    table when its scripts did not load): verdict, run name, asset, link."""
    script = """
    Array.from(document.querySelectorAll('table')).flatMap(t => {
      const $ = window.jQuery;
      if ($ && $(t).data('bootstrap.table')) {
        const cols = $(t).bootstrapTable('getOptions').columns.flat();
        const field = title => (cols.find(c => c.title === title) || {}).field;
        if (!field('Run Name')) return [];
        return $(t).bootstrapTable('getData', {useCurrentPage: false}).map(r => ({
          status: r._validation_success_text,
          run: r[field('Run Name')],
          asset: r[field('Asset Name')],
          href: r._table_row_link_path,
        }));
      }
      const heads = Array.from(t.querySelectorAll('thead th')).map(h => h.innerText.trim());
      if (!heads.includes('Run Name')) return [];
      return Array.from(t.querySelectorAll('tbody tr'))
        .filter(r => r.offsetParent !== null)
        .map(r => {
          const cells = Array.from(r.children).map(c => c.innerText.trim());
          const link = r.querySelector('a[href^="validations/"]');
          return {
            status: cells[heads.indexOf('Status')],
            run: cells[heads.indexOf('Run Name')],
            asset: cells[heads.indexOf('Asset Name')],
            href: link ? link.getAttribute('href') : '',
          };
        });
    })
    """
    rows: list[dict[str, str]] = page.eval(script)
    return rows


def test_data_docs_index_lists_each_run_and_links_its_validation_page(
    browser: Page, reports: dict[str, QualityReport]
) -> None:
    bad = reports["dd-bad"]
    assert bad.data_docs is not None and bad.data_docs == reports["dd-good"].data_docs
    browser.send("Network.enable")
    browser.send("Network.setBlockedURLs", urls=["http://*", "https://*"])

    browser.goto(bad.data_docs.as_uri())
    browser.wait_for("!!document.querySelector('.bootstrap-table tr.clickable-row')", "table")
    rows = _rows(browser)
    shot = browser.screenshot("data-docs-index")
    assert shot.stat().st_size > 0

    listed = {(r["run"], r["asset"]): r for r in rows}
    for run_id, report in reports.items():
        for suite in report.suites:
            for frame in suite.pages:
                assert (run_id, frame) in listed, (run_id, frame, sorted(listed))
    assert listed[("dd-bad", "key_loads")]["status"] == "Failed"
    assert listed[("dd-good", "key_loads")]["status"] == "Success"
    assert listed[("dd-bad", "results")]["status"] == "Success"
    page = Path(bad.suites[1].pages["key_loads"])
    assert listed[("dd-bad", "key_loads")]["href"] == str(page.relative_to(bad.data_docs.parent))

    # the search box filters the rows; a row opens its validation page
    browser.type_into(".bootstrap-table .search-input", "dd-bad")
    browser.send("Input.dispatchKeyEvent", type="keyUp", key="d", code="KeyD")  # it searches
    target = 'tr.clickable-row[data-href*="/dd-bad/"][data-href$="skewlab-key_loads.html"]'
    browser.wait_for(
        "Array.from(document.querySelector('.bootstrap-table').querySelectorAll('tr.clickable-row'))"
        ".every(r => r.innerText.includes('dd-bad'))"
        f" && !!document.querySelector({json.dumps(target)})",
        "rows filtered to dd-bad",
    )
    browser.click(f"{target} td:nth-child(3)")
    browser.wait_for(
        f"location.href === {json.dumps(page.as_uri())} && document.readyState === 'complete'",
        "validation page opened",
    )
    text = browser.text()
    browser.screenshot("data-docs-validation")
    assert "Status: Failed" in " ".join(text.split())  # the icon, a space, the word
    assert "count >= 0" in text and "bytes >= 0" in text
    assert "/ dd-bad /" in text.split("Validations", 1)[1][:80]  # the breadcrumb: the run

    # the index lists the expectation suites too; a suite's page renders its expectations
    browser.goto(bad.data_docs.as_uri())
    tab = "#Expectation-Suites-tab"
    browser.wait_for(f"!!document.querySelector({json.dumps(tab)})", "suites tab")
    browser.click(tab)
    suite = 'tr.clickable-row[data-href$="expectations/skewlab/key_loads.html"]'
    browser.wait_for(f"!!document.querySelector({json.dumps(suite)})?.offsetParent", "suites")
    browser.click(f"{suite} td")
    browser.wait_for(
        "location.href.endsWith('expectations/skewlab/key_loads.html')"
        " && document.readyState === 'complete'",
        "suite page opened",
    )
    text = browser.text()
    browser.screenshot("data-docs-suite")
    checked = [c for s in reports["dd-good"].suites for c in s.checked if c.frame == "key_loads"]
    columns = {col.strip() for c in checked for col in c.column.split(",") if col.strip()}
    assert {"count", "bytes"} <= columns
    missing = [col for col in sorted(columns) if col not in text]
    assert "skewlab.key_loads" in text and not missing, missing


def test_data_docs_are_styled_and_work_with_the_network_off(
    browser: Page, reports: dict[str, QualityReport]
) -> None:
    """Bootstrap styles the page, bootstrap-table draws the index with its filters, Font
    Awesome draws the status icons, and not one request leaves the machine."""
    docs = reports["dd-bad"].data_docs
    assert docs is not None
    browser.send("Network.enable")
    browser.send("Network.setBlockedURLs", urls=["http://*", "https://*"])
    browser.goto(docs.as_uri())
    browser.wait_for("!!document.querySelector('.bootstrap-table')", "bootstrap-table drew")
    browser.wait_for("document.fonts.status === 'loaded'", "fonts loaded")
    state = browser.eval(
        """(() => {
          const probe = document.createElement('div');
          probe.className = 'd-none';
          document.body.appendChild(probe);
          const bootstrap = getComputedStyle(probe).display === 'none';
          probe.remove();
          const icon = document.querySelector('.bootstrap-table i.fas, .bootstrap-table i.fa');
          const glyph = icon ? getComputedStyle(icon, '::before').content : '';
          return {
            bootstrap,
            table: !!(window.jQuery && window.jQuery.fn.bootstrapTable),
            filters: document.querySelectorAll('.bootstrap-table .filter-control').length,
            iconFont: icon ? getComputedStyle(icon).fontFamily : '',
            glyph,
            fontReady: document.fonts.check('900 16px "Font Awesome 6 Free"'),
          };
        })()"""
    )
    browser.screenshot("data-docs-offline-styled")
    assert state["bootstrap"], state
    assert state["table"] and state["filters"] > 0, state
    assert "Font Awesome" in state["iconFont"] and state["glyph"] not in ("", "none"), state
    assert state["fontReady"], state
    rows = _rows(browser)
    verdicts = {(r["run"], r["asset"]): r["status"] for r in rows}
    assert "Failed" in verdicts[("dd-bad", "key_loads")], verdicts
    sent = [e["params"]["request"]["url"] for e in browser.events
            if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip
    assert not [u for u in sent if u.startswith(("http://", "https://"))], sent
