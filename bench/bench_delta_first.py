"""Why a run's first round of Delta appends costs more on a warm route host.

One Spark session set up as the route host's (``local[2]``, the route job's session
factory, one warm-up micro-batch through the route code), one Delta root shared by
``--runs`` runs in a row, as a host's runs share ``<home>/delta``. Each run has an app
id of its own (``route:<run>``) and commits ``--rounds`` rounds of ``key_loads`` +
``partition_loads`` (:func:`~skewlab.spark.writes.delta_appends`, ``txnAppId`` /
``txnVersion`` = the round) of ``--events`` routed events.

Per round: its seconds and the Spark jobs it ran (from the Spark UI's REST API: each
job's call site and wall time), so the first round's extra cost shows where it goes.

``--clone``: each run's rounds through a clone of the session, as a query's batches are.

    .venv/bin/python bench/bench_delta_first.py [--runs 3] [--rounds 4] [--clone]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np

from bench_delta_round import batch_events, one_round
from skewlab.spark.route import RouteSettings
from skewlab.spark.session import spark_session, ui_url
from skewlab.spark.warmup import run_warmup


def jobs(spark) -> list[dict]:
    """Every job the session ran so far (the UI's REST API), oldest first."""
    url = ui_url(spark)
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/jobs") as r:
        got: list[dict] = json.load(r)
    return sorted(got, key=lambda j: j["jobId"])


def stage_sites(spark) -> dict[int, str]:
    """Each stage's first Delta frame of its call site (the UI's REST API), by stage id."""
    url = ui_url(spark)
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages") as r:
        got: list[dict] = json.load(r)
    out = {}
    for st in got:
        frames = [f.strip() for f in st.get("details", "").splitlines()]
        delta = [f for f in frames if "sql.delta" in f and "DeltaLogging" not in f]
        out[st["stageId"]] = " < ".join(f.split("(")[0].rsplit(".", 2)[-2] for f in delta[:4])
    return out


def job_line(j: dict, sites: dict[int, str] | None = None) -> str:
    """A job's id, wall ms and call site."""
    from datetime import datetime

    def ts(s: str) -> float:
        return datetime.strptime(s.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()

    ms = (ts(j["completionTime"]) - ts(j["submissionTime"])) * 1000 if "completionTime" in j else -1
    where = " | ".join(sites.get(i, "") for i in j["stageIds"]) if sites else j["name"][:90]
    return f"job {j['jobId']:>4} {ms:7.0f} ms  {where[:200]}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--jobs", action="store_true", help="print each round's jobs")
    ap.add_argument(
        "--clone", action="store_true", help="each run in a clone of the session (as a query's)"
    )
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="skewlab-bench-df-") as tmp:
        home = Path(tmp)
        spark = spark_session(
            "bench-delta-first", home / "spark", master="local[2]", ui=True, site_pyspark=True
        )
        warm = RouteSettings(
            run_id="warm",
            bootstrap="127.0.0.1:9",
            events_topic="warm-up",
            routed_topic="warm-up",
            workers=2,
            strategy="key",
            delta_root=str(home / "warm" / "delta"),
            run_dir=str(home / "warm"),
        )
        (home / "warm").mkdir()
        print(f"host warm-up {run_warmup(spark, warm, home / 'warm' / 'w', time.time()):.2f} s")
        root = home / "delta"
        for r in range(args.runs):
            run_id = f"run-{r}"
            seen = len(jobs(spark))
            use = spark
            if args.clone:  # what a streaming query's batches get: a clone of its session
                from pyspark.sql import SparkSession

                use = SparkSession(spark.sparkContext, spark._jsparkSession.cloneSession())
            for i in range(1, args.rounds + 1):
                events = batch_events(args.events, rng, 1.8e9 + (r * 100 + i) * 5)
                secs = one_round(use, root, events, i, run_id=run_id)
                done = jobs(spark)
                print(f"{run_id} round {i}: {secs:.3f} s, {len(done) - seen} jobs")
                sites = stage_sites(spark) if args.jobs else {}
                for j in done[seen:] if args.jobs else ():
                    print("    " + job_line(j, sites))
                seen = len(done)
        spark.stop()


if __name__ == "__main__":
    main()
