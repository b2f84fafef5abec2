"""A consumer process of the live autoscaler (Landau et al. Sec. V-B).

It reads the data partitions the controller gave it (assigned by hand, no group joined) at
most ``C_bar`` bytes/s:

1. ready: skip its inbox to the true end, then send ``ready`` to the controller's inbox;
2. inbox, between batches only: ``start p`` / ``stop p`` (evidence, then an ack),
   ``query`` (report), ``exit``;
3. batch: take what the ``C_bar`` token bucket allows, fetch it, write one ``batch``
   evidence record per partition, then commit the offsets (a crash between the evidence
   and the commit resumes from the evidence; one before it redoes the batch).

More: docs/autoscale.md, "A consumer's lifecycle".
"""

from __future__ import annotations

import logging
import math
import sys
import time
from collections.abc import Callable

from skewlab.faults import crash_point
from skewlab.io.kafka import connect
from skewlab.io.kafka.base import KafkaClient
from skewlab.live.autoscale.protocol import (
    CONTROLLER_INBOX,
    LiveSettings,
    Message,
    Processed,
    inbox,
    read_new,
    resume_offset,
)
from skewlab.live.driver.launch import process_args, without_pandas

__all__ = ["LiveConsumer", "main"]

log = logging.getLogger(__name__)

ORPHAN_EXIT_S = 20.0
"""Leave on our own when the run's stop file is this old (the controller died)."""


