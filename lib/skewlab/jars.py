"""Where the JVM jars fetched by ``infra/setup.sh`` are: one folder per jar set.

``infra/maven/<name>/pom.xml`` lists each set; setup copies it from Maven Central into
``<repo>/.jars/<name>``: ``broker`` (Apache Kafka, run by :mod:`skewlab.services.broker`)
and ``spark`` (Spark's Kafka connector and delta-spark, given to the Spark session as
``spark.jars`` by :mod:`skewlab.spark.session`). ``$SKEWLAB_JARS`` names another folder
holding the same sets (an installed package has no repository beside it).
"""

from __future__ import annotations

from pathlib import Path

from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError

JARS_ENV = "SKEWLAB_JARS"
"""A folder with one sub-folder of jars per set, instead of ``<repo>/.jars``."""


def jars_root() -> Path:
    """``$SKEWLAB_JARS``, else ``.jars`` of the repository this package sits in."""
    override = env_settings().jars
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / ".jars"


def jar_dir(name: str) -> Path:
    """The folder of jar set ``name``; :class:`ConfigError` (one line) when it is missing."""
    folder = jars_root() / name
    if not folder.is_dir() or not any(folder.glob("*.jar")):
        raise ConfigError(
            f"the {name} jars are missing from {folder}: run `bash infra/setup.sh` "
            f"(it fetches them with Maven), or point ${JARS_ENV} at a folder holding {name}/"
        )
    return folder


def jar_files(name: str) -> list[Path]:
    """Every jar of set ``name``, sorted by file name."""
    return sorted(jar_dir(name).glob("*.jar"))
