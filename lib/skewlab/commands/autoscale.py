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
import dataclasses
import json
import sys

from skewlab.autoscale.algorithms import ALGORITHMS
from skewlab.autoscale.base import BinPacker
from skewlab.autoscale.binpack import AnyFit
from skewlab.autoscale.kafka_assignor import KafkaAssignor
from skewlab.autoscale.modified import ModifiedAnyFit
from skewlab.commands._args import add_flag, flag_values, names
from skewlab.errors import ConfigError
from skewlab.live.autoscale.settings import AutoscaleSettings, monitor_timing
from skewlab.live.driver.lifecycle import Interrupted, failure_reason, signals_as_interrupts
from skewlab.report.table import format_table
from skewlab.spec import AUTOSCALE_SETTINGS

HELP = "live consumer-group autoscaling (monitor, controller, consumers) on Kafka + Delta"


def algorithm_spec(name: str, algo: BinPacker) -> str:
    """How ``--algorithm`` names registry entry ``name`` (Kafka's take a group size)."""
    return f"{name}:N" if isinstance(algo, KafkaAssignor) else name


def describe(algo: BinPacker) -> str:
    """One line on what an algorithm of the registry does (Landau et al. Sec. IV, Table II)."""
    if isinstance(algo, KafkaAssignor):
        return f"Kafka's {algo.strategy} assignor over a fixed group of N consumers"
    if isinstance(algo, ModifiedAnyFit):
        return f"modified {algo.fit} fit, consumers biggest first by {algo.sort} load"
    if isinstance(algo, AnyFit):
        order = "by decreasing speed" if algo.decreasing else "in a new random order each iteration"
        return f"{algo.fit} fit, partitions {order}"
    return type(algo).__name__


def epilog() -> str:
    """The algorithms of the registry, one a line, and the exit status."""
    width = max(len(algorithm_spec(n, a)) for n, a in ALGORITHMS.items())
    lines = [f"  {algorithm_spec(n, a):<{width}}  {describe(a)}" for n, a in ALGORITHMS.items()]
    return (
        "algorithms (--algorithm, --compare):\n" + "\n".join(lines) + "\n\n"
        "exit status: 0 when every run is exact, 1 when one is not, 2 on a bad flag, "
        "128 + N when signal N stopped a run."
    )


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``autoscale``'s options to its subparser: one flag per CLI setting of
    :data:`~skewlab.spec.AUTOSCALE_SETTINGS` (``--algorithm`` lists the registry)."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = epilog()
    specs = ", ".join(algorithm_spec(n, a) for n, a in ALGORITHMS.items())
    for s in AUTOSCALE_SETTINGS:
        if s.name == "algorithm":
            s = dataclasses.replace(s, help=f"one of {specs}")
        add_flag(parser, s)
        if s.name == "algorithm":
            parser.add_argument(
                "--compare",
                type=names,
                metavar="A,B,...",
                help="run each of these algorithms in turn",
            )
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")


def settings_list(args: argparse.Namespace) -> list[AutoscaleSettings]:
    """One validated :class:`AutoscaleSettings` per algorithm (all checked before any run);
    the monitor's timing derived from ``--iteration`` (:func:`monitor_timing`)."""
    algorithms = args.compare or (args.algorithm,)
    if len(set(algorithms)) != len(algorithms):
        raise ConfigError(f"an algorithm is listed twice in {','.join(algorithms)}")
    fields = flag_values(args, AUTOSCALE_SETTINGS)
    timing = monitor_timing(fields["iteration_s"], fields["window_s"])
    return [AutoscaleSettings(**{**fields, **timing, "algorithm": a}) for a in algorithms]


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
    """Validate every setting, run each algorithm on the same stream, report. SIGTERM /
    SIGINT stop the run in progress (recorded as failed in its handle): exit 128 + signal."""
    from skewlab.live.autoscale.run import run_autoscale

    summaries = []
    for s in settings_list(args):
        try:
            with signals_as_interrupts():
                summaries.append(run_autoscale(s))
        except Interrupted as exc:
            print(f"skewlab autoscale: {failure_reason(exc)}; run {s.algorithm} recorded as "
                  "failed", file=sys.stderr)  # fmt: skip
            return 128 + exc.signum
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
