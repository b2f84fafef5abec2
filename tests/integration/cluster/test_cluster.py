"""``skewlab cluster`` against the real processes: one cluster for the whole module.

``skewlab cluster up`` starts PostgreSQL, the broker, a Spark standalone master with two
workers, an MLflow server and Airflow (LocalExecutor on PostgreSQL) under a fresh data dir;
the tests check each part answers like it should, run a small ``skewlab run`` on the master
(it must end EXACT and show up as a master application), then ``skewlab cluster down`` must
leave no process of the data dir behind. Every wait polls for its event, with a generous
bound; nothing depends on the machine's speed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from skewlab.live.driver.handle import RunHandle
from skewlab.services.cluster import (
    WORKER_CORES,
    Cluster,
    airflow_health,
    airflow_healthy,
    environment,
)
from skewlab.services.postgres import Postgres
from skewlab.services.process import wait_until
from skewlab.services.spark_standalone import WORKER_CLASS, alive_workers, master_json

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.cluster]

UP_TIMEOUT_S = 1200.0
RUN_TIMEOUT_S = 1500.0
SKEWLAB = [sys.executable, "-m", "skewlab.cli"]
SMALL_RUN = [
    "run",
    "--strategy",
    "pkg",
    "--workers",
    "4",
    "--partitions",
    "2",
    "--events",
    "10240",
    "--rate",
    "5000",
    "--window",
    "1",
    "--no-progress",
]


@dataclass
class Running:
    """The cluster the module's tests share: its data dir, ``up``'s output, the endpoints."""

    home: Path
    out: str
    cluster: Cluster
    env: dict[str, str]

    @property
    def master_ui(self) -> int:
        return self.cluster.ports()["spark-master-ui"]


def skewlab(*args: str, env: dict[str, str] | None = None, timeout: float = 600.0) -> Any:
    """Run the ``skewlab`` CLI; its CompletedProcess (text)."""
    return subprocess.run(
        [*SKEWLAB, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def processes_of(home: Path) -> list[str]:
    """Command lines of live processes that belong to data dir ``home`` (by command line,
    or by an environment naming it, as Airflow's do)."""
    found = []
    mark = str(home)
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.pid == os.getpid():
                continue
            cmdline = " ".join(proc.info["cmdline"] or [])
            if mark in cmdline or mark in proc.environ().get("AIRFLOW_HOME", ""):
                found.append(f"{proc.pid}: {cmdline[:160]}")
        except (psutil.Error, OSError):
            continue
    return found


@pytest.fixture(scope="module")
def running() -> Iterator[Running]:
    # PostgreSQL runs as the `postgres` user: the data dir must be reachable by it,
    # which pytest's private temp dirs are not.
    home = Path(tempfile.mkdtemp(prefix="skewlab-cluster-"))
    home.chmod(0o711)
    try:
        done = skewlab("cluster", "up", "--home", str(home), timeout=UP_TIMEOUT_S)
        assert done.returncode == 0, f"cluster up failed:\n{done.stdout}\n{done.stderr}"
        print(done.stdout)  # the URLs and each component's start-up seconds (with -s)
        cluster = Cluster(home)
        endpoints = {c.name: c.url for c in cluster.status()}
        env = {**os.environ, **environment(endpoints, home)}
        yield Running(home, done.stdout, cluster, env)
    finally:
        skewlab("cluster", "down", "--home", str(home), timeout=300.0)
        shutil.rmtree(home, ignore_errors=True)


def test_up_prints_every_url_and_the_settings(running: Running) -> None:
    ports = running.cluster.ports()
    for url in (
        f"spark://127.0.0.1:{ports['spark-master']}",
        f"http://127.0.0.1:{ports['spark-master-ui']}",
        f"127.0.0.1:{ports['broker']}",
        f"http://127.0.0.1:{ports['mlflow-server']}",
        f"http://127.0.0.1:{ports['airflow']}",
    ):
        assert url in running.out, url
    for key in ("SKEWLAB_SPARK_MASTER", "SKEWLAB_KAFKA_BOOTSTRAP", "MLFLOW_TRACKING_URI"):
        assert f"export {key}=" in running.out


def test_master_lists_two_alive_workers(running: Running) -> None:
    status = master_json("127.0.0.1", running.master_ui)
    assert status is not None and status["status"] == "ALIVE"
    workers = alive_workers(status)
    assert len(workers) == 2
    assert {w["host"] for w in workers} == {"127.0.0.1"}
    assert sum(w["cores"] for w in workers) == 2 * WORKER_CORES


def test_mlflow_server_answers(running: Running) -> None:
    base = running.env["MLFLOW_TRACKING_URI"]
    with urllib.request.urlopen(f"{base}/health", timeout=10) as resp:
        assert resp.status == 200
    url = f"{base}/api/2.0/mlflow/experiments/search?max_results=5"
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert "experiments" in json.loads(resp.read().decode())


def test_airflow_runs_the_local_executor_on_postgres(running: Running) -> None:
    import psycopg2

    health = airflow_health(running.cluster.ports()["airflow"])
    assert airflow_healthy(health), health
    url = Postgres(running.home).sqlalchemy_url("airflow").replace("+psycopg2", "")
    with psycopg2.connect(url) as conn, conn.cursor() as cur:
        cur.execute("SELECT version()")
        assert cur.fetchone()[0].startswith("PostgreSQL")
        cur.execute(
            "SELECT count(*) FROM job WHERE job_type = 'SchedulerJob' AND state = 'running'"
        )
        assert cur.fetchone()[0] >= 1
    titles = [" ".join(p.info["cmdline"] or []) for p in psutil.process_iter(["cmdline"])]
    assert any(t.startswith("airflow worker -- LocalExecutor") for t in titles)
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if len(cmdline) > 2 and cmdline[-1:] == ["--skip-serve-logs"] and "scheduler" in cmdline:
            env = proc.environ()
            if env.get("AIRFLOW_HOME") == str(running.cluster.airflow_home):
                assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
                assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+")


def test_status_shows_every_component_up(running: Running) -> None:
    done = skewlab("cluster", "status", "--home", str(running.home))
    assert done.returncode == 0, done.stdout
    for name in ("postgres", "broker", "spark-master", "spark-worker-1", "spark-worker-2"):
        assert re.search(rf"^{name}\s+up\s", done.stdout, re.M), done.stdout
    assert re.search(r"^airflow\s+up\s", done.stdout, re.M), done.stdout


def master_apps(running: Running) -> list[str]:
    """The names of every application the master knows (running or finished)."""
    status = master_json("127.0.0.1", running.master_ui)
    assert status is not None
    return [a["name"] for a in status["activeapps"] + status["completedapps"]]


def test_run_on_the_master_ends_exact_with_route_job_and_workers_as_master_apps(
    running: Running,
) -> None:
    """The worker engine defaults to spark on a cluster master: the run's workers are tasks
    of ``skewlab-workers <run id>``, an application of the same master as the route job."""
    t0 = time.monotonic()
    done = skewlab(*SMALL_RUN, "--home", str(running.home), env=running.env, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    found = re.search(r"^(\S+): EXACT: expected 10240 events, merged 10240", done.stdout, re.M)
    assert found, done.stdout[-3000:]
    run_id = found.group(1)
    apps = master_apps(running)
    assert f"skewlab-route-{run_id}" in apps, apps
    assert f"skewlab-workers {run_id}" in apps, apps
    handle = RunHandle.load(running.home / "runs" / run_id)
    for i in range(4):
        assert handle.procs[f"worker-{i}"].request, f"worker-{i} was not a Spark task"
    print(f"run {run_id} on the cluster: {time.monotonic() - t0:.1f} s")


DAG = "skewlab_experiment"
DAG_CONF = {
    "strategy": "pkg",
    "workers": 4,
    "partitions": 2,
    "workload": "zipf",
    "zipf_s": 1.1,
    "rate": 2000,
    "duration": 5,
    "window": 2.0,
    "seed": 11,
}
"""10,000 events; the task's route job runs on the cluster's master (Airflow has its env)."""
DAG_TIMEOUT_S = 2400.0


def test_experiment_dag_on_the_local_executor_ends_exact(running: Running) -> None:
    import httpx

    routes_before = set(route_apps(running))
    airflow_home = running.cluster.airflow_home
    login = json.loads((airflow_home / "simple_auth_manager_passwords.json.generated").read_text())
    port = running.cluster.ports()["airflow"]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120.0) as http:
        r = http.post("/auth/token", json={"username": "admin", "password": login["admin"]})
        assert r.status_code == 201, r.text
        http.headers["Authorization"] = f"Bearer {r.json()['access_token']}"
        deadline = time.monotonic() + 600.0
        while http.get(f"/api/v2/dags/{DAG}").status_code != 200:  # the dag-processor's parse
            assert time.monotonic() < deadline, f"{DAG} never parsed"
            time.sleep(2.0)
        assert http.patch(f"/api/v2/dags/{DAG}", json={"is_paused": False}).status_code == 200
        body = {"logical_date": None, "conf": DAG_CONF}
        r = http.post(f"/api/v2/dags/{DAG}/dagRuns", json=body)
        assert r.status_code == 200, r.text
        run_id = r.json()["dag_run_id"]
        deadline = time.monotonic() + DAG_TIMEOUT_S
        state = ""
        while state not in ("success", "failed"):
            assert time.monotonic() < deadline, f"DAG run {run_id} still {state}"
            time.sleep(5.0)
            state = http.get(f"/api/v2/dags/{DAG}/dagRuns/{run_id}").json()["state"]
        tis = http.get(f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances").json()
        states = {t["task_id"]: t["state"] for t in tis["task_instances"]}
        assert state == "success", states
        path = f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances/record_result/xcomEntries/exact"
        exact = http.get(path, params={"deserialize": True}).json()["value"]
        assert exact in (True, "true", "True"), exact
    assert len(set(route_apps(running)) - routes_before) == 1


def route_apps(running: Running) -> list[str]:
    """The names of the route job applications the master knows (running or finished)."""
    status = master_json("127.0.0.1", running.master_ui) or {}
    apps = status.get("activeapps", []) + status.get("completedapps", [])
    return [a["name"] for a in apps if a["name"].startswith("skewlab-route-")]


FAULT_EVENTS = 20480
FAULT_RUN = [
    "run", "--strategy", "pkg", "--workers", "4", "--partitions", "2",
    "--events", str(FAULT_EVENTS), "--rate", "400", "--window", "1", "--no-progress",
    "--stall-s", "300",
]  # fmt: skip
"""51 s of input at 400 events/s: the node dies with a good share of it still to come. The
hang watch waits 300 s (``--stall-s``): a lost worker is Spark's to reschedule, and its
restart as a new job by the driver's hang watch (after 15 s by default) is another path."""
KILL_AT = 0.25
"""The node is killed once the workers committed this share of the input."""
WORKERS = 4


def new_run_dir(home: Path, before: set[str]) -> Path:
    """The run dir a ``skewlab run`` started after ``before`` was listed creates."""
    runs = home / "runs"
    found: list[Path] = []

    def created() -> bool:
        found[:] = [
            d
            for d in (runs.iterdir() if runs.is_dir() else [])
            if d.name not in before and (d / "handle.json").exists()
        ]
        return bool(found)

    assert wait_until(created, 600.0, 0.5), "the run made no run dir"
    return found[0]


def committed(home: Path, run_id: str) -> dict[int, int]:
    """Each worker's committed offset of ``routed`` (``worker_progress``; {} before any)."""
    from skewlab.io.delta.store import DeltaStore

    try:
        t = DeltaStore(str(home / "delta")).read(
            "worker_progress", run_id=run_id, columns=["worker", "routed_offset"]
        )
    except Exception:
        return {}
    out: dict[int, int] = {}
    for w, o in zip(t["worker"].to_pylist(), t["routed_offset"].to_pylist(), strict=True):
        out[w] = max(out.get(w, 0), o)
    return out


def current_attempts(run_dir: Path) -> dict[int, dict[str, Any]]:
    """Worker index -> its newest started task attempt (``attempt``, ``pid``...)."""
    from skewlab.live.driver.spark_launcher import EngineDir

    d = EngineDir(run_dir / "spark-workers")
    try:
        procs = RunHandle.load(run_dir).procs
    except Exception:
        return {}
    out = {}
    for i in range(WORKERS):
        rec = procs.get(f"worker-{i}")
        if rec is None or rec.request is None:
            continue
        started = [a for a in d.read_attempts(Path(rec.request).stem) if "rc" not in a]
        if started:
            out[i] = started[-1]
    return out


def node_of(pid: int) -> str | None:
    """The ``spark-worker-N`` whose daemon runs process ``pid`` (an ancestor), if any."""
    try:
        for parent in psutil.Process(pid).parents():
            cmd = parent.cmdline()
            if WORKER_CLASS in cmd and "--work-dir" in cmd:
                return Path(cmd[cmd.index("--work-dir") + 1]).parent.name
    except psutil.Error:
        return None
    return None


def test_a_killed_spark_worker_node_loses_nothing_its_workers_resume_on_the_other(
    running: Running, tmp_path: Path
) -> None:
    """Mid-run, kill the process group of the Spark worker daemon that holds the most skewlab
    workers (its executors and their worker processes go with it): Spark reschedules the lost
    tasks on the other node, each resumes from its committed Delta state, the run is EXACT
    (results per window and key). Prints the time from the kill to each
    lost worker committing progress again."""
    home = running.home
    runs = home / "runs"
    before = {d.name for d in runs.iterdir()} if runs.is_dir() else set()
    out_path = tmp_path / "run.out"
    victim = ""
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [*SKEWLAB, *FAULT_RUN, "--home", str(home)],
            env=running.env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        run_dir = new_run_dir(home, before)
        run_id = run_dir.name
        assert wait_until(
            lambda: proc.poll() is not None or len(current_attempts(run_dir)) == WORKERS,
            900.0,
            0.5,
        ), "the workers never started as Spark tasks"
        assert proc.poll() is None, out_path.read_text()[-3000:]
        share = KILL_AT * FAULT_EVENTS
        assert wait_until(
            lambda: proc.poll() is not None or sum(committed(home, run_id).values()) >= share,
            900.0,
            0.5,
        ), "the workers never committed a quarter of the input"
        assert proc.poll() is None, out_path.read_text()[-3000:]
        first = current_attempts(run_dir)
        nodes = {i: node_of(int(a["pid"])) for i, a in first.items()}
        assert all(nodes.values()), f"a worker process is not under a Spark worker: {nodes}"
        victim = max(set(nodes.values()), key=list(nodes.values()).count)  # type: ignore[arg-type]
        lost = sorted(i for i, n in nodes.items() if n == victim)
        at_kill = committed(home, run_id)
        (daemon,) = [s for s in running.cluster.services() if s.name == victim]
        state = daemon.status().state
        assert state is not None
        os.killpg(os.getpgid(state.pid), signal.SIGKILL)
        t_kill = time.monotonic()
        print(f"killed {victim} (pid {state.pid}) holding workers {lost} at {at_kill}")

        old = [
            psutil.Process(int(first[i]["pid"])) for i in lost if psutil.pid_exists(first[i]["pid"])
        ]
        _, alive = psutil.wait_procs(old, timeout=120)
        assert not alive, f"lost workers outlived their node: {alive}"

        back: dict[int, float] = {}
        moved: dict[int, str | None] = {}

        def resumed() -> bool:
            now_attempts = current_attempts(run_dir)
            offsets = committed(home, run_id)
            for i in lost:
                a = now_attempts.get(i)
                if a is None or a["attempt"] <= first[i]["attempt"]:
                    continue
                moved.setdefault(i, node_of(int(a["pid"])))
                if i not in back and offsets.get(i, 0) > at_kill.get(i, 0):
                    back[i] = time.monotonic() - t_kill
            return len(back) == len(lost) or proc.poll() is not None

        assert wait_until(resumed, 900.0, 0.5)
        if sorted(back) != lost:  # the run ended first: say how, from its own files
            app_log = (run_dir / "workers-app.log").read_text()[-4000:]
            shutil.copytree(run_dir, tmp_path / "run", dirs_exist_ok=True)
            raise AssertionError(
                f"processing again: {back}; the run ended first:\n"
                f"{out_path.read_text()[-3000:]}\nworkers app:\n{app_log}"
            )
        survivor = {"spark-worker-1": "spark-worker-2", "spark-worker-2": "spark-worker-1"}
        assert set(moved.values()) <= {survivor[victim], None}, moved
        for i in lost:
            print(f"worker-{i}: processing again {back[i]:.1f} s after its node was killed")
        rc = proc.wait(timeout=RUN_TIMEOUT_S)
        text = out_path.read_text()
        assert rc == 0, text[-3000:]
        assert re.search(
            rf"^{run_id}: EXACT: expected {FAULT_EVENTS} events, merged {FAULT_EVENTS}",
            text,
            re.M,
        ), text[-3000:]
        # a pkg run keeps no per-key operator state (only rebalancing and scale-out runs do):
        # its state is the window aggregates, which the EXACT verdict compares key by key
        handle = RunHandle.load(run_dir)
        for i in lost:
            assert f"worker-{i}" not in handle.restarts  # Spark rescheduled it, not skewlab
            text = (run_dir / f"worker-{i}.log").read_text()
            resumed_at = rf"worker {i} resumes at routed offset (\d+)"
            starts = [int(o) for o in re.findall(resumed_at, text)]
            assert len(starts) == 2 and starts[1] >= at_kill[i] > 0, starts  # committed state
    finally:
        if proc.poll() is None:
            proc.kill()
        if victim:  # the next tests want both nodes
            done = skewlab("cluster", "up", "--home", str(home), timeout=UP_TIMEOUT_S)
            assert done.returncode == 0, done.stdout + done.stderr


def test_down_stops_everything_and_leaves_no_process(running: Running) -> None:
    assert processes_of(running.home), "the cluster's processes should be found while it runs"
    done = skewlab("cluster", "down", "--home", str(running.home), timeout=300.0)
    assert done.returncode == 0, done.stderr
    for name in ("airflow", "mlflow-server", "spark-worker-2", "spark-master", "postgres"):
        assert f"{name}: stopped" in done.stdout, done.stdout
    assert processes_of(running.home) == []
    after = skewlab("cluster", "status", "--home", str(running.home))
    assert after.returncode == 1
    assert not re.search(r"\s+up\s", after.stdout), after.stdout
