"""``skewlab cluster up|down|status``: a real cluster on this machine, on loopback.

``up`` starts (or reuses) PostgreSQL, the Kafka broker, a Spark standalone master and two
workers, an MLflow server and Airflow (LocalExecutor on PostgreSQL), each polled for
readiness (:class:`~skewlab.services.cluster.Cluster`), then prints every URL and the
settings to export so ``skewlab run`` and the DAGs use it. PostgreSQL missing: ``up`` runs
``infra/postgres.sh`` (apt-get) first. ``status`` shows each component up or down; ``down``
stops them all. What ran and what was measured: docs/beyond-one-machine.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
from pathlib import Path

from skewlab.commands.airflow import plan
from skewlab.errors import SkewlabError
from skewlab.report.table import format_table
from skewlab.services.cluster import AirflowLaunch, Cluster, environment
from skewlab.services.datadir import resolve_home
from skewlab.services.postgres import Postgres, pg_bin_dir
from skewlab.services.process import BinaryNotFoundError

HELP = "start (up), stop (down) or show (status) a Spark/Kafka/MLflow/Airflow cluster on loopback"

PASSWORD_FILE = "simple_auth_manager_passwords.json.generated"
INSTALL_SCRIPT = Path(__file__).resolve().parents[3] / "infra" / "postgres.sh"

LABELS = {
    "postgres": "PostgreSQL (Airflow's DB)",
    "broker": "Kafka bootstrap",
    "spark-master": "Spark master",
    "mlflow-server": "MLflow tracking",
    "airflow": "Airflow UI / API",
}


def configure(parser: argparse.ArgumentParser) -> None:
    """``action`` (up, down, status) and ``--home``."""
    parser.add_argument(
        "action",
        nargs="?",
        default="status",
        choices=("up", "down", "status"),
        help="what to do (default: status)",
    )
    parser.add_argument(
        "--home", default=None, help="data directory (default: $SKEWLAB_HOME, else ./.skewlab)"
    )


def ensure_postgres() -> None:
    """Install Debian's PostgreSQL with ``infra/postgres.sh`` if it is missing."""
    try:
        pg_bin_dir()
        return
    except BinaryNotFoundError:
        pass
    if shutil.which("apt-get") is None:
        raise SkewlabError(
            "PostgreSQL is not installed and apt-get is not available: install PostgreSQL "
            "(server binaries under /usr/lib/postgresql/N/bin) and run again"
        )
    done = subprocess.run(["bash", str(INSTALL_SCRIPT)], check=False)
    if done.returncode != 0:
        raise SkewlabError(
            f"installing PostgreSQL failed: bash {INSTALL_SCRIPT} exited {done.returncode}"
        )


def airflow_launch(cluster: Cluster, settings: dict[str, str], port: int) -> AirflowLaunch:
    """Airflow standalone as ``skewlab airflow`` plans it, in ``HOME/cluster/airflow``, with
    the LocalExecutor on the cluster's PostgreSQL and the cluster settings in its env."""
    p = plan(home=str(cluster.directory), port=port)
    p.prepare()
    env = p.child_env(os.environ)
    env.update(settings)
    env["AIRFLOW__CORE__EXECUTOR"] = "LocalExecutor"
    env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] = Postgres(cluster.datadir).sqlalchemy_url("airflow")
    return AirflowLaunch(argv=p.argv, env=env, airflow_home=p.airflow_home, port=port)


def up(cluster: Cluster) -> int:
    """Start everything; print each URL, the start-up seconds and the settings to export."""
    ensure_postgres()
    started = cluster.up()
    settings = environment(started.endpoints, cluster.datadir.root)
    port = cluster.airflow_port()
    airflow_s = cluster.start_airflow(airflow_launch(cluster, settings, port))
    ports = cluster.ports()
    rows = []
    for name, url in started.endpoints.items():
        label = LABELS.get(name, name)
        took = "running" if name in started.reused else f"{started.seconds[name]:.1f}"
        rows.append([label, url, took])
        if name == "spark-master":
            rows.append(["Spark master UI", f"http://127.0.0.1:{ports['spark-master-ui']}", ""])
    took = "running" if airflow_s is None else f"{airflow_s:.1f}"
    rows.append([LABELS["airflow"], f"http://127.0.0.1:{port}", took])
    print(format_table(["component", "url", "ready in s"], rows, align="left"))
    print("\n# point skewlab run and the DAGs at the cluster:")
    for key, value in settings.items():
        print(f"export {key}={shlex.quote(value)}")
    login = cluster.airflow_home / PASSWORD_FILE
    print(f"\n# Airflow login: user admin, password in {login}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch ``up`` / ``down`` / ``status`` for the data dir; 0, or 1 if a part is down."""
    home = resolve_home(args.home)
    cluster = Cluster(home)
    if args.action == "up":
        return up(cluster)
    if args.action == "down":
        for name, was_running in cluster.down():
            print(f"{name}: {'stopped' if was_running else 'was not running'}")
        return 0
    rows = [
        [c.name, "up" if c.up else (c.detail or "down"), c.url, str(c.pid or "-")]
        for c in cluster.status()
    ]
    print(f"data dir: {home}")
    print(format_table(["component", "state", "url", "pid"], rows, align="left"))
    return 0 if all(r[1] == "up" for r in rows) else 1