class LiveConsumer:
    """One consumer's loop: steps 1-3 of the module doc."""

    def __init__(
        self,
        s: LiveSettings,
        consumer: int,
        client: KafkaClient | None = None,
        wall: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.s = s
        self.id = consumer
        self.client = client or connect(s.kafka)
        self.wall = wall
        self.sleep = sleep
        self.positions: dict[int, int] = {}
        self.record_size = float(s.record_bytes)
        self.inbox_pos = 0
        self.done = False
        self.tokens = 0.0
        self._refilled = wall()

    # -- 1. ready ----------------------------------------------------------------------

    def ready(self) -> None:
        """Step 1: skip the inbox to its true end (older messages were for an earlier process
        of this id) and send ``ready`` to the controller's inbox."""
        self.inbox_pos = self.client.end_offsets(self.s.topics.metadata).get(inbox(self.id), 0)
        self._send(Message("ready", self.id, t=self.wall()))
        log.info("consumer %d ready (inbox at %d)", self.id, self.inbox_pos)

    def _send(self, msg: Message) -> None:
        self.client.produce(self.s.topics.metadata, msg.encode(), partition=CONTROLLER_INBOX)
        self.client.flush()

    def _evidence(self, e: Processed) -> None:
        self.client.produce(self.s.topics.processed, e.encode(), partition=e.partition)

    # -- 2. inbox ----------------------------------------------------------------------

    def read_inbox(self) -> None:
        """Step 2: apply the inbox messages that arrived since the last call, in order,
        stopping at ``exit`` (``done`` then set)."""
        values, self.inbox_pos = read_new(
            self.client, self.s.topics.metadata, inbox(self.id), self.inbox_pos
        )
        for raw in values:
            msg = Message.decode(raw)
            self.apply(msg)
            if self.done:
                return

    def apply(self, msg: Message) -> None:
        """Carry out one inbox message (step 2)."""
        p = msg.partition
        if msg.op == "start":
            if p not in self.positions:
                pos = resume_offset(self.client, self.s, p)
                self.positions[p] = pos
                now = self.wall()
                self._evidence(Processed("start", self.id, p, pos, pos, now, now))
                self.client.flush()
                log.info("consumer %d: start partition %d at %d", self.id, p, pos)
            self._send(Message("ack", self.id, p, started=True, t=self.wall()))
        elif msg.op == "stop":
            if p in self.positions:
                pos = self.positions.pop(p)
                now = self.wall()
                self._evidence(Processed("stop", self.id, p, pos, pos, now, now))
                self.client.flush()
                log.info("consumer %d: stop partition %d at %d", self.id, p, pos)
            self._send(Message("ack", self.id, p, started=False, t=self.wall()))
        elif msg.op == "query":
            owned = tuple(sorted(self.positions))
            self._send(Message("report", self.id, partitions=owned, t=self.wall()))
        elif msg.op == "exit":
            for q in sorted(self.positions):
                pos, now = self.positions[q], self.wall()
                self._evidence(Processed("stop", self.id, q, pos, pos, now, now))
            self.client.flush()
            self.positions.clear()
            self.done = True
        else:
            log.warning("consumer %d: ignoring %s", self.id, msg)

    # -- 3. batch ----------------------------------------------------------------------

    def _refill(self) -> float:
        """Token bucket of ``C_bar`` bytes/s holding at most ``batch_s`` worth of bytes."""
        now = self.wall()
        rate = self.s.capacity
        self.tokens = min(rate * self.s.batch_s, self.tokens + rate * (now - self._refilled))
        self._refilled = now
        return self.tokens

    def batch(self) -> int:
        """Fetch what the token bucket allows, write evidence, commit; the records processed.

        The bucket bounds the rate at ``C_bar`` over any ``batch_s`` window: a
        batch may take at most the bytes earned since the last one (the time
        spent on I/O included), and when none are earned the consumer waits.
        """
        if not self.positions:
            return 0
        if self._refill() < self.record_size:
            self.sleep((self.record_size - self.tokens) / self.s.capacity)
            self._refill()
        ends = self.client.end_offsets(self.s.topics.data)
        share = self.tokens / len(self.positions)
        quota = max(1, math.floor(share / self.record_size))
        fetched: dict[int, tuple[int, int, list[int]]] = {}
        nbytes = 0
        t0 = self.wall()
        for p, pos in sorted(self.positions.items()):
            upto = min(ends.get(p, 0), pos + quota)
            if upto <= pos:
                continue
            stamps = []
            for rec in self.client.fetch(self.s.topics.data, p, pos, upto, timeout_s=10):
                nbytes += len(rec.value or b"") + len(rec.key or b"")
                stamps.append(rec.timestamp_ms)
            fetched[p] = (pos, upto, stamps)
        if not fetched:
            return 0
        n = sum(len(v[2]) for v in fetched.values())
        self.record_size = 0.8 * self.record_size + 0.2 * nbytes / n
        self.tokens -= nbytes
        t1 = self.wall()
        now_ms = t1 * 1000.0
        for p, (pos, upto, stamps) in fetched.items():
            lat = tuple(max(0, round(now_ms - ts)) for ts in stamps)
            self._evidence(Processed("batch", self.id, p, pos, upto, t0, t1, lat))
        self.client.flush()
        crash_point("autoscale.consumer.before_commit")
        self.client.commit(self.s.group, self.s.topics.data, {p: v[1] for p, v in fetched.items()})
        for p, (_pos, upto, _stamps) in fetched.items():
            self.positions[p] = upto
        return n

    # -- the loop ----------------------------------------------------------------------

    def orphaned(self) -> bool:
        """True once the run's stop file is older than :data:`ORPHAN_EXIT_S` (the controller
        died without sending ``exit``)."""
        stop = self.s.stop_file
        return stop.exists() and self.wall() - stop.stat().st_mtime > ORPHAN_EXIT_S

    def run(self) -> None:
        """Steps 1-3 until ``exit`` (or the run ended long ago without us being told)."""
        self.ready()
        try:
            while not self.done:
                self.read_inbox()
                if self.done:
                    break
                if self.batch() == 0:
                    if self.orphaned():
                        log.warning("consumer %d: run stopped without an exit; leaving", self.id)
                        break
                    self.sleep(self.s.poll_s)
        finally:
            self.client.close()
        log.info("consumer %d exits", self.id)


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.worker.consumer SETTINGS_JSON CONSUMER_ID``."""
    args = process_args(argv, "consumer SETTINGS_JSON CONSUMER_ID")
    if args is None:
        return 2
    LiveConsumer(LiveSettings.from_file(args[0]), int(args[1])).run()
    return 0


if __name__ == "__main__":
    without_pandas()
    sys.exit(main())
