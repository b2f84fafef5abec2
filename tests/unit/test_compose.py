"""docker-compose.yml validated without an engine: parsed as YAML and checked service by service.

No Docker engine (nor the compose plugin) is installed by this project, so the
file is checked at the YAML level: the services the platform needs (Kafka in
KRaft mode, a Spark master and worker, Airflow 3's four components on
Postgres, MLflow on Postgres with an artifact volume), that every service
running this repository's code mounts it and receives the settings (bootstrap
servers, Spark master, Delta root, MLflow URI), and the file's own integrity
(dependencies, volumes, ports, mounted files). ``${VAR:-default}`` values are
resolved the way compose resolves them, so overriding a setting from the host
environment is tested too. The Airflow services' image is built from
``infra/docker/airflow.Dockerfile``, which is checked instruction by instruction:
Java 17 installed as root with ``JAVA_HOME`` set, the Airflow tag equal to the
``apache-airflow`` pin of ``requirements.txt``, the pinned stack and the package
installed as the airflow user. Nothing is built (no engine here).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
AIRFLOW_DOCKERFILE = "infra/docker/airflow.Dockerfile"

AIRFLOW_COMPONENTS = {
    "airflow-apiserver": "api-server",
    "airflow-scheduler": "scheduler",
    "airflow-dag-processor": "dag-processor",
    "airflow-triggerer": "triggerer",
}
AIRFLOW_SERVICES = ("airflow-init", *AIRFLOW_COMPONENTS)
SPARK_SERVICES = ("spark-master", "spark-worker")
CODE_SERVICES = (*SPARK_SERVICES, *AIRFLOW_SERVICES)
"""Services that run this repository's code (jobs, DAGs, library)."""

SETTINGS = {
    "SKEWLAB_KAFKA_BOOTSTRAP": "kafka:9092",
    "SKEWLAB_SPARK_MASTER": "spark://spark-master:7077",
    "SKEWLAB_DELTA_ROOT": "/data/skewlab/delta",
    "MLFLOW_TRACKING_URI": "http://mlflow:5000",
}
"""The settings every code service gets, with their defaults."""

