"""Checkpoint write / read through Delta ``operator_state`` and scale-out pause per policy.

1. A checkpoint of 10k / 100k / 1M keys (``{"count", "sum"}`` values, 1% of
   the keys with a buffered tuple, 4 instances) is written through
   :class:`~skewlab.io.state_store.CheckpointStore` and read back; the
   baseline, measured in the same run, writes / reads the same columns as one
   plain parquet file with pyarrow. Printed: seconds, ratio to parquet, bytes.
2. The load ramp of ``scaleout-ramp`` in :mod:`skewlab.sim.scaleout` with
   100k keys of state and the read / write rates measured in (1) at 100k
   keys: longest pause (time the keys make no progress), take-over time and
   p99 latency per policy, as ratios to the restart baseline.
   Targets (issue 7): active backup pause < 1 s, checkpointing < 5 s.

    .venv/bin/python bench/bench_scaleout.py [--sizes 10000,100000,1000000]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from _common import say
from skewlab.io.delta import DeltaStore, to_arrow
from skewlab.io.delta.schemas import table_spec
from skewlab.io.state_store import CheckpointStore
from skewlab.sim.scaleout import ScaleOutSimConfig, simulate_scaleout
from skewlab.state import Checkpoint, OperatorState, StreamTuple, make_policy

INSTANCES = 4


def checkpoint_parts(keys: int) -> dict[int, Checkpoint]:
    per = keys // INSTANCES
    parts = {}
    for i in range(INSTANCES):
        names = [f"k{i * per + j}" for j in range(per)]
        theta = OperatorState({k: {"count": j + 1, "sum": j * 0.5} for j, k in enumerate(names)})
        beta = tuple(StreamTuple(1_000_000 + j, names[j], 1.0) for j in range(0, per, 100))
        parts[i] = Checkpoint(0, theta, 999_999, beta)
    return parts


def du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench_store(keys: int, root: Path) -> tuple[float, float]:
    parts = checkpoint_parts(keys)
    store = CheckpointStore(DeltaStore(root / f"delta{keys}"), f"bench-{keys}")
    t0 = time.perf_counter()
    cols = CheckpointStore.encode(0, parts)
    t_enc = time.perf_counter() - t0
    store.write(0, parts)
    t_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = store.read(0)
    t_read = time.perf_counter() - t0
    assert back == parts
    table = to_arrow(table_spec("operator_state"), cols, f"bench-{keys}")
    pfile = root / f"plain{keys}.parquet"
    t0 = time.perf_counter()
    pq.write_table(pa.table(table), pfile)
    p_write = time.perf_counter() - t0
    t0 = time.perf_counter()
    pq.read_table(pfile)
    p_read = time.perf_counter() - t0
    size = du(root / f"delta{keys}")
    say(
        f"{keys:>9,} keys  write {t_write:6.2f} s (encode {t_enc:5.2f}) = "
        f"{t_write / p_write:5.1f}x "
        f"parquet {p_write:5.2f} s | read+decode {t_read:6.2f} s = {t_read / p_read:5.1f}x parquet "
        f"{p_read:5.2f} s | delta {size / 1e6:6.1f} MB, "
        f"parquet {pfile.stat().st_size / 1e6:6.1f} MB"
    )
    return keys / t_write, keys / t_read


def bench_pause(write_rate: float, read_rate: float) -> None:
    say(
        f"\nscale-out in the simulator: 100k keys, write {write_rate:,.0f} keys/s, "
        f"read {read_rate:,.0f} keys/s (measured above)"
    )
    res = {}
    for name in ("restart", "checkpointing", "active-backup"):
        cfg = ScaleOutSimConfig(policy=make_policy(name), state_keys=100_000)
        cfg = dataclasses.replace(cfg, write_keys_per_s=write_rate, read_keys_per_s=read_rate)
        res[name] = simulate_scaleout(cfg)
    base = res["restart"]
    for name, r in res.items():
        take = max(r.takeover_s) if r.takeover_s else 0.0
        bt = max(base.takeover_s)
        say(
            f"{name:<14} max pause {r.max_pause_s:6.2f} s "
            f"({r.max_pause_s / base.max_pause_s:5.3f}x)"
            f"  take-over {take:6.2f} s ({take / bt:5.2f}x)  p99 latency {r.latency_p99_s:7.3f} s "
            f"({r.latency_p99_s / base.latency_p99_s:5.3f}x)  instance-s {r.instance_seconds:8,.0f}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rates = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        for n in sizes:
            rates[n] = bench_store(n, Path(tmp))
    w, r = rates.get(100_000, rates[sizes[-1]])
    bench_pause(w, r)


if __name__ == "__main__":
    main()
