"""The cluster's pure parts: port choice and records, command lines, settings, probes' parsing.

The processes themselves run in tests/integration/cluster/test_cluster.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewlab.services.cluster import (
    CLUSTER_DIR,
    PORTS_FILE,
    PREFERRED,
    Cluster,
    airflow_healthy,
    choose_port,
    environment,
)
from skewlab.services.mlflow_server import MlflowServer
from skewlab.services.postgres import Postgres, as_os_user, pg_bin_dir, sql_literal
from skewlab.services.process import BinaryNotFoundError
from skewlab.services.spark_standalone import (
    MASTER_CLASS,
    NODE_CORES,
    NODE_MEMORY,
    ROUTE_CORES,
    WORKER_CLASS,
    WORKERS_APP_CORES,
    WORKERS_APP_EXECUTOR_CORES,
    SparkMaster,
    SparkWorker,
    alive_workers,
    daemon_command,
    scala_version,
    spark_defaults,
)

# ---------------------------------------------------------------- ports


def test_choose_port_prefers_the_recorded_then_the_standard_then_a_free_one() -> None:
    free = {7077, 40000}
    assert choose_port(40000, 7077, free.__contains__, lambda: 1) == 40000
    assert choose_port(41000, 7077, free.__contains__, lambda: 1) == 7077
    assert choose_port(None, 7077, free.__contains__, lambda: 1) == 7077
    assert choose_port(41000, 8080, free.__contains__, lambda: 45678) == 45678
    assert choose_port(None, None, free.__contains__, lambda: 45678) == 45678


def test_standard_ports_do_not_collide() -> None:
    assert len(set(PREFERRED.values())) == len(PREFERRED)
    assert PREFERRED["spark-master"] == 7077 and PREFERRED["spark-master-ui"] == 8080


def test_ports_are_recorded_in_the_data_dir_and_read_back(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    assert cluster.ports() == {}
    ports: dict[str, int] = {}
    port = cluster._port("mlflow-server", ports)
    recorded = json.loads((tmp_path / CLUSTER_DIR / PORTS_FILE).read_text())
    assert recorded == {"mlflow-server": port} == cluster.ports()
    (tmp_path / CLUSTER_DIR / PORTS_FILE).write_text("not json")
    assert cluster.ports() == {}


def test_workers_are_built_against_the_recorded_master(tmp_path: Path) -> None:
    cluster = Cluster(tmp_path)
    (tmp_path / CLUSTER_DIR / PORTS_FILE).write_text(
        json.dumps({"spark-master": 17077, "spark-master-ui": 18080, "spark-worker-2-ui": 18082})
    )
    names = [s.name for s in cluster.services()]
    assert names == [
        "postgres",
        "broker",
        "spark-master",
        "spark-worker-1",
        "spark-worker-2",
        "mlflow-server",
    ]
    workers = [s for s in cluster.services() if isinstance(s, SparkWorker)]
    assert {w.master for w in workers} == {"spark://127.0.0.1:17077"}
    assert {w.master_ui_port for w in workers} == {18080}
    assert [w.ui_port for w in workers] == [None, 18082]


# ---------------------------------------------------------------- settings


def test_environment_names_every_endpoint(tmp_path: Path) -> None:
    endpoints = {
        "spark-master": "spark://127.0.0.1:7077",
        "broker": "127.0.0.1:9092",
        "mlflow-server": "http://127.0.0.1:5000",
    }
    env = environment(endpoints, tmp_path)
    assert env["SKEWLAB_SPARK_MASTER"] == "spark://127.0.0.1:7077"
    assert env["SKEWLAB_KAFKA_BOOTSTRAP"] == "127.0.0.1:9092"
    assert env["MLFLOW_TRACKING_URI"] == "http://127.0.0.1:5000"
    assert env["SPARK_LOCAL_IP"] == "127.0.0.1"
    assert env["SPARK_CONF_DIR"] == str(tmp_path / CLUSTER_DIR / "spark-conf")
    assert env["SKEWLAB_HOME"] == str(tmp_path)


def test_spark_defaults_put_the_jars_on_both_class_paths() -> None:
    text = spark_defaults([Path("/j/a.jar"), Path("/j/b.jar")])
    lines = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert lines == [
        "spark.driver.extraClassPath /j/a.jar:/j/b.jar",
        "spark.executor.extraClassPath /j/a.jar:/j/b.jar",
        f"spark.cores.max {ROUTE_CORES}",
        "spark.executor.cores 1",
    ]


def test_one_node_holds_the_route_job_and_every_worker_task() -> None:
    assert NODE_CORES >= ROUTE_CORES + WORKERS_APP_CORES
    assert WORKERS_APP_CORES % WORKERS_APP_EXECUTOR_CORES == 0
    assert WORKERS_APP_CORES // WORKERS_APP_EXECUTOR_CORES >= 2  # one executor per node


# ---------------------------------------------------------------- spark daemons


def test_daemon_command_runs_java_from_the_spark_jars(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "spark-core_2.13-4.0.1.jar").touch()
    assert scala_version(tmp_path) == "2.13"
    argv = daemon_command(Path("/usr/bin/java"), tmp_path, MASTER_CLASS, ["--port", "1"], "H")
    assert argv[:4] == [
        "env",
        f"SPARK_HOME={tmp_path}",
        "SPARK_LOCAL_IP=127.0.0.1",
        "SPARK_SCALA_VERSION=2.13",
    ]
    assert argv[4:7] == ["/usr/bin/java", "-cp", f"{tmp_path / 'jars'}/*"]
    assert "-Dskewlab.spark=H" in argv
    assert argv[-3:] == [MASTER_CLASS, "--port", "1"]


def test_scala_version_without_spark_core_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "jars").mkdir()
    with pytest.raises(BinaryNotFoundError, match="spark-core"):
        scala_version(tmp_path)


def test_master_and_worker_command_lines(tmp_path: Path) -> None:
    master = SparkMaster(tmp_path, ui_port=18080)
    master.prepare(Path("/usr/bin/java"), "127.0.0.1", 17077)
    argv = master.command(Path("/usr/bin/java"), "127.0.0.1", 17077)
    i = argv.index(MASTER_CLASS)
    assert argv[i + 1 :] == ["--host", "127.0.0.1", "--port", "17077", "--webui-port", "18080"]
    assert master.url("127.0.0.1", 17077) == "spark://127.0.0.1:17077"

    worker = SparkWorker(tmp_path, 2, "spark://127.0.0.1:17077", 18080, ui_port=18082)
    worker.prepare(Path("/usr/bin/java"), "127.0.0.1", 30000)
    argv = worker.command(Path("/usr/bin/java"), "127.0.0.1", 30000)
    rest = argv[argv.index(WORKER_CLASS) + 1 :]
    assert rest[0] == "spark://127.0.0.1:17077"
    flags = dict(zip(rest[1::2], rest[2::2], strict=True))
    assert flags == {
        "--host": "127.0.0.1",
        "--port": "30000",
        "--webui-port": "18082",
        "--cores": str(NODE_CORES),
        "--memory": NODE_MEMORY,
        "--work-dir": str(tmp_path / "spark-worker-2" / "work"),
    }
    assert worker.name == "spark-worker-2"
    assert worker.url("127.0.0.1", 30000) == "http://127.0.0.1:18082"


def test_alive_workers_skips_dead_ones() -> None:
    status = {
        "workers": [
            {"host": "127.0.0.1", "port": 1, "state": "ALIVE"},
            {"host": "127.0.0.1", "port": 2, "state": "DEAD"},
        ]
    }
    assert [w["port"] for w in alive_workers(status)] == [1]
    assert alive_workers(None) == []


# ---------------------------------------------------------------- mlflow, postgres, airflow


def test_mlflow_server_command_keeps_store_and_artifacts_in_the_data_dir(tmp_path: Path) -> None:
    server = MlflowServer(tmp_path)
    argv = server.command(Path("/venv/bin/mlflow"), "127.0.0.1", 5000)
    flags = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert argv[:2] == ["/venv/bin/mlflow", "server"]
    assert flags["--backend-store-uri"] == f"sqlite:///{tmp_path / 'mlflow-server' / 'mlflow.db'}"
    assert flags["--artifacts-destination"] == str(tmp_path / "mlflow-server" / "artifacts")
    assert (flags["--host"], flags["--port"]) == ("127.0.0.1", "5000")
    assert server.url("127.0.0.1", 5000) == "http://127.0.0.1:5000"


def test_postgres_runs_as_the_postgres_user_when_root(tmp_path: Path) -> None:
    assert as_os_user(["initdb"], root=True) == ["runuser", "-u", "postgres", "--", "initdb"]
    assert as_os_user(["initdb"], root=False) == ["initdb"]
    pg = Postgres(tmp_path)
    argv = pg.command(Path("/usr/lib/postgresql/15/bin/postgres"), "127.0.0.1", 5432)
    tail = argv[argv.index("/usr/lib/postgresql/15/bin/postgres") + 1 :]
    assert tail == ["-D", str(pg.data), "-h", "127.0.0.1", "-p", "5432", "-k", str(pg.socket_dir)]


def test_pg_bin_dir_picks_the_newest_version_or_says_how_to_install(tmp_path: Path) -> None:
    with pytest.raises(BinaryNotFoundError, match=r"infra/postgres\.sh"):
        pg_bin_dir(tmp_path)
    for version in ("9", "15", "13"):
        (tmp_path / version / "bin").mkdir(parents=True)
        (tmp_path / version / "bin" / "postgres").touch()
    assert pg_bin_dir(tmp_path) == tmp_path / "15" / "bin"


def test_postgres_password_is_made_once_and_private(tmp_path: Path) -> None:
    pg = Postgres(tmp_path)
    first = pg.password()
    assert first and pg.password() == first
    assert (pg.directory / "skewlab.password").stat().st_mode & 0o777 == 0o600
    assert sql_literal("it's") == "'it''s'"


def test_airflow_is_healthy_only_with_db_and_scheduler() -> None:
    ok = {"metadatabase": {"status": "healthy"}, "scheduler": {"status": "healthy"}}
    assert airflow_healthy(ok)
    assert not airflow_healthy({**ok, "scheduler": {"status": "unhealthy"}})
    assert not airflow_healthy({"metadatabase": {"status": "healthy"}})
    assert not airflow_healthy(None)
