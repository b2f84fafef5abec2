"""Where Great Expectations (1.x) runs: in memory, or a file-backed project with Data Docs.

Both runners validate one :class:`~skewlab.quality.suites.FrameCheck` at a time and return
GX's ``ExpectationSuiteValidationResult`` plus the Data Docs page of that validation (``None``
in memory): :class:`Ephemeral` (one per process) and :class:`Project` (``<home>/gx/``, its
steps in its docstring). Why Data Docs are built once per run, the lock, and the offline
index page: docs/quality.md, "Where GX runs".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import shutil
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from filelock import FileLock

if TYPE_CHECKING:
    from skewlab.quality.suites import Expect, FrameCheck

log = logging.getLogger(__name__)

SITE = "skewlab"
"""The Data Docs site of the project (``gx/uncommitted/data_docs/skewlab/``)."""
GX_DIR = "gx"
LOCK_FILE = "gx.lock"
SOURCE = "skewlab"
"""The pandas data source; one dataframe asset per frame name."""

_QUIET = ("great_expectations", "great_expectations.core", "posthog")


def _gx() -> Any:
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
    import great_expectations as gx

    return gx


def _quiet_progress(context: Any) -> None:
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)


def _suite(check: FrameCheck, expects: Sequence[Expect], name: str) -> Any:
    gx = _gx()
    import great_expectations.expectations as gxe

    suite = gx.ExpectationSuite(name=name)
    for e in expects:
        suite.add_expectation(getattr(gxe, e.kind)(**e.kwargs, description=e.check))
    return suite


def result_format(check: FrameCheck, max_rows: int) -> dict[str, Any]:
    """SUMMARY results quoting up to ``max_rows`` offending rows by their identifying columns."""
    return {
        "result_format": "SUMMARY",
        "partial_unexpected_count": max_rows,
        "unexpected_index_column_names": [c for c in check.index if c in check.frame.columns],
    }


class Ephemeral:
    """The process's in-memory GX context: one pandas source, one batch definition per frame."""

    def __init__(self) -> None:
        gx = _gx()
        self.context = gx.get_context(mode="ephemeral")
        _quiet_progress(self.context)
        self.source = self.context.data_sources.add_pandas(name=SOURCE)
        self.definitions: dict[str, Any] = {}
        self.lock = threading.Lock()

    def validate(
        self, check: FrameCheck, expects: Sequence[Expect], max_rows: int
    ) -> tuple[Any, Path | None]:
        """Validate ``check.frame`` against ``expects`` in memory; ``(GX result, None)``.

        ``max_rows`` offending rows are quoted per expectation; thread-safe (one lock).
        """
        suite = _suite(check, expects, check.name)
        with self.lock:
            definition = self.definitions.get(check.name)
            if definition is None:
                asset = self.source.add_dataframe_asset(name=check.name)
                definition = asset.add_batch_definition_whole_dataframe(f"{check.name}-whole")
                self.definitions[check.name] = definition
            batch = definition.get_batch(batch_parameters={"dataframe": check.frame})
            return batch.validate(suite, result_format=result_format(check, max_rows)), None


_EPHEMERAL: Ephemeral | None = None
_EPHEMERAL_LOCK = threading.Lock()


def ephemeral() -> Ephemeral:
    """The process's :class:`Ephemeral` context (made on first use)."""
    global _EPHEMERAL
    with _EPHEMERAL_LOCK:
        if _EPHEMERAL is None:
            _EPHEMERAL = Ephemeral()
        return _EPHEMERAL


def site_config() -> dict[str, Any]:
    """The ``skewlab`` Data Docs site: local files, the offline-capable index view."""
    return {
        "class_name": "SiteBuilder",
        "show_how_to_buttons": False,
        "store_backend": {
            "class_name": "TupleFilesystemStoreBackend",
            "base_directory": f"uncommitted/data_docs/{SITE}/",
        },
        "site_index_builder": {
            "class_name": "DefaultSiteIndexBuilder",
            "view": {"module_name": __name__, "class_name": "OfflineIndexView"},
        },
    }


def _file_path(url: str) -> Path:
    parsed = urlparse(url)
    return Path(unquote(parsed.path))


