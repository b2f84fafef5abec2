"""The Spark driver JVM's class-data archive (AppCDS): where it is and the options that map it.

A Spark driver JVM loads ~10k classes from pyspark's jars at start; mapped from an archive
they cost about 5 s less per session start and first job on two busy cores (docs/testing.md,
"Session 28"). ``infra/setup.sh`` writes the archive (:mod:`skewlab.spark.class_archive_dump`)
beside the connector jars; every driver JVM of the project (:mod:`skewlab.spark.session`, the
workers app) maps it with :func:`driver_java_options`. A JVM that cannot map it (another JDK,
other jars) runs without it, silently: ``-Xshare:auto``, the archive's log off.
"""

from __future__ import annotations

from pathlib import Path

from skewlab.jars import jars_root

ARCHIVE = "spark-driver-classes-{version}.jsa"
"""The archive's file name for pyspark ``version``, in the ``spark`` jar set's folder (which
setup rewrites, archive gone, when the jars change)."""
MAPPED = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
"""With the archive: map it when it matches this JVM and class path, else run without it."""


def archive_path() -> Path:
    """Where the archive of the installed pyspark is (whether or not it was written)."""
    from pyspark.version import __version__

    return jars_root() / "spark" / ARCHIVE.format(version=__version__)


def driver_java_options(base: str) -> str:
    """``base`` plus the options that map the archive, if there is one and ``base`` does not
    already choose class-data sharing itself."""
    archive = archive_path()
    if "Xshare" in base or "SharedArchiveFile" in base or not archive.is_file():
        return base
    return f"{base} -XX:SharedArchiveFile={archive} {MAPPED}".strip()
