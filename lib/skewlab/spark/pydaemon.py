"""Spark's Python worker daemon, importing pyspark from site-packages, not pyspark.zip.

Spark puts ``pyspark.zip`` and the py4j zip first on its Python workers' path. Python
compiles modules imported from a zip on every start (no ``.pyc`` cache), and every
task's ``importlib.invalidate_caches()`` re-reads both zips' directories: measured
here, 2.0 s to import the worker modules from the zip vs 0.5 s from site-packages, and
~170 ms per task for the cache invalidation (docs/throughput.md). When the installed
``pyspark`` is the one Spark runs (same version), this module drops the zips from
``sys.path`` and runs ``pyspark.daemon``, whose forked workers inherit the path.
Nothing else is imported before Spark's daemon reports its port: the JVM gives a
new daemon 10 s to do so (preloading pandas / pyarrow here made it miss that on a
loaded machine).
Selected by ``spark.python.daemon.module`` (:func:`skewlab.spark.session.spark_session`).
"""

from __future__ import annotations

import importlib.util
import os
import sys


def _is_spark_zip(entry: str) -> bool:
    name = os.path.basename(entry)
    return name == "pyspark.zip" or (name.startswith("py4j-") and name.endswith(".zip"))


def _under_spark_zip(key: str) -> bool:
    """A path-importer cache key inside one of Spark's zips (the zip or a folder in it)."""
    parts = key.replace(os.sep, "/").split("/")
    return any(_is_spark_zip(p) for p in parts)


def strip_spark_zips(path: list[str]) -> list[str]:
    """``path`` without Spark's ``pyspark.zip`` / ``py4j-*.zip`` entries."""
    return [p for p in path if not _is_spark_zip(p)]


def main() -> None:
    """Drop the zips if site-packages has pyspark and py4j, then run Spark's daemon."""
    stripped = strip_spark_zips(sys.path)
    saved = sys.path[:]
    sys.path[:] = stripped
    if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("py4j") is None:
        sys.path[:] = saved
    for entry in list(sys.path_importer_cache):
        if _under_spark_zip(entry):
            del sys.path_importer_cache[entry]
    from pyspark import daemon

    daemon.manager()


if __name__ == "__main__":
    main()