class Project:
    """The file-backed GX project of one data dir (``<home>/gx/``), reused by every run.

    Use it as ``with Project.open(home, run_id) as project: project.validate(...)``:
    the lock is held and the context loaded for the ``with`` block only. Per frame it keeps
    one expectation suite, validation definition and checkpoint, all named
    ``skewlab.<frame>``. Checking one run:

    1. per frame: the suite is replaced by this run's expectations
       (``suites.add_or_update``); the validation definition (frame asset x suite)
       and the checkpoint (that definition and the result format quoting offending
       rows by their identifying columns) are added or updated;
    2. per frame: ``checkpoint.run(batch_parameters={"dataframe": frame}, run_id=run)``
       validates and stores the result under ``gx/uncommitted/validations/``;
    3. once, when the run's frames are done (:meth:`publish`): ``build_data_docs``
       renders the run's validation pages, their suites' pages and the site index under
       ``gx/uncommitted/data_docs/skewlab/``.
    """

    def __init__(self, home: Path, run_id: str, context: Any, now: dt.datetime) -> None:
        from great_expectations.core.run_identifier import RunIdentifier

        self.home = home
        self.context = context
        self.run = RunIdentifier(run_name=run_id, run_time=now)
        self.built: list[Any] = []
        """Resource identifiers (validation results, suites) to render at :meth:`publish`."""

    @classmethod
    @contextlib.contextmanager
    def open(
        cls, home: str | Path, run_id: str, now: dt.datetime | None = None
    ) -> Iterator[Project]:
        """Lock ``<home>/gx.lock``, load (or create) ``<home>/gx/``, ensure the site exists;
        on leaving the block without an error, :meth:`publish` the run's Data Docs.

        ``now``: the validation time of the run (default: the current UTC time).
        """
        home = Path(home).resolve()
        home.mkdir(parents=True, exist_ok=True)
        with FileLock(home / LOCK_FILE, preserve_lock_file=True):
            gx = _gx()
            context = gx.get_context(mode="file", project_root_dir=str(home))
            _quiet_progress(context)
            sites = context.get_config().data_docs_sites or {}
            if SITE not in sites:
                context.add_data_docs_site(site_name=SITE, site_config=site_config())
            when = now or dt.datetime.now(dt.UTC)
            project = cls(home, run_id, context, when)
            yield project
            project.publish()

    @property
    def index(self) -> Path:
        """The site's ``index.html``."""
        return self.home / GX_DIR / "uncommitted" / "data_docs" / SITE / "index.html"

    def _definition(self, frame: str) -> Any:
        try:
            source = self.context.data_sources.get(SOURCE)
        except KeyError:
            source = self.context.data_sources.add_pandas(name=SOURCE)
        try:
            asset = source.get_asset(frame)
        except LookupError:
            asset = source.add_dataframe_asset(name=frame)
        try:
            return asset.get_batch_definition("whole")
        except KeyError:
            return asset.add_batch_definition_whole_dataframe("whole")

    def validate(
        self, check: FrameCheck, expects: Sequence[Expect], max_rows: int
    ) -> tuple[Any, Path | None]:
        """Steps 1-2 of the class doc for one frame; the result and its Data Docs page
        (written by :meth:`publish`)."""
        gx = _gx()
        from great_expectations.data_context.types.resource_identifiers import (
            ExpectationSuiteIdentifier,
        )

        name = f"{SOURCE}.{check.name}"
        suite = self.context.suites.add_or_update(_suite(check, expects, name))
        definition = self.context.validation_definitions.add_or_update(
            gx.ValidationDefinition(name=name, data=self._definition(check.name), suite=suite)
        )
        checkpoint = self.context.checkpoints.add_or_update(
            gx.Checkpoint(
                name=name,
                validation_definitions=[definition],
                result_format=result_format(check, max_rows),
            )
        )
        outcome = checkpoint.run(batch_parameters={"dataframe": check.frame}, run_id=self.run)
        ((key, result),) = outcome.run_results.items()
        self.built += [key, ExpectationSuiteIdentifier(name=name)]
        urls = self.context.get_docs_sites_urls(
            resource_identifier=key, site_names=[SITE], only_if_exists=False
        )
        page = _file_path(str(urls[0]["site_url"])) if urls else None
        return result, page

    def publish(self) -> None:
        """Step 3 of the class doc: render this run's pages and the index (once per run)."""
        if self.built:
            self.context.build_data_docs(site_names=[SITE], resource_identifiers=self.built)
            self.built = []
            from skewlab.quality.assets import localize_site

            localize_site(self.index.parent)  # its CSS and scripts from the site itself