_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` / ``${VAR:-default}`` resolved like compose does (unset or empty: default)."""
    return _VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def _env(service: Mapping[str, Any], host: Mapping[str, str] | None = None) -> dict[str, str]:
    raw = service.get("environment") or {}
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {str(k): interpolate(str(v), host or {}) for k, v in raw.items()}


def _command(service: Mapping[str, Any]) -> str:
    cmd = service.get("command", "")
    text = " ".join(cmd) if isinstance(cmd, list) else " ".join(str(cmd).split())
    return text.removesuffix('"')  # the closing quote of a ``bash -c "..."`` command


def _depends(service: Mapping[str, Any]) -> dict[str, str]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return dict.fromkeys(deps, "service_started")
    return {k: (v or {}).get("condition", "service_started") for k, v in deps.items()}


def _mounts(service: Mapping[str, Any]) -> dict[str, str]:
    """Container path -> source of each ``source:target[:mode]`` volume entry."""
    out = {}
    for entry in service.get("volumes") or []:
        source, target = str(entry).split(":")[:2]
        out[target] = source
    return out


def test_only_known_services(services: dict[str, Any]) -> None:
    assert set(services) == {
        "kafka",
        "postgres",
        "mlflow",
        "spark-master",
        "spark-worker",
        "airflow-init",
        *AIRFLOW_COMPONENTS,
    }
    assert not any("zookeeper" in name for name in services)


def test_kafka_is_a_single_kraft_node(services: dict[str, Any]) -> None:
    kafka = services["kafka"]
    env = _env(kafka)
    assert kafka["image"].startswith("apache/kafka:")
    assert set(env["KAFKA_PROCESS_ROLES"].split(",")) == {"broker", "controller"}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    assert "CONTROLLER://:9093" in env["KAFKA_LISTENERS"].split(",")
    assert "PLAINTEXT://kafka:9092" in env["KAFKA_ADVERTISED_LISTENERS"].split(",")
    for name in ("OFFSETS_TOPIC", "TRANSACTION_STATE_LOG"):
        assert env[f"KAFKA_{name}_REPLICATION_FACTOR"] == "1"
    assert "healthcheck" in kafka


def test_spark_master_and_worker(services: dict[str, Any]) -> None:
    master, worker = services["spark-master"], services["spark-worker"]
    assert master["image"] == worker["image"] and master["image"].startswith("apache/spark:4.0")
    assert "org.apache.spark.deploy.master.Master" in _command(master)
    assert "org.apache.spark.deploy.worker.Worker spark://spark-master:7077" in _command(worker)
    assert "spark-master" in _depends(worker)
    assert "7077:7077" in master["ports"]


def test_airflow_runs_its_four_components_on_postgres(services: dict[str, Any]) -> None:
    secrets = set()
    for name, component in AIRFLOW_COMPONENTS.items():
        svc = services[name]
        env = _env(svc)
        assert svc["build"]["dockerfile"] == AIRFLOW_DOCKERFILE
        assert _command(svc) == component, name  # the image's entrypoint runs `airflow ...`
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://")
        assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].endswith("@postgres/airflow")
        assert env["AIRFLOW__CORE__EXECUTOR"] in ("LocalExecutor", "CeleryExecutor")
        assert env["AIRFLOW__CORE__DAGS_FOLDER"] == "/opt/skewlab/dags"
        assert env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"] == (
            "http://airflow-apiserver:8080/execution/"
        )
        secrets.add(env["AIRFLOW__API_AUTH__JWT_SECRET"])
        deps = _depends(svc)
        assert deps["postgres"] == "service_healthy"
        assert deps["airflow-init"] == "service_completed_successfully"
    assert len(secrets) == 1 and "" not in secrets, "components must share one JWT secret"
    assert _command(services["airflow-init"]) == "db migrate"
    assert not any("standalone" in _command(s) for s in services.values())
    assert services["airflow-apiserver"]["ports"] == ["8081:8080"]


def test_mlflow_on_postgres_with_an_artifact_volume(
    compose: dict[str, Any], services: dict[str, Any]
) -> None:
    mlflow = services["mlflow"]
    cmd = _command(mlflow)
    assert "mlflow server" in cmd
    assert "--backend-store-uri postgresql://skewlab:skewlab@postgres/mlflow" in cmd
    destination = re.search(r"--artifacts-destination (\S+)", cmd)
    assert destination is not None
    volume = _mounts(mlflow)[destination.group(1)]
    assert volume in compose["volumes"], "artifacts must live on a named volume"
    assert _depends(mlflow)["postgres"] == "service_healthy"
    init = _mounts(services["postgres"])["/docker-entrypoint-initdb.d/init.sql"]
    assert "CREATE DATABASE mlflow" in (REPO / init).read_text()


@pytest.mark.parametrize("name", CODE_SERVICES)
def test_code_services_mount_the_repo_and_get_the_settings(
    services: dict[str, Any], name: str
) -> None:
    svc = services[name]
    mounts = _mounts(svc)
    assert mounts["/opt/skewlab"] == ".", f"{name} does not mount the repository"
    if name in SPARK_SERVICES:  # the Airflow image has them installed at build time
        cmd = _command(svc)
        assert "pip install --quiet -r /opt/skewlab/requirements.txt" in cmd
        assert "-c /opt/skewlab/constraints.txt" in cmd
        assert "-e /opt/skewlab" in cmd
    env = _env(svc)
    assert {k: env.get(k) for k in SETTINGS} == SETTINGS
    assert env["SKEWLAB_HOME"].startswith(mounts_root(mounts, "data"))
    assert env["SKEWLAB_ARTIFACT_LOCATION"] == "/mlartifacts"
    assert mounts["/mlartifacts"] == "mlartifacts", "clients write artifacts where MLflow serves"


def mounts_root(mounts: Mapping[str, str], volume: str) -> str:
    """The container path where named ``volume`` is mounted."""
    return next(target for target, source in mounts.items() if source == volume)


def test_settings_follow_the_host_environment(services: dict[str, Any]) -> None:
    host = {
        "SKEWLAB_KAFKA_BOOTSTRAP": "b1:9092,b2:9092",
        "SKEWLAB_SPARK_MASTER": "spark://cluster:7077",
        "SKEWLAB_DELTA_ROOT": "s3://bucket/skewlab/delta",
        "MLFLOW_TRACKING_URI": "https://mlflow.example.org",
        "AWS_REGION": "eu-west-1",
    }
    for name in CODE_SERVICES:
        env = _env(services[name], host)
        assert {k: env[k] for k in host} == host, name


def test_references_resolve(compose: dict[str, Any], services: dict[str, Any]) -> None:
    declared = set(compose["volumes"])
    host_ports: list[str] = []
    for name, svc in services.items():
        assert "image" in svc, f"{name}: no image"
        for dep in _depends(svc):
            assert dep in services, f"{name} depends on unknown service {dep}"
            assert dep != name
        if "build" in svc:
            context = REPO / svc["build"]["context"]
            assert (context / svc["build"]["dockerfile"]).is_file(), f"{name}: no Dockerfile"
        for target, source in _mounts(svc).items():
            if source.startswith("."):
                assert (REPO / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} not declared"
            assert target.startswith("/")
        host_ports += [str(p).split(":")[0] for p in svc.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), f"host port used twice: {host_ports}"
    for f in ("requirements.txt", "constraints.txt", "dags/skewlab_experiment.py", "jobs/route.py"):
        assert (REPO / f).is_file(), f


def test_interpolate() -> None:
    assert interpolate("${A:-x}/${B}", {"B": "b"}) == "x/b"
    assert interpolate("${A:-x}", {"A": ""}) == "x"
    assert interpolate("plain", {}) == "plain"


# --------------------------------------------------------------------------- the Airflow image


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` per instruction: comments dropped, continuations joined."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        instruction, _, args = (pending + line).partition(" ")
        out.append((instruction.upper(), " ".join(args.split())))
        pending = ""
    return out


