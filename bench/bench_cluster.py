"""The same live run on one machine and on the 2-node ``skewlab cluster``, as ratios.

Issue 34's measurement: ``skewlab run --strategy pkg --workers 8`` offered ~20k events/s
for a short time, twice in one bench run: ``local`` (every tier on this machine's defaults:
the embedded broker, the route job on ``local[2]``, the workers as local processes) and
``cluster`` (the settings ``skewlab cluster up`` prints: standalone master with 2 workers,
the worker tier as the ``skewlab-workers <run id>`` app, the cluster's broker and MLflow).
Prints sustained events/s (the summary's throughput), p99 latency, wall time and the
start-up of each run component, each as local, cluster and cluster/local, then the
cluster's own start-up per component (``cluster up``), and writes it all as JSON.

    .venv/bin/python bench/bench_cluster.py [--rate 20000] [--duration 10] [--workers 8]
        [--cluster-home DIR] [--json out.json]
(``--cluster-home``: a running cluster's data dir; else a fresh one, stopped at the end.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, say, scratch_dir
from skewlab.report.table import format_table
from skewlab.services.cluster import Cluster, environment

SKEWLAB = [sys.executable, "-m", "skewlab.cli"]
CLUSTER_VARS = (
    "SPARK_CONF_DIR",
    "SKEWLAB_SPARK_MASTER",
    "SKEWLAB_KAFKA_BOOTSTRAP",
    "MLFLOW_TRACKING_URI",
    "SKEWLAB_WORKER_ENGINE",
    "SKEWLAB_HOME",
)
"""Variables that would point the ``local`` run at a cluster: removed from its environment."""
RUN_TIMEOUT_S = 3600.0


def run_once(args: argparse.Namespace, home: Path, env: dict[str, str]) -> dict[str, Any]:
    """One ``skewlab run --json`` in data dir ``home``: its summary row."""
    cmd = [
        *SKEWLAB, "run", "--strategy", "pkg", "--workers", str(args.workers),
        "--partitions", str(args.partitions), "--rate", str(args.rate),
        "--duration", str(args.duration), "--window", "1", "--no-progress", "--json",
        "--home", str(home),
    ]  # fmt: skip
    say(f"$ {' '.join(cmd[2:])}")
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                         f"{done.stderr[-3000:]}")  # fmt: skip
    text = done.stdout
    start = text.find("\n[") + 1 if not text.startswith("[") else 0
    (row,) = json.loads(text[start:])
    return dict(row)


def cluster_env(home: Path) -> dict[str, str]:
    """This process's environment plus the settings of the cluster in ``home``."""
    endpoints = {c.name: c.url for c in Cluster(home).status()}
    return {**os.environ, **environment(endpoints, home)}


def ratio(local: float, cluster: float) -> str:
    """``cluster / local`` to 2 decimals, ``-`` when it means nothing."""
    if not (math.isfinite(local) and math.isfinite(cluster)) or local == 0:
        return "-"
    return f"{cluster / local:.2f}"


def figures(row: dict[str, Any]) -> dict[str, float]:
    """The compared figures of one summary row."""
    out = {
        "sustained events/s": float(row["throughput"]),
        "offered events/s": float(row["produce_rate"]),
        "p99 latency ms": float(row["p99_ms"]),
        "wall s": float(row["wall_s"]),
    }
    for k, v in sorted((row.get("startup_s") or {}).items()):
        out[f"start-up {k} s"] = float(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--cluster-home", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    keep_flag(ap)
    args = ap.parse_args()

    work = Path(scratch_dir("skewlab-bench-cluster-"))
    work.chmod(0o711)  # PostgreSQL (its own user) must reach a fresh cluster's data dir
    local_home = work / "local"
    cluster_home = args.cluster_home or work / "cluster"
    local_env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARS}
    try:
        say("local: embedded broker, route job on local[2], workers as local processes")
        local = run_once(args, local_home, local_env)
        subprocess.run([*SKEWLAB, "down", "--home", str(local_home)], capture_output=True)
        if args.cluster_home is None:
            say("cluster: skewlab cluster up (a fresh data dir)")
            cluster_home.mkdir()
            cluster_home.chmod(0o711)
            up = subprocess.run(
                [*SKEWLAB, "cluster", "up", "--home", str(cluster_home)],
                capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
            )  # fmt: skip
            if up.returncode != 0:
                raise SystemExit(f"cluster up failed:\n{up.stdout}\n{up.stderr}")
        startup = Cluster(cluster_home).startup()
        cluster = run_once(args, cluster_home, cluster_env(cluster_home))
    finally:
        if args.cluster_home is None and cluster_home.exists():
            subprocess.run([*SKEWLAB, "cluster", "down", "--home", str(cluster_home)],
                           capture_output=True, timeout=600)  # fmt: skip
        drop_scratch(str(work), args.keep)

    a, b = figures(local), figures(cluster)
    rows = [
        [k, f"{a.get(k, math.nan):,.1f}", f"{b.get(k, math.nan):,.1f}",
         ratio(a.get(k, math.nan), b.get(k, math.nan))]
        for k in dict.fromkeys([*a, *b])
    ]  # fmt: skip
    say(f"\npkg, {args.workers} workers, {args.rate:,} events/s offered for {args.duration:g} s; "
        f"both EXACT: {local['exact']} / {cluster['exact']}")  # fmt: skip
    say(format_table(["figure", "local", "cluster", "cluster/local"], rows))
    say("\ncluster start-up (skewlab cluster up, s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in startup.items()))  # fmt: skip
    if args.json is not None:
        out = {"settings": vars(args) | {"cluster_home": str(cluster_home), "json": None},
               "local": local, "cluster": cluster, "cluster_startup_s": startup}  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2, default=str) + "\n")
    return 0 if local["exact"] and cluster["exact"] else 1


if __name__ == "__main__":
    sys.exit(main())