def copy_site(
    index: Path, pages: Sequence[Path], dest: Path, extra: Sequence[Path | None] = ()
) -> list[Path]:
    """Copy the part of a Data Docs site one run needs into ``dest``, in the site's layout.

    That is ``index`` (the site's ``index.html``), the validation ``pages``, the
    page of each one's expectation suite, the site's styles and the CSS and scripts served
    from the site (:mod:`skewlab.quality.assets`), so the links between them still work.
    ``extra`` are more files of the site (the run's page). Returns the copied paths
    relative to the site root.
    """
    root = index.parent
    files = [Path(index.name)]
    for page in pages:
        rel = page.resolve().relative_to(root)
        files.append(rel)
        # validations/<suite path>/<run name>/<run time>/<batch>.html -> expectations/<suite>.html
        files.append(Path("expectations", *rel.parts[1:-3]).with_suffix(".html"))
    files += [p.relative_to(root) for p in sorted((root / "static" / "styles").glob("*"))]
    files += [p.relative_to(root) for p in sorted((root / "static" / "vendor").rglob("*"))]
    files += [p.resolve().relative_to(root.resolve()) for p in extra if p is not None]
    copied = [f for f in dict.fromkeys(files) if (root / f).is_file()]
    for rel in copied:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(root / rel, dest / rel)
    return copied


# ---------------------------------------------------------------------------- the index view

_STATIC_TABLE = """\
{% include "gx/bootstrap_table.j2" %}
{% set static_id = content_block_id ~ "-static-table" %}
{% set fields = content_block["table_columns"] | map(attribute="field") | list %}
{% set link_fields = ["run_time", "run_name"] if "run_name" in fields else fields[:1] %}
<style>
  .skewlab-static-table { border-collapse: collapse; margin: 0.5em 0; }
  .skewlab-static-table th, .skewlab-static-table td {
    padding: 0.2em 0.7em; border-bottom: 1px solid #ccc; text-align: left; }
  .skewlab-static-table .skewlab-failed { color: #b00020; font-weight: bold; }
</style>
<table id="{{ static_id }}" class="table table-sm skewlab-static-table">
  <thead><tr>
  {%- for column in content_block["table_columns"] %}
    <th>{{ column.get("title", column.get("field", "")) }}</th>
  {%- endfor %}
  </tr></thead>
  <tbody>
  {%- for row in content_block["table_data"] %}
    {%- set link = row.get("_table_row_link_path") %}
    <tr>
    {%- for column in content_block["table_columns"] %}
      {%- set cell = row.get(column.get("field"), "") | skewlab_cell %}
      <td>{% if link and column.get("field") in link_fields -%}
        <a href="{{ link }}">{{ cell }}</a>
      {%- else %}{{ cell }}{% endif %}
      {%- if column.get("field") == "validation_success" %}
        {%- set verdict = row.get("_validation_success_text", "") %}
        <span class="{{ 'skewlab-failed' if verdict == 'Failed' else '' }}">{{ verdict }}</span>
      {%- endif %}</td>
    {%- endfor %}
    </tr>
  {%- endfor %}
  </tbody>
</table>
<script>
  (function () {
    var drawn = window.jQuery && window.jQuery.fn && window.jQuery.fn.bootstrapTable;
    var table = document.getElementById("{{ static_id }}");
    if (drawn && table) { table.remove(); }
  })();
</script>
"""
"""GX's own table (drawn by bootstrap-table when its CDN scripts load), then the same rows
as plain HTML, removed again when bootstrap-table did draw them."""


def _cell(value: Any) -> Any:
    """A table cell: GX's rendered HTML snippets as markup, anything else escaped text."""
    from markupsafe import Markup, escape

    text = "" if value is None else str(value)
    return Markup(text) if text.lstrip().startswith("<") else escape(text)


def _index_view_class() -> type:
    from great_expectations.render.view import DefaultJinjaIndexPageView
    from jinja2 import ChoiceLoader, DictLoader, PrefixLoader

    class OfflineIndexView(DefaultJinjaIndexPageView):
        """GX's index page whose tables also list their rows without JavaScript from a CDN."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            stock = self.env.loader
            assert stock is not None
            self.env.loader = ChoiceLoader(
                [
                    DictLoader({"bootstrap_table.j2": _STATIC_TABLE}),
                    PrefixLoader({"gx": stock}),
                    stock,
                ]
            )
            self.env.filters["skewlab_cell"] = _cell

    return OfflineIndexView


def __getattr__(name: str) -> Any:
    """``OfflineIndexView`` is built on first access (GX is imported only when needed)."""
    if name == "OfflineIndexView":
        cls = _index_view_class()
        globals()[name] = cls
        return cls
    raise AttributeError(name)
