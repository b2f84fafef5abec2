"""The stand-alone producer and aggregate jobs (``jobs/produce.py``, ``jobs/aggregate.py``).

``skewlab run`` calls the same functions in-process; these entry points let a
user (or a cluster scheduler) run one step on its own.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from skewlab.errors import SkewlabError
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaSettings
from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.workload.spec import parse_workload


def _fail(prog: str, exc: Exception) -> int:
    print(f"{prog}: error: {' '.join(str(exc).split())}", file=sys.stderr)
    return 2


def produce_main(argv: Sequence[str] | None = None) -> int:
    """Produce a workload to a topic at a target rate; print the achieved rate."""

    ap = argparse.ArgumentParser(prog="produce", description=produce_main.__doc__)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", default="events")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workload", default="zipf:s=1.1,v=2.72")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rate", type=float, default=5000.0, help="events/s")
    ap.add_argument("--events", type=int, help="event count (default: rate x duration)")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds")
    ap.add_argument("--payload-bytes", type=int, default=100)
    ap.add_argument("--client", default="confluent")
    args = ap.parse_args(argv)
    try:
        n = args.events if args.events is not None else round(args.rate * args.duration)
        settings = ProduceSettings(args.topic, args.partitions, n, args.rate, args.payload_bytes)
        workload = parse_workload(args.workload, seed=args.seed)
        client = connect(KafkaSettings(args.bootstrap, args.client))
        client.create_topic(args.topic, args.partitions)
        report = produce(client, workload, settings)
        client.close()
    except SkewlabError as exc:
        return _fail("produce", exc)
    print(f"produced {report.events} events in {report.seconds:.2f} s: {report.rate:,.0f}/s")
    return 0


def aggregate_main(argv: Sequence[str] | None = None) -> int:
    """Merge a run's partials into results and check them against the events topic."""
    from skewlab.io.delta.store import DeltaStore
    from skewlab.live.report.aggregate import merge, verify

    ap = argparse.ArgumentParser(prog="aggregate", description=aggregate_main.__doc__)
    ap.add_argument("--delta", required=True, help="Delta root (<data dir>/delta)")
    ap.add_argument("--run-id", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True, help="the run's events topic")
    ap.add_argument("--window", type=float, default=15.0, help="window of the run, s")
    args = ap.parse_args(argv)
    try:
        store = DeltaStore(args.delta)
        merge(store, args.run_id)
        report = verify(
            store, connect(KafkaSettings(args.bootstrap)), args.run_id, args.topic, args.window
        )
    except SkewlabError as exc:
        return _fail("aggregate", exc)
    print(report.summary())
    return 0 if report.exact else 1
