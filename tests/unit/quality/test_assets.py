"""Data Docs pages served with their CSS and scripts from the site itself: every CDN tag of
a page points at a file that exists, relative to the page, without the CORS checks a
``file://`` page cannot pass; nothing else changes; without the assets nothing does."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from skewlab.quality.assets import FILES, FONTS, VENDOR, localize_site, vendor_files

pytestmark = pytest.mark.unit

PAGE = """<html><head>
<link rel="stylesheet" href="https://cdn.example/npm/bootstrap@4.3.1/css/bootstrap.min.css"/>
<link rel="stylesheet" href="https://cdn.example/libs/font-awesome/6.6.0/css/all.min.css">
<script src="https://cdn.example/jquery-3.7.1.min.js"></script>
<script src="https://cdn.example/popper.min.js" integrity="sha384-x" crossorigin="anonymous">
</script>
<script src="https://cdn.example/npm/vega@5"></script>
<script src="https://cdn.example/other-lib.js"></script>
</head><body><img src="https://images.example/logo-long.png?d=1&id=2">
<a href="https://project.example">home</a></body></html>
"""


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A stand-in for ``.assets/data-docs``: every file the pages load, and two fonts."""
    src = tmp_path / "assets"
    for rel in {*FILES.values(), f"{FONTS}/fa-solid-900.woff2", f"{FONTS}/fa-solid-900.ttf"}:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(rel)
    return src


def _site(tmp_path: Path) -> tuple[Path, Path, Path]:
    site = tmp_path / "site"
    index = site / "index.html"
    deep = site / "validations" / "suite" / "run" / "20261128" / "batch.html"
    for page in (index, deep):
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(PAGE)
    (site / "static" / "images").mkdir(parents=True)
    (site / "static" / "images" / "logo-long.png").write_bytes(b"png")
    return site, index, deep


def _loads(page: Path) -> list[str]:
    """What the page loads: script / link / img URLs (not the links a reader follows)."""
    html = page.read_text()
    return re.findall(r'<(?:script|link|img)[^>]*(?:src|href)="([^"]+)"', html)


def test_every_page_loads_its_assets_from_the_site(tmp_path: Path, source: Path) -> None:
    site, index, deep = _site(tmp_path)
    assert localize_site(site, source) == 2
    for page in (index, deep):
        loads = _loads(page)
        remote = [u for u in loads if u.startswith("http")]
        assert remote == ["https://cdn.example/other-lib.js"]  # unknown: left as it was
        for url in loads:
            if not url.startswith("http"):
                assert (page.parent / url).resolve().is_file(), url
        html = page.read_text()
        assert "integrity=" not in html and "crossorigin=" not in html
        assert 'href="https://project.example"' in html  # a link to follow stays
    assert (site / VENDOR / FONTS / "fa-solid-900.woff2").is_file()  # the icons' font
    assert localize_site(site, source) == 0  # once is enough


def test_vendor_files_need_every_asset(source: Path) -> None:
    assert set(FILES.values()) <= set(vendor_files(source))
    (source / FILES["all.min.css"]).unlink()
    assert vendor_files(source) == []


def test_without_assets_pages_stay_and_a_warning_says_how_to_fetch_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    site, index, _ = _site(tmp_path)
    with caplog.at_level(logging.WARNING, logger="skewlab.quality.assets"):
        assert localize_site(site, tmp_path / "nothing") == 0
    assert index.read_text() == PAGE
    assert any("infra/data_docs_assets.sh" in r.getMessage() for r in caplog.records)
