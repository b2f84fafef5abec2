"""``skewlab autoscale``: live consumer-group autoscaling by bin packing.

Example::

    skewlab autoscale --algorithm mwf --partitions 32 --capacity 120000 \\
        --workload stream:delta=5 --duration 300 --compare mwf,bfd,kafka:15

A producer writes each partition at the speed a measurement stream gives it
(changing every iteration); the monitor measures, the controller bin-packs
the partitions onto consumer processes and moves partitions with the
synchronous stop -> ack -> start protocol. Prints, per algorithm, the
consumers over time, rebalances, Rscore, latency percentiles, lag, hand-off
downtime and the exactly-once verdict, and logs one MLflow run each. Exit
code 1 when a run is not exact.
"""

from __future__ import annotations

import argparse
import json

from skewlab.commands._args import names, positive_float, positive_int
from skewlab.errors import ConfigError
from skewlab.report.table import format_table

HELP = "live consumer-group autoscaling (monitor, controller, consumers) on Kafka + Delta"


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``autoscale``'s options to its subparser."""
    parser.add_argument("--algorithm", default="mwf", help="mwf, bfd, ..., kafka:N (default mwf)")
    parser.add_argument("--compare", type=names, metavar="A,B,...", help="run each of these")
    parser.add_argument("--partitions", type=positive_int, default=32, help="P (default 32)")
    parser.add_argument(
        "--capacity", type=positive_float, default=120_000.0, help="C_bar, bytes/s per consumer"
    )
    parser.add_argument("--bin-capacity", type=positive_float, help="C (default 5/6 C_bar)")
    parser.add_argument(
        "--workload", default="stream:delta=5", help="stream:delta=D | step:lo,hi,up,down | const"
    )
    parser.add_argument("--duration", type=positive_float, default=300.0, help="seconds")
    parser.add_argument("--iteration", type=positive_float, default=30.0, help="seconds (30)")
    parser.add_argument("--window", type=positive_float, default=30.0, help="monitor window s")
    parser.add_argument("--record-bytes", type=positive_int, default=100, help="record size")
    parser.add_argument(
        "--client", default="confluent", choices=("confluent", "kafka-python"), help="Kafka client"
    )
    parser.add_argument("--home", default=".skewlab", help="data directory (default .skewlab)")
    parser.add_argument("--bootstrap", help="use this Kafka instead of the embedded broker")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log to MLflow")
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")


def settings_list(args: argparse.Namespace) -> list[object]:
    """One validated :class:`AutoscaleSettings` per algorithm (all checked before any run)."""
    from skewlab.live.autoscale.run import AutoscaleSettings

    algorithms = args.compare or (args.algorithm,)
    if len(set(algorithms)) != len(algorithms):
        raise ConfigError(f"an algorithm is listed twice in {','.join(algorithms)}")
    window = min(args.window, args.iteration * 2)
    return [
        AutoscaleSettings(
            algorithm=a,
            partitions=args.partitions,
            capacity=args.capacity,
            bin_capacity=args.bin_capacity,
            workload=args.workload,
            duration_s=args.duration,
            iteration_s=args.iteration,
            window_s=window,
            min_span_s=min(3.0, window / 4),
            sample_s=min(1.0, args.iteration / 8),
            publish_s=min(5.0, args.iteration / 3),
            record_bytes=args.record_bytes,
            client=args.client,
            home=args.home,
            bootstrap=args.bootstrap,
            mlflow=not args.no_mlflow,
        )
        for a in algorithms
    ]


COLUMNS = (
    "algorithm", "records", "exact", "rebalances", "moved", "avg_consumers", "avg_rscore",
    "p50_ms", "p90_ms", "p99_ms", "downtime_ratio",
)  # fmt: skip


def _cell(v: object) -> str:
    if isinstance(v, bool):
        return "yes" if v else "NO"
    if isinstance(v, float):
        return f"{v:,.3f}" if abs(v) < 10 else f"{v:,.0f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def run(args: argparse.Namespace) -> int:
    """Validate every setting, run each algorithm on the same stream, report."""
    from skewlab.live.autoscale.run import run_autoscale

    summaries = [run_autoscale(s) for s in settings_list(args)]  # type: ignore[arg-type]
    rows = [r.row() for r in summaries]
    if args.json:
        print(json.dumps(rows, indent=2, default=str))
        return 0 if all(r.exact for r in summaries) else 1
    print(format_table(list(COLUMNS), [[_cell(row[c]) for c in COLUMNS] for row in rows]))
    for r in summaries:
        print(f"{r.run_id}: {r.exactness}; {r.overlaps} overlapping ownerships")
        print("  consumers per iteration: " + " ".join(str(d["consumers"]) for d in r.decisions))
        print("  Rscore per iteration:    " + " ".join(f"{d['rscore']:.2f}" for d in r.decisions))
        print("  lag per iteration:       " + " ".join(str(int(x["lag"])) for x in r.samples))
        for p in r.plots:
            print(f"  plot: {p}")
        if r.mlflow_run_id:
            print(f"  mlflow run: {r.mlflow_run_id}")
    return 0 if all(r.exact for r in summaries) else 1
