"""The first broker call of a new client: a worker's first ``end_offset`` of its partition.

A run's workers start with new clients, and their first call is the end of their
partition of ``routed``, a topic just created. librdkafka hands a new client over from
the bootstrap connection to the broker it learns of, and a ListOffsets caught in the
hand-over waits for a timer (1 or 3 s) before its leader is looked up again; the run's
first events wait with it. ``ConfluentClient`` now asks one metadata request first
(``_hand_over``). Per round: a topic of 4 partitions just created, then a new client
per partition and its first ``end_offset``, timed, both ways in turn:

* ``skewlab``: ``ConfluentClient.end_offset`` (the hand-over first);
* ``bare``: librdkafka's admin ListOffsets alone on a new ``AdminClient`` (the baseline:
  what the client did before), asked again after a "not leader" answer as the client does.

Printed per way: p50 / p99 / max ms and how many first calls took 0.5 s or more.
``--busy N`` processes spin beside it, as a run's start keeps the cores busy (the race
showed under load: 5 of 160 bare first calls at 3 s with a bench run beside them).

    .venv/bin/python bench/bench_first_call.py [--rounds 40] [--busy 2]
"""

from __future__ import annotations

import argparse
import multiprocessing
import multiprocessing.synchronize
import time

import numpy as np
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from _common import drop_scratch, keep_flag, say, scratch_dir
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.services import get_service

SLOW_S = 0.5


def skewlab_first(bootstrap: str, topic: str, p: int) -> float:
    """Seconds of a new skewlab client's first ``end_offset``."""
    c = connect(KafkaSettings(bootstrap))
    try:
        t = time.perf_counter()
        c.end_offset(topic, p)  # type: ignore[attr-defined]
        return time.perf_counter() - t
    finally:
        c.close()


def bare_first(bootstrap: str, topic: str, p: int) -> float:
    """Seconds of a new librdkafka admin client's first ListOffsets (latest) of ``p``."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition(topic, p)
    t = time.perf_counter()
    while True:
        try:
            admin.list_offsets({tp: OffsetSpec.latest()})[tp].result(timeout=30)
            return time.perf_counter() - t
        except KafkaException:  # not the leader yet, just after the topic's creation
            time.sleep(0.05)


def spin(stop: multiprocessing.synchronize.Event) -> None:
    """Keep a core busy until ``stop``."""
    while not stop.is_set():
        sum(range(10_000))


def line(name: str, secs: list[float]) -> str:
    ms = np.asarray(secs) * 1000
    slow = int((ms >= SLOW_S * 1000).sum())
    p50, p99 = np.percentile(ms, [50, 99])
    return (
        f"{name:<8} {len(ms):>4} first calls: p50 {p50:6.1f} ms, p99 {p99:7.1f} ms,"
        f" max {ms.max():7.1f} ms; {slow} took >= {SLOW_S} s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=40, help="topics, each with 4 new clients")
    ap.add_argument("--busy", type=int, default=2, help="processes spinning beside the bench")
    keep_flag(ap)
    args = ap.parse_args()
    home = scratch_dir("skewlab-bench-first-")
    service = get_service("broker", home)
    bootstrap = service.start().url
    admin = connect(KafkaSettings(bootstrap))
    took: dict[str, list[float]] = {"skewlab": [], "bare": []}
    ways = {"skewlab": skewlab_first, "bare": bare_first}
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=spin, args=(stop,)) for _ in range(args.busy)]
    for s in spinners:
        s.start()
    try:
        for r in range(args.rounds):
            for name, first in ways.items() if r % 2 == 0 else reversed(ways.items()):
                topic = f"first-{name}-{r}"
                admin.create_topic(topic, 4)
                took[name] += [first(bootstrap, topic, p) for p in range(4)]
                admin.delete_topic(topic)
            if (r + 1) % 10 == 0:
                say(f"round {r + 1}/{args.rounds}")
        for name, secs in took.items():
            say(line(name, secs))
        a, b = (np.percentile(took[n], 99) for n in ("skewlab", "bare"))
        say(f"p99 skewlab / bare: {a / b:.2f}x")
    finally:
        stop.set()
        for s in spinners:
            s.join()
        admin.close()
        service.stop()
        drop_scratch(home, args.keep)


if __name__ == "__main__":
    main()
