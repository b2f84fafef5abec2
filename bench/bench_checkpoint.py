"""The fixed cost of a micro-batch's checkpoint files under Spark settings, side by side.

Spark's minimal Kafka -> Kafka stream (``_passthrough.start_job``) on a trickle of input
(``--rate`` events/s, so every trigger has a few rows), the route query's trigger, its
checkpoint on the local disk; per setting, a fresh process and JVM (Hadoop's file
system settings are read once per JVM). Printed per setting: the median and p90 ms of
Spark's own ``durationMs`` phases over the batches with input after the first few
(``walCommit``: the offsets log; ``commitOffsets``: the commit log; ``triggerExecution``:
the whole batch), and the processes forked on the machine per second meanwhile (``/proc/stat``).

    .venv/bin/python bench/bench_checkpoint.py [--batches 30] [--rate 200]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, scratch_dir

SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "fs-manager": {
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
        ),
    },
    "raw-local": {
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    },
    "fs-manager+raw-local": {
        "spark.sql.streaming.checkpointFileManagerClass": (
            "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
        ),
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
    },
}
"""Named sets of Spark settings to compare (``--only`` picks some)."""

PHASES = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets")


def forks() -> int:
    """Processes forked on this machine since boot (``/proc/stat``): the JVM's forks
    (Hadoop's ``chmod`` / ``readlink`` / ``stat`` helpers) show as its rate per second."""
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("processes "):
            return int(line.split()[1])
    return 0


def one(args: argparse.Namespace) -> dict:
    """In this process: the stream under ``SETTINGS[args.one]``; its phases per batch."""
    from _passthrough import PROBE, start_job, wait_records
    from skewlab.io.kafka import KafkaSettings, connect
    from skewlab.pipeline import events
    from skewlab.spark.session import spark_session

    conf = SETTINGS[args.one]
    client = connect(KafkaSettings(args.bootstrap))
    tag = f"{args.one.replace('+', '-')}-{int(time.time())}"
    src, out = f"bench-ck-in-{tag}", f"bench-ck-out-{tag}"
    client.create_topic(src, 4)
    client.create_topic(out, 4)
    with tempfile.TemporaryDirectory(prefix="skewlab-ck-") as tmp:
        spark = spark_session("bench-checkpoint", Path(tmp) / "spark", "local[2]", conf=conf)
        query = start_job(spark, args.bootstrap, src, out, 4, Path(tmp) / "ck", once=False)
        stop = threading.Event()

        def trickle() -> None:
            i = 0
            while not stop.is_set():
                client.produce(src, events.encode(PROBE, time.time(), i, "x"), partition=i % 4)
                client.flush()
                i += 1
                time.sleep(1.0 / args.rate)

        feeder = threading.Thread(target=trickle, daemon=True)
        feeder.start()
        wait_records(client, out, 1)
        t0, f0, done = time.time(), 0, 0
        while done < args.batches + args.skip:
            time.sleep(args.trigger)
            progress = [json.loads(p.json()) for p in query._jsq.recentProgress()]
            done = sum(1 for p in progress if p.get("numInputRows"))
            if done >= args.skip and not f0:
                f0, t0 = forks(), time.time()
        n_forks = forks() - f0
        secs = time.time() - t0
        stop.set()
        feeder.join()
        progress = [json.loads(p.json()) for p in query._jsq.recentProgress()]
        rows = [p["durationMs"] for p in progress if p.get("numInputRows")][args.skip :]
        query.stop()
        spark.stop()
    for t in (src, out):
        client.delete_topic(t)
    client.close()
    result = {"setting": args.one, "batches": len(rows), "forks_per_s": n_forks / secs}
    for k in (*PHASES, "triggerExecution"):
        v = np.asarray([r.get(k, 0) for r in rows], dtype=float)
        result[k] = (float(np.median(v)), float(np.percentile(v, 90))) if len(v) else (0.0, 0.0)
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--skip", type=int, default=5, help="first batches with input left out")
    ap.add_argument("--rate", type=float, default=200.0)
    ap.add_argument("--trigger", type=float, default=0.5)
    ap.add_argument("--only", default=",".join(SETTINGS), help="settings, comma separated")
    ap.add_argument("--rounds", type=int, default=1, help="each setting this many times")
    ap.add_argument("--bootstrap", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    keep_flag(ap)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args)), flush=True)
        return
    from skewlab.services import get_service

    home = scratch_dir("skewlab-bench-ck-")
    bootstrap = get_service("broker", home).start().url
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    try:
        for _ in range(args.rounds):
            for name in args.only.split(","):
                argv = [sys.executable, __file__, "--bootstrap", bootstrap, "--one", name]
                argv += ["--batches", str(args.batches), "--skip", str(args.skip)]
                argv += ["--rate", str(args.rate), "--trigger", str(args.trigger)]
                out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                cells = "  ".join(
                    f"{k} {r[k][0]:.0f}/{r[k][1]:.0f}" for k in (*PHASES, "triggerExecution")
                )
                print(
                    f"{name:<22} {r['batches']} batches, {r['forks_per_s']:.1f} forks/s, "
                    f"ms median/p90: {cells}",
                    flush=True,
                )
    finally:
        get_service("broker", home).stop()
        drop_scratch(home, args.keep)
        print(f"load average at end: {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
