"""Every ``SKEWLAB_*`` environment variable (name, type, default, meaning), read in one place.

:data:`VARIABLES` names them all (docs/settings.md is the same table); :func:`env_settings`
reads the environment, or a given mapping, into one frozen :class:`EnvSettings`. An unset or
blank variable takes its default; a flag is off only as ``0``, ``false``, ``no`` or ``off``.
Modules read these variables through :func:`env_settings` only, never ``os.environ``
(tests/unit/test_envsettings.py greps lib/ for a stray read). Only the standard library is
imported here, so every layer may use it; it is read anew on each call (tests set variables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["VARIABLES", "EnvSettings", "Variable", "env_settings", "variable"]

_OFF = frozenset(("0", "false", "no", "off"))


@dataclass(frozen=True)
class Variable:
    """One variable: ``kind`` is ``text`` (a string), ``path`` (a file-system path or URI)
    or ``flag`` (a bool); ``default`` is the value when unset, as the docs say it;
    ``internal``: skewlab sets it for its own child processes, a user does not."""

    name: str
    field: str
    kind: str
    default: str
    meaning: str
    internal: bool = False


VARIABLES: tuple[Variable, ...] = (
    Variable("SKEWLAB_HOME", "home", "path", "./.skewlab",
             "the data directory of the services, runs and Data Docs (`--home` wins)"),
    Variable("SKEWLAB_DELTA_ROOT", "delta_root", "path", "<data dir>/delta",
             "where the runs' Delta tables live (a path or s3://...)"),
    Variable("SKEWLAB_KAFKA_BOOTSTRAP", "kafka_bootstrap", "text", "the embedded broker",
             "Kafka bootstrap servers HOST:PORT (`--bootstrap` wins)"),
    Variable("SKEWLAB_SPARK_MASTER", "spark_master", "text", "local[2]",
             "the route job's Spark master (`spark://...` for a cluster)"),
    Variable("SKEWLAB_SPARK_SUBMIT", "spark_submit", "flag", "off",
             "launch the route job by spark-submit even on a local master"),
    Variable("SKEWLAB_SPARK_UI", "spark_ui", "flag", "on",
             "the route job's Spark UI; 0 switches it off"),
    Variable("SKEWLAB_ROUTE_HOST", "route_host", "path", "<data dir>/route-host (skewlab run)",
             "a warm route host's directory: runs start their route query there; off: "
             "each run starts its own route job"),
    Variable("SKEWLAB_SPARK_JAVA_OPTS", "spark_java_opts", "text",
             "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m",
             "the Spark driver JVM's options"),
    Variable("SKEWLAB_SPARK_DRIVER_HOST", "spark_driver_host", "text", "127.0.0.1 (local)",
             "the address executors reach the driver at (a cluster master)"),
    Variable("SKEWLAB_SPARK_BIND_ADDRESS", "spark_bind_address", "text", "the driver host",
             "the address the Spark driver binds"),
    Variable("SKEWLAB_WORKER_ENGINE", "worker_engine", "text", "spark",
             "`spark`: workers are tasks of a Spark app; `local`: local processes"),
    Variable("SKEWLAB_WARM_SPARES", "warm_spares", "flag", "on",
             "a warm spare worker per scale-out; 0: replacements start cold"),
    Variable("SKEWLAB_JARS", "jars", "path", "<repository>/.jars",
             "the folder of the Kafka and Delta jars Spark loads"),
    Variable("SKEWLAB_ASSETS", "assets", "path", "<repository>/.assets",
             "the offline Data Docs assets (`<it>/data-docs`)"),
    Variable("SKEWLAB_BROKER_JVM_OPTS", "broker_jvm_opts", "text", "(none)",
             "extra JVM options of the embedded Kafka broker"),
    Variable("SKEWLAB_ARTIFACT_LOCATION", "artifact_location", "path", "MLflow's default",
             "the MLflow experiment's artifact location (with MLFLOW_TRACKING_URI)"),
    Variable("SKEWLAB_CONTROL_SCHEDULE", "control_schedule", "text", "(manual runs only)",
             "the cron schedule of the control DAG, e.g. `*/5 * * * *`"),
    Variable("SKEWLAB_DEBUG", "debug", "flag", "off",
             "show the full traceback of an unexpected CLI error (as `--debug`)"),
    Variable("SKEWLAB_CRASH", "crash", "text", "(none)",
             "crash points to arm, `name[@n],...` (tests; docs/crash-matrix.md)"),
    Variable("SKEWLAB_CRASH_DIR", "crash_dir", "path", "(none)",
             "with SKEWLAB_CRASH: each point fires once per this directory"),
    Variable("SKEWLAB_PROC", "proc", "path", "(none)",
             "tags a run's background process with its log (to find and stop it)", True),
    Variable("SKEWLAB_AIRFLOW", "airflow", "path", "(none)",
             "the real airflow program behind `skewlab airflow`'s shim", True),
)  # fmt: skip
"""Every ``SKEWLAB_*`` variable, in the order docs/settings.md lists them."""

_BY_NAME = {v.name: v for v in VARIABLES}


@dataclass(frozen=True)
class EnvSettings:
    """The ``SKEWLAB_*`` variables' values: ``None`` for an unset text or path, a flag's
    default for an unset flag (its :class:`Variable` says which)."""

    home: str | None = None
    delta_root: str | None = None
    kafka_bootstrap: str | None = None
    spark_master: str | None = None
    spark_submit: bool = False
    spark_ui: bool = True
    route_host: str | None = None
    spark_java_opts: str | None = None
    spark_driver_host: str | None = None
    spark_bind_address: str | None = None
    worker_engine: str | None = None
    warm_spares: bool = True
    jars: str | None = None
    assets: str | None = None
    broker_jvm_opts: str | None = None
    artifact_location: str | None = None
    control_schedule: str | None = None
    debug: bool = False
    crash: str | None = None
    crash_dir: str | None = None
    proc: str | None = None
    airflow: str | None = None

    @property
    def route_host_dir(self) -> str | None:
        """The route host's directory ``route_host`` names; None when unset or off."""
        if self.route_host is None or self.route_host.lower() in _OFF:
            return None
        return self.route_host


_DEFAULTS = {f.name: f.default for f in fields(EnvSettings)}


def variable(name: str) -> Variable:
    """The :class:`Variable` called ``name`` (``KeyError`` for an unknown one)."""
    return _BY_NAME[name]


def env_settings(env: Mapping[str, str] | None = None) -> EnvSettings:
    """Read every ``SKEWLAB_*`` variable from ``env`` (default: this process's environment)."""
    source = os.environ if env is None else env
    values: dict[str, Any] = {}
    for v in VARIABLES:
        raw = source.get(v.name, "").strip()
        if not raw:
            continue
        values[v.field] = raw.lower() not in _OFF if v.kind == "flag" else raw
    return EnvSettings(**{**_DEFAULTS, **values})
