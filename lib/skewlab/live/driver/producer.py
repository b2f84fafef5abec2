"""The producer of the live pipeline: a workload -> topic ``events`` at a target rate.

Event ``seq`` goes to partition ``seq % P`` (the spout -> splitter shuffle of
DKG's topology: every splitter sees a sample of every key). Each event is
stamped with the producer's wall time when it is sent (``ts``), which the
workers use for windows and end-to-end latency, and carries the run's producer mark
(header ``skewlab.producer`` = the topic, :func:`skewlab.pipeline.events.producer_mark`)
so the run's count can tell its own events from records written from outside.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from skewlab.errors import ConfigError
from skewlab.io.kafka import producer_fn
from skewlab.io.kafka.base import KafkaClient
from skewlab.pipeline.events import producer_mark
from skewlab.workload.base import Workload

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

PACE_S = 0.1
"""The producer's pacing step: it sends at most this long's events at once."""


@dataclass(frozen=True, slots=True)
class ProduceSettings:
    """What to produce: ``events`` events to ``topic`` (``partitions`` partitions) at
    ``rate`` events/s, padded to ``payload_bytes``, drawn from the workload in chunks of
    ``chunk`` (progress is told per chunk) and sent in bursts of :attr:`burst` at most
    (one pacing step each); raises :class:`ConfigError` on a bad count, rate, payload
    size or ramp."""

    topic: str
    partitions: int
    events: int
    rate: float
    payload_bytes: int = 100
    chunk: int = 2048
    ramp_factor: float = 1.0
    """Load ramp: the rate multiplies by this every ``ramp_interval_s`` (1 = constant)."""
    ramp_interval_s: float = 0.0

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ConfigError(f"partitions must be >= 1, got {self.partitions}")
        if self.events < 0:
            raise ConfigError(f"events must be >= 0, got {self.events}")
        if not self.rate > 0:
            raise ConfigError(f"rate must be > 0 events/s, got {self.rate}")
        if not 0 <= self.payload_bytes <= 1_000_000:
            raise ConfigError(f"payload_bytes must be in 0..1000000, got {self.payload_bytes}")
        if self.ramp_factor < 1 or (self.ramp_factor > 1 and not self.ramp_interval_s > 0):
            raise ConfigError(
                f"load ramp needs factor >= 1 and interval > 0 s, got "
                f"{self.ramp_factor}x/{self.ramp_interval_s}s"
            )

    @property
    def burst(self) -> int:
        """Events sent back to back between two pacing steps: :data:`PACE_S` of the
        starting rate (at least 1, at most :attr:`chunk`). A whole chunk sent at once
        would reach the pipeline as one burst: 2,048 events at 400/s are 5 s of input,
        and their wait in the queue would be measured as latency."""
        return max(1, min(self.chunk, int(self.rate * PACE_S)))

    def due(self, sent: int) -> float:
        """Seconds after the start when event ``sent`` is due (step-wise ramp, seed Fig. 9)."""
        f, step = self.ramp_factor, self.ramp_interval_s
        if f == 1:
            return sent / self.rate
        t, left, rate = 0.0, float(sent), self.rate
        while left > rate * step:
            left -= rate * step
            t += step
            rate *= f
        return t + left / rate


@dataclass(frozen=True, slots=True)
class ProduceReport:
    """What :func:`produce` did: every event of the workload (skipped ones included) and
    the wall seconds it took."""

    events: int
    seconds: float

    @property
    def rate(self) -> float:
        """Events per wall second (NaN when no time passed)."""
        return self.events / self.seconds if self.seconds > 0 else float("nan")


def open_producer(client: KafkaClient, topic: str, timeout_s: float = 30.0) -> None:
    """Connect a librdkafka producer (``client.producer``) before the first event.

    A new producer connects, fetches metadata and gets its idempotent producer id on
    its first ``produce``: 0.5 s measured on the earlier broker (first produce + flush 502 ms cold,
    1 ms after this), which the first events of a run spent in the client's queue,
    i.e. in their latency. A client without ``producer`` is left alone."""
    producer = getattr(client, "producer", None)
    list_topics = getattr(producer, "list_topics", None)
    if callable(list_topics):
        list_topics(topic, timeout=timeout_s)


def produce(
    client: KafkaClient,
    workload: Workload,
    s: ProduceSettings,
    wall: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    progress: Progress | None = None,
    present: Mapping[int, int] | None = None,
) -> ProduceReport:
    """Send ``s.events`` events of ``workload`` at ``s.rate`` events/s; flush; report.

    The client's producer is connected first (:func:`open_producer`). Pacing: after
    every burst of :attr:`ProduceSettings.burst` events the producer sleeps until the
    wall clock has reached ``start + sent / rate`` (ramped: :meth:`ProduceSettings.due`),
    and stamps the next events with the time it woke, so the achieved rate never exceeds
    the target (it falls below it when the client cannot keep up); ``progress`` is told
    after every chunk.

    ``present`` (partition -> events already in it, from an earlier producer of
    the same run that died): event ``seq`` is skipped when it is among the first
    ``present[seq % P]`` events of its partition, so each partition ends with
    its events once (a partition receives its events in order: what an earlier
    producer delivered is a prefix). Skipped events are not paced; the report
    counts every event of the workload.
    """
    escaped: dict[str, tuple[str, bytes]] = {}
    open_producer(client, s.topic)
    send = producer_fn(client)
    topic = s.topic
    mark = [producer_mark(topic)]
    pad = "x" * max(0, s.payload_bytes - 60)
    start = wall()
    sent = 0
    new = 0
    p = s.partitions
    skip = [int((present or {}).get(q, 0)) for q in range(p)]
    burst = s.burst
    for chunk in workload.events(s.events, chunk=s.chunk, rate=s.rate):
        vocab_keys = chunk.vocab.keys
        now = wall()
        for kid in chunk.keys.ids.tolist():
            part = sent % p
            if sent // p < skip[part]:
                sent += 1
                continue
            if new and new % burst == 0:  # a pacing step: wait until these are due
                ahead = start + s.due(new) - wall()
                if ahead > 0:
                    sleep(ahead)
                now = wall()
            key = vocab_keys[kid]
            known = escaped.get(key)
            if known is None:
                known = escaped[key] = (json.dumps(key), key.encode("utf-8"))
            js, kb = known
            value = f'{{"key":{js},"ts":{now:.6f},"seq":{sent},"payload":"{pad}"}}'
            send(topic, value.encode("utf-8"), kb, part, mark)
            sent += 1
            new += 1
        ahead = start + s.due(new) - wall()
        if ahead > 0:
            sleep(ahead)
        if progress is not None:
            progress(sent, s.events)
    client.flush()
    seconds = wall() - start
    log.info("produced %d events in %.2f s (%.0f/s)", new, seconds, new / max(seconds, 1e-9))
    return ProduceReport(sent, seconds)
