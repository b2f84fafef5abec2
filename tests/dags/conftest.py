"""Airflow for the DAG tests: a throwaway ``AIRFLOW_HOME`` set before Airflow is imported.

Importing ``airflow`` reads (and creates) ``$AIRFLOW_HOME/airflow.cfg`` once per
process, so the test modules import Airflow only inside tests, after the
``airflow_env`` fixture has pointed it at a temporary directory.

Fixtures:

- ``airflow_env`` (session): ``AIRFLOW_HOME`` in a tmp dir, this repo's ``dags/``
  as the dags folder, examples off; no database (enough for a ``DagBag`` import).
- ``airflow_db`` (session): the same plus ``airflow db migrate`` (SQLite, ~6 s),
  needed by ``dag.test()``.
- ``dagbag``: the ``DagBag`` of ``dags/`` (parsed once per session).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DAGS_DIR = Path(__file__).resolve().parents[2] / "dags"
MIGRATE_TIMEOUT_S = 120


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point Airflow at a temporary home (must run before the first ``import airflow``)."""
    if "airflow" in sys.modules:
        home = Path(os.environ.get("AIRFLOW_HOME", ""))
        if not str(home).startswith(str(tmp_path_factory.getbasetemp())):
            pytest.fail(f"airflow was imported before the test fixture (AIRFLOW_HOME={home})")
    home = tmp_path_factory.mktemp("airflow-home")
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_DIR),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        yield home


@pytest.fixture(scope="session")
def airflow_db(airflow_env: Path) -> Path:
    """Migrate the SQLite metadata DB of ``airflow_env`` (``airflow db migrate``)."""
    airflow = Path(sys.executable).with_name("airflow")
    done = subprocess.run(
        [str(airflow), "db", "migrate"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=MIGRATE_TIMEOUT_S,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"airflow db migrate failed ({done.returncode}): {done.stderr[-2000:]}")
    return airflow_env


@pytest.fixture(scope="session")
def dagbag(airflow_env: Path) -> Any:
    """All DAGs of ``dags/``, parsed like the dag processor does (no DB needed)."""
    from airflow.dag_processing.dagbag import DagBag

    return DagBag(dag_folder=str(DAGS_DIR))
