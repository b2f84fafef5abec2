"""What one round of the route job's idempotent Delta appends costs under delta-spark settings.

One Spark session (``local[2]``, the route job's session factory); per setting, its own
Delta root, first ``--history`` rounds (the tables' history of earlier runs, a Delta
checkpoint included), then ``--rounds`` timed rounds, the settings interleaved round by
round. A round is what :class:`~skewlab.spark.writes.DeltaAppender` commits for a batch:
``key_loads`` and ``partition_loads`` of ``--events`` routed events (Zipf keys, 4
workers), both tables at once, ``txnAppId`` / ``txnVersion`` (:func:`delta_appends`).

    .venv/bin/python bench/bench_delta_round.py [--events 20000] [--rounds 6]

Prints the median and max seconds per round of each setting.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from skewlab.spark import tables
from skewlab.spark.session import spark_session
from skewlab.spark.writes import Append, delta_appends

DELTA = "spark.databricks.delta."
SETTINGS: dict[str, dict[str, str]] = {
    "default": {},
    "no-stats": {DELTA + "stats.collect": "false"},
    "no-checksum": {DELTA + "writeChecksumFile.enabled": "false"},
    "no-stats+no-checksum": {
        DELTA + "stats.collect": "false",
        DELTA + "writeChecksumFile.enabled": "false",
    },
}
"""Named sets of session settings, applied before each round of that setting."""


def batch_events(n: int, rng: np.random.Generator, t0: float) -> pa.Table:
    """``n`` routed events as the route tasks leave them (``task_route.LOADS_COLUMNS``)."""
    keys = rng.zipf(1.1, n) % 10_000
    return pa.table(
        {
            "src_partition": pa.array(np.arange(n) % 4, pa.int32()),
            "src_offset": pa.array(np.arange(n), pa.int64()),
            "worker": pa.array(keys % 4, pa.int64()),
            "key": pa.array([f"k{k}" for k in keys], pa.string()),
            "ts": pa.array(t0 + np.arange(n) * 1e-4, pa.float64()),
            "size": pa.array(np.full(n, 100), pa.int64()),
            "raw": pa.nulls(n, pa.binary()),
            "reason": pa.nulls(n, pa.string()),
        }
    )


def one_round(spark, root: Path, events: pa.Table, version: int, run_id: str = "bench") -> float:
    """Seconds of one round: both tables' appends at once, app ``route:<run_id>``, version
    ``version``."""
    kl = tables.key_loads(run_id, events, 5.0)
    pl = tables.partition_loads(run_id, kl, "routed", 5.0)
    t0 = time.perf_counter()
    appends = [Append("key_loads", kl), Append("partition_loads", pl)]
    app = f"route:{run_id}"
    delta_appends(spark, root, appends, app_id=app, version=version, run_id=run_id)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--history", type=int, default=12)
    ap.add_argument("--only", default=",".join(SETTINGS), help="settings, comma separated")
    args = ap.parse_args()
    names = args.only.split(",")
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="skewlab-bench-dr-") as tmp:
        spark = spark_session("bench-delta-round", Path(tmp) / "spark", master="local[2]")
        base = {k: spark.conf.get(k, None) for s in SETTINGS.values() for k in s}
        took: dict[str, list[float]] = {n: [] for n in names}
        for i in range(args.history + args.rounds):
            events = batch_events(args.events, rng, 1.8e9 + i * 5)
            for name in names:
                for k, v in base.items():
                    if v is None:
                        spark.conf.unset(k)
                    else:
                        spark.conf.set(k, v)
                for k, v in SETTINGS[name].items():
                    spark.conf.set(k, v)
                secs = one_round(spark, Path(tmp) / name, events, i)
                if i >= args.history:
                    took[name].append(secs)
        spark.stop()
    for name, secs in took.items():
        print(f"{name:<22} s per round: median {np.median(secs):.3f}, max {max(secs):.3f}")


if __name__ == "__main__":
    main()