def pinned(requirement: str) -> str:
    """The ``==`` version of ``requirement`` in requirements.txt."""
    for line in (REPO / "requirements.txt").read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep and name.strip().lower() == requirement:
            return version.strip()
    raise AssertionError(f"{requirement} is not pinned in requirements.txt")


@pytest.fixture(scope="module")
def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions((REPO / AIRFLOW_DOCKERFILE).read_text())


def test_dockerfile_instructions() -> None:
    text = "# c\nFROM a:1\n\nRUN x \\\n    && y\nUSER airflow\n"
    assert dockerfile_instructions(text) == [
        ("FROM", "a:1"),
        ("RUN", "x && y"),
        ("USER", "airflow"),
    ]


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_airflow_services_build_the_java_image(services: dict[str, Any], name: str) -> None:
    svc = services[name]
    assert svc["build"] == {"context": ".", "dockerfile": AIRFLOW_DOCKERFILE}
    assert svc["image"] == services["airflow-init"]["image"], "one image for every component"
    assert svc["image"].startswith("skewlab-airflow:"), "never overwrite apache/airflow's tag"
    assert "pip install" not in _command(svc), "the stack is installed at build time"


def test_airflow_image_pins_the_airflow_of_requirements(
    services: dict[str, Any], dockerfile: list[tuple[str, str]]
) -> None:
    airflow = pinned("apache-airflow")
    python = re.search(r'requires-python = ">=(3\.\d+)', (REPO / "pyproject.toml").read_text())
    assert python is not None
    bases = [args for ins, args in dockerfile if ins == "FROM"]
    assert bases == [f"apache/airflow:{airflow}-python{python.group(1)}"]
    assert services["airflow-init"]["image"] == f"skewlab-airflow:{airflow}-python{python.group(1)}"


def test_airflow_image_installs_java_17_as_root_and_sets_java_home(
    services: dict[str, Any], dockerfile: list[tuple[str, str]]
) -> None:
    user, java_run = None, None
    for ins, args in dockerfile:
        if ins == "USER":
            user = args
        elif ins == "RUN" and "apt-get install" in args:
            assert re.search(r"\bopenjdk-17-(jre|jdk)-headless\b", args), args
            assert user == "root", "apt-get needs root"
            assert "apt-get update" in args and "rm -rf /var/lib/apt/lists/*" in args
            java_run = args
    assert java_run is not None, "the Dockerfile installs no Java"
    env = dict(args.split("=", 1) for ins, args in dockerfile if ins == "ENV")
    java_home = env["JAVA_HOME"]
    assert f" {java_home} " in java_run + " ", "JAVA_HOME must be the path the RUN creates"
    assert user == "airflow", "the image must end as the airflow user"
    for name in AIRFLOW_SERVICES:
        assert _env(services[name])["JAVA_HOME"] == java_home, name


def test_airflow_image_installs_the_pinned_stack_and_the_package(
    dockerfile: list[tuple[str, str]],
) -> None:
    runs = [args for ins, args in dockerfile if ins == "RUN"]
    assert any(
        "pip install" in r
        and "-r /opt/skewlab/requirements.txt" in r
        and "-c /opt/skewlab/constraints.txt" in r
        for r in runs
    ), runs
    assert any("pip install" in r and "--no-deps -e /opt/skewlab" in r for r in runs), runs
    copied = [args.split() for ins, args in dockerfile if ins == "COPY"]
    sources = {src for parts in copied for src in parts[:-1] if not src.startswith("--")}
    assert {"requirements.txt", "constraints.txt", "pyproject.toml", "lib"} <= sources
    for src in sources:
        assert (REPO / src).exists(), src
    ignored = (REPO / ".dockerignore").read_text().split()
    assert {".venv", ".skewlab", ".git"} <= set(ignored), "the build context must stay small"
