"""The Data Docs pages' CSS and JavaScript, served from the site itself (no network).

Great Expectations 1.x renders pages whose ``<link>`` and ``<script>`` tags load Bootstrap,
bootstrap-table (the index's filters and sorting), Font Awesome (the status icons),
jQuery, Popper, bootstrap-datepicker, a dark theme and Vega from CDNs. Offline the pages
are unstyled, the filters do nothing and the Status column is blank.
``infra/data_docs_assets.sh`` (run by setup) unpacks the same files from the npm registry
into ``.assets/data-docs/<package>/``; :func:`localize_site` copies the ones the pages
load into the site's ``static/vendor/<package>/`` and points every page's tags there,
relative to the page, so the site (and the copy of a run's pages in MLflow) works from
``file://`` with no network. Without the assets, pages keep their CDN links and a warning
says how to fetch them.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

from skewlab.envsettings import env_settings

__all__ = [
    "ASSETS_ENV",
    "FILES",
    "VENDOR",
    "assets_dir",
    "localize_page",
    "localize_site",
    "vendor_files",
]

log = logging.getLogger(__name__)

ASSETS_ENV = "SKEWLAB_ASSETS"
"""A folder holding ``data-docs/`` instead of ``<repo>/.assets`` (as for the jars)."""
VENDOR = Path("static", "vendor")
"""Where in a Data Docs site the files are served from."""

FILES: Mapping[str, str] = MappingProxyType(
    {
        "jquery-3.7.1.min.js": "jquery/dist/jquery.min.js",
        "popper.min.js": "popper.js/dist/umd/popper.min.js",
        "bootstrap.min.js": "bootstrap/dist/js/bootstrap.min.js",
        "bootstrap.min.css": "bootstrap/dist/css/bootstrap.min.css",
        "bootstrap-table.min.js": "bootstrap-table/dist/bootstrap-table.min.js",
        "bootstrap-table.min.css": "bootstrap-table/dist/bootstrap-table.min.css",
        "bootstrap-table-filter-control.min.js": (
            "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.js"
        ),
        "bootstrap-table-filter-control.min.css": (
            "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.min.css"
        ),
        "bootstrap-table-filter-control.css": (
            "bootstrap-table/dist/extensions/filter-control/bootstrap-table-filter-control.css"
        ),
        "bootstrap-datepicker.min.js": "bootstrap-datepicker/dist/js/bootstrap-datepicker.min.js",
        "bootstrap-datepicker.min.css": (
            "bootstrap-datepicker/dist/css/bootstrap-datepicker.min.css"
        ),
        "all.min.css": "@fortawesome/fontawesome-free/css/all.min.css",
        "bootstrap-prefers-dark.css": (
            "@forevolve/bootstrap-dark/dist/css/bootstrap-prefers-dark.css"
        ),
        "vega@5": "vega/build/vega.min.js",
        "vega-lite@5": "vega-lite/build/vega-lite.min.js",
        "vega-embed@6": "vega-embed/build/vega-embed.min.js",
    }
)
"""The last path segment of each URL GX's templates load -> its file in the npm packages
(``infra/npm/data-docs.txt`` pins the versions the templates name)."""

FONTS = "@fortawesome/fontawesome-free/webfonts"
"""Font Awesome's stylesheet loads its fonts from ``../webfonts/`` (woff2 is enough)."""

_TAG = re.compile(r"<(?:script|link|img)\b[^>]*>", re.IGNORECASE)
_URL = re.compile(r"""(\b(?:src|href)\s*=\s*)(["'])(https?://[^"']+)\2""", re.IGNORECASE)
_CHECKS = re.compile(r"""\s+(?:integrity|crossorigin)\s*=\s*(["'])[^"']*\1""", re.IGNORECASE)


def assets_dir() -> Path:
    """``$SKEWLAB_ASSETS/data-docs``, else ``.assets/data-docs`` of this repository."""
    override = env_settings().assets
    root = Path(override) if override else Path(__file__).resolve().parents[3] / ".assets"
    return root / "data-docs"


def vendor_files(source: Path | None = None) -> list[str]:
    """The package-relative paths a site needs (:data:`FILES` and Font Awesome's woff2
    fonts), if ``source`` holds every one of them; else an empty list."""
    src = source or assets_dir()
    needed = sorted(set(FILES.values()))
    if not all((src / rel).is_file() for rel in needed):
        return []
    fonts = sorted(p.relative_to(src).as_posix() for p in (src / FONTS).glob("*.woff2"))
    return needed + fonts


def _copy_vendor(site: Path, files: Iterable[str], source: Path) -> None:
    for rel in files:
        dst = site / VENDOR / rel
        src = source / rel
        if dst.is_file() and dst.stat().st_size == src.stat().st_size:
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)


def localize_page(page: Path, site: Path) -> bool:
    """Point the CDN tags of ``page`` (a file of ``site``) at ``static/vendor``, relative
    to the page, dropping their ``integrity`` / ``crossorigin`` (a ``file://`` page cannot
    load a CORS-checked script); a remote image the site has in ``static/images`` (GX's
    logo) is shown from there. Tags of other URLs stay. Whether the page changed."""
    html = page.read_text(encoding="utf-8")
    up = "../" * (len(page.relative_to(site).parts) - 1)
    images = site / "static" / "images"

    def tag(match: re.Match[str]) -> str:
        text = match.group(0)
        url = _URL.search(text)
        if url is None:
            return text
        name = url.group(3).split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]
        if name in FILES:
            local = f"{up}{VENDOR.as_posix()}/{FILES[name]}"
        elif text[1:4].lower() == "img" and (images / name).is_file():
            local = f"{up}static/images/{name}"
        else:
            return text
        text = _URL.sub(lambda m: f"{m.group(1)}{m.group(2)}{local}{m.group(2)}", text, count=1)
        return _CHECKS.sub("", text)

    out = _TAG.sub(tag, html)
    if out == html:
        return False
    page.write_text(out, encoding="utf-8")
    return True


def localize_site(site: Path, source: Path | None = None) -> int:
    """Serve the assets from ``site`` itself: copy :func:`vendor_files` under
    :data:`VENDOR` and rewrite every page still loading them from a CDN; how many pages
    changed. Without the assets (setup not run), nothing changes and a warning says how to
    fetch them."""
    src = source or assets_dir()
    files = vendor_files(src)
    if not files:
        log.warning(
            "Data Docs assets missing from %s: pages load their CSS and scripts from the "
            "internet; run `bash infra/data_docs_assets.sh` (setup does) or set $%s",
            src,
            ASSETS_ENV,
        )
        return 0
    _copy_vendor(site, files, src)
    changed = 0
    for page in site.rglob("*.html"):
        if VENDOR in page.relative_to(site).parents:
            continue
        changed += localize_page(page, site)
    return changed
