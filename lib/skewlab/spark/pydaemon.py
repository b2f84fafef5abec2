"""Spark's Python worker daemon, importing pyspark from site-packages, not pyspark.zip.

Spark puts ``pyspark.zip``, the py4j zip and its ``spark-core`` jar on its Python workers'
path. Python compiles modules imported from a zip on every start (no ``.pyc`` cache), and
every task's ``importlib.invalidate_caches()`` re-reads each zip's and jar's directory:
measured here, 2.0 s to import the worker modules from the zip vs 0.5 s from
site-packages, ~170 ms per task for the zips (docs/throughput.md), ~36 ms for the jar
(docs/real-stack.md). When the installed ``pyspark`` is the one Spark runs (same version),
this module drops them from ``sys.path`` and runs ``pyspark.daemon``, whose forked workers
inherit the path.
Nothing else is imported before Spark's daemon reports its port: the JVM gives a new
daemon 10 s to do so (preloading pandas / pyarrow first made it miss that on a loaded
machine); modules to ``preload`` come after it (:class:`PreloadOnFirstWait`). A forked
worker freezes what survives each task (:func:`frozen_after`). Selected by
``spark.python.daemon.module`` (:func:`skewlab.spark.session.spark_session`).
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import os
import select
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _is_spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    return (
        name == "pyspark.zip"
        or (name.startswith("py4j-") and name.endswith(".zip"))
        or (name.startswith("spark-core_") and name.endswith(".jar"))
    )


def _under_spark_zip(key: str) -> bool:
    """A path-importer cache key inside one of Spark's zips (the zip or a folder in it)."""
    parts = key.replace(os.sep, "/").split("/")
    return any(_is_spark_zip(p) for p in parts)


def strip_spark_zips(path: list[str]) -> list[str]:
    """``path`` without Spark's ``pyspark.zip`` / ``py4j-*.zip`` / ``spark-core_*.jar``
    entries."""
    return [p for p in path if not _is_spark_zip(p)]


def spark_namespaces(modules: dict[str, Any]) -> list[str]:
    """Names of the namespace packages in ``modules`` found only in Spark's zips or jar
    (``org``: ``copy`` and ``pickle`` look for Jython's ``org.python`` at import); kept,
    each later import under them would bring the jar's importer back."""
    names = []
    for name, module in modules.items():
        where = list(getattr(module, "__path__", None) or ())
        namespace = getattr(module, "__file__", None) is None
        if where and namespace and all(map(_under_spark_zip, where)):
            names.append(name)
    return names


def frozen_after(worker: Callable[..., Any]) -> Callable[..., Any]:
    """Spark's daemon ``worker`` (one task in a forked worker), then the task's garbage
    collected and what survives frozen (``gc.freeze``).

    A reused worker runs a full ``gc.collect()`` after every task, over every object its
    imports made (pyarrow, pandas, pyspark, skewlab: ~85,000, ~17 ms a task here,
    docs/real-stack.md session 31). Frozen, they are left out of that collection and of
    the automatic ones; a frozen object is still freed when its last reference goes.
    """

    def run(*args: Any) -> Any:
        code = worker(*args)  # an error escaping it ends the forked worker
        gc.collect()
        gc.freeze()
        return code

    return run


class PreloadOnFirstWait:
    """The ``select`` module as Spark's daemon loop sees it: its first ``select`` call, made
    once the daemon has reported its port to the JVM, imports ``modules`` first (no deadline
    is running then), then freezes what they made (``gc.freeze``: a forked worker's
    collections skip them, and leave their pages shared). A module that fails to import is
    named on stderr and skipped: the forked worker imports it again and fails there, with
    the task."""

    error = select.error

    def __init__(self, modules: Sequence[str]) -> None:
        self.pending = list(modules)

    def select(self, *args: Any) -> Any:
        """``select.select(*args)``, the pending imports first."""
        if self.pending:
            for name in self.pending:
                try:
                    importlib.import_module(name)
                except Exception as exc:
                    print(f"skewlab daemon: preloading {name} failed: {exc!r}", file=sys.stderr)
            self.pending = []
            gc.collect()
            gc.freeze()
        return select.select(*args)


def main(preload: Sequence[str] = ()) -> None:
    """Drop the zips (and the namespace packages found only in them) if site-packages has
    pyspark and py4j, then run Spark's daemon, its workers freezing what survives each task
    (:func:`frozen_after`), importing ``preload`` once its port is reported
    (:class:`PreloadOnFirstWait`)."""
    stripped = strip_spark_zips(sys.path)
    saved = sys.path[:]
    sys.path[:] = stripped
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("py4j") is None:
        sys.path[:] = saved
    else:
        for name in spark_namespaces(sys.modules):
            del sys.modules[name]
    for entry in list(sys.path_importer_cache):
        if _under_spark_zip(entry):
            del sys.path_importer_cache[entry]
    from pyspark import daemon

    daemon.worker = frozen_after(daemon.worker)
    if preload:
        daemon.select = PreloadOnFirstWait(preload)  # type: ignore[assignment]
    daemon.manager()


if __name__ == "__main__":
    main()
