"""A worker process of the live pipeline: partition ``i`` of ``routed`` -> Delta.

It reads its partition by manual assignment, runs the windowed per-key operator at a
per-event cost, samples latency, and commits a flush at routed offset ``o`` in order
(app transaction ``work-<i>:<run>``, version ``o``):

1. ``worker_progress`` gets (worker, ``o``, watermarks);
2. ``partials`` gets the increments: the commit point (a flush is done when it is in);
3. ``latency`` gets the flush's latency rows.

A restart resumes from the committed ``partials`` version, so a crash in 1-3 loses and
doubles nothing. With message sets a flush first flushes the producer and writes
``operator_state`` and ``handoffs``: docs/live-run.md, section ``skewlab.live.worker.process``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from skewlab.clock import Clock, SystemClock
from skewlab.faults import crash_point
from skewlab.io.delta.store import DeltaStore
from skewlab.io.kafka import connect, fetch_range
from skewlab.io.kafka.base import FetchedRange
from skewlab.io.progress import encode_watermarks, progress_at
from skewlab.io.state_store import state_rows_at
from skewlab.live.driver.launch import process_age_s, process_args, without_pandas
from skewlab.live.worker.batch import DATA, END, EOS, HANDOFF, classify, warm_classify
from skewlab.live.worker.fetch import end_offset, fetch_available
from skewlab.live.worker.rows import handoff_row, latency_rows, ms, partial_rows, state_table
from skewlab.live.worker.settings import WorkerReport, WorkerSettings, read_worker_settings
from skewlab.live.worker.shadow import Shadow, newest_plan
from skewlab.live.worker.switch_watch import SwitchWatch
from skewlab.pipeline import events
from skewlab.pipeline.handoff import Handoff, KeySets, Rec
from skewlab.pipeline.worker import LatencyWindows, WindowedAggregate, window_starts

log = logging.getLogger(__name__)

__all__ = ["Worker", "main", "run"]


def spin(seconds: float) -> None:
    """Busy-wait (the operator's processing cost, like DKG's processDuration)."""
    if seconds <= 0:
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Worker:
    """The loop of one worker; ``step()`` does one fetch-process(-flush) round."""

    def __init__(
        self,
        settings: WorkerSettings,
        clock: Clock | None = None,
        wall: Callable[[], float] = time.time,
        busy: Callable[[float], None] = spin,
    ) -> None:
        self.s = settings
        self.clock = clock or SystemClock()
        self.wall = wall
        self.busy = busy if settings.cost == "spin" else time.sleep
        self.store = DeltaStore(settings.delta_root)
        self.client = connect(settings.kafka)
        committed = self.store.committed_version("partials", settings.app_id)
        self.version = committed
        """The last commit version (module doc of :mod:`skewlab.io.progress`)."""
        self.offset, wm = (
            (0, {})
            if committed is None
            else progress_at(self.store, settings.run_id, settings.worker, committed)
        )
        self.start_offset = self.offset
        self.agg = WindowedAggregate(settings.window_s, wm)
        self.latency = LatencyWindows(settings.window_s, rng=np.random.default_rng(settings.worker))
        self.sets: KeySets | None = None
        self.shadow: Shadow | None = None
        self._dirty = False
        self._owed = 0
        """Records applied (or replayed into a shadow) whose cost the step has not paid."""
        self._paid, self._paid_s = 0, 0.0
        """Records whose cost the current step paid, and the seconds it took (:meth:`_pay`)."""
        self._lat_ts: list[float] = []
        self._lat: list[float] = []
        """Event time and latency of each record applied and not yet sampled (in order)."""
        if settings.splitters:
            self.sets = self._key_sets_at(committed)
            self._skip_stale(committed)
            self.shadow = Shadow(self.sets, self.store, settings.run_id, wall)
            self.shadow.reader = connect(settings.kafka)
            plan = newest_plan(self.store, settings.run_id, settings.worker)
            have = (self.sets.shadow_meta or {}).get("epoch")
            if plan is not None and plan["epoch"] != have:
                self.shadow.start(plan)
                self._dirty = True
            else:  # a restart: the restored keys it never changed, from where they came
                self.shadow.load_base()
            crash_point("worker.restoring")  # state restored, nothing read yet
        self.watch = SwitchWatch(
            self.store, settings.run_id, settings.worker, self.clock, lambda: ms(self.wall())
        )
        """Switches and plans naming this worker: the old instance's side of the cut."""
        self._cut_unsaved = False
        """A cut made and not yet committed (flushed at once)."""
        self.handoffs_sent = 0
        self._applied_ms: dict[tuple[str, int], tuple[int, int]] = {}
        """(sent, applied) wall ms of each received hand-off, until it is committed."""
        self.flushes = 0
        self._last_flush = self.clock.now()
        log.info("worker %d resumes at routed offset %d", settings.worker, self.offset)

    def _skip_stale(self, committed: int | None) -> None:
        """A flush of a dead process that wrote state but not ``partials`` (its commit)
        left rows at a version ``S`` above the commit. The reprocessing here need not
        make the same rows (a cut falls where this process learns the switch), so its
        commits go above ``S`` (``KeySets.bump`` raises the commit version) and its
        first one rewrites every key those rows name: newer rows than the stale ones."""
        sets, app = self.sets, self.s.app_id
        assert sets is not None
        stale = max(
            (
                v
                for v in (
                    self.store.committed_version("operator_state", app),
                    self.store.committed_version("worker_progress", app),
                )
                if v is not None
            ),
            default=None,
        )
        base = -1 if committed is None else committed
        if stale is None or stale <= base:
            return
        sets.bump += stale - max(base, 0) + 1
        t = self.store.read(
            "operator_state",
            run_id=self.s.run_id,
            columns=["key"],
            filters=[("instance", "=", self.s.worker), ("checkpoint", ">", base)],
        )
        keys = {k for k in t["key"].to_pylist() if k}
        sets._changed.update(keys)
        self._dirty = True
        log.info(
            "worker %d: a dead process's uncommitted flush at %d (commit %s): %d keys "
            "rewritten, commit versions raised by %d",
            self.s.worker,
            stale,
            committed,
            len(keys),
            sets.bump,
        )

    def _key_sets_at(self, version: int | None) -> KeySets:
        s = self.s
        if version is None:
            return KeySets(s.worker, s.splitters)
        return KeySets.from_rows(
            s.worker, s.splitters, state_rows_at(self.store, s.run_id, s.worker, version)
        )

    def _apply(self, key: str, recs: list[Rec], now: float) -> None:
        """Apply ``recs`` of ``key`` (live output); their cost is paid at the step's end,
        their latency samples taken in order at the step's end (:meth:`_sample_latency`)."""
        self._owed += len(recs)
        add, ts, lat = self.agg.add, self._lat_ts, self._lat
        for r in recs:
            add(key, r.ts, r.size)
            ts.append(r.ts)
            lat.append(now - r.ts)

    def _sample_latency(self) -> None:
        """The latency samples of the records applied since the last call, in order."""
        if self._lat_ts:
            ts = np.asarray(self._lat_ts, dtype=np.float64)
            self.latency.add_many(window_starts(ts, self.s.window_s), np.asarray(self._lat))
            self._lat_ts, self._lat = [], []

    def _send(self, out: list[Handoff]) -> None:
        for h in out:
            self.client.produce(
                self.s.topic,
                h.value(),
                key=h.key.encode(),
                partition=h.dst,
                headers=[(events.HANDOFF_HEADER, f"{h.set_id}:{h.src}".encode())],
            )
            self.handoffs_sent += 1

    def _process_sets(self, recs: FetchedRange) -> int:
        """``_process`` with message sets (module doc): records, markers, hand-offs.

        The batch is decoded at once (:mod:`skewlab.live.worker.batch`); the records
        are then taken in offset order. The operator's cost is paid for the records
        applied (live output), not for those buffered until their key's hand-off:
        a buffered record costs when its set is taken and it is applied."""
        sets = self.sets
        assert sets is not None
        b = classify(recs)
        now = self.wall()
        sent0 = self.handoffs_sent
        accept, record, me = self.agg.accept, sets.record, self.s.worker
        for i, kind in enumerate(b.kinds):
            rec = recs[i]
            if kind == DATA:
                p = b.src_partition[i]
                if not accept(p, b.src_offset[i]):
                    continue
                tag = b.tags[i]
                sid, src = (int(x) for x in tag.split(":")) if tag else (0, -1)
                key = b.keys[i]
                r = Rec(b.ts[i], b.seq[i], b.sizes[i], p)
                done = record(key, sid, src, r)
                if done:
                    self._apply(key, done, now)
            elif kind == EOS:
                tag = b.tags[i]
                assert tag is not None
                sid, nxt, sp = (int(x) for x in tag.split(":"))
                sets.end_of_set((rec.key or b"").decode(), sid, sp, nxt)
            elif kind == HANDOFF:
                tag = b.tags[i]
                assert tag is not None
                sid, src = (int(x) for x in tag.split(":"))
                key = (rec.key or b"").decode()
                state = json.loads(rec.value or b"{}")
                self._apply(key, sets.receive(Handoff(key, sid, src, me, state)), now)
                self._applied_ms.setdefault((key, sid), (rec.timestamp_ms, ms(self.wall())))
            elif kind == END:
                sets.end_of_stream()
            else:
                log.error("worker %d: invalid routed record at %d", me, rec.offset)
                continue
            self._send(sets.take_handoffs())
        if recs:
            self.offset = recs[-1].offset + 1
        self._dirty = True
        if self.handoffs_sent > sent0:  # one line per fetch: a scale-out moves 10k+ keys
            log.info(
                "worker %d: %d hand-offs sent (%d in all)",
                me,
                self.handoffs_sent - sent0,
                self.handoffs_sent,
            )
        return len(recs)

    FOLLOWED_STEP, FOLLOWED_FLUSH = 16, 4
    """While followed (or, for a shadow, waiting for its source's cut) a step does at most
    ``1 / FOLLOWED_STEP`` of a flush interval's work and an old instance commits every
    ``1 / FOLLOWED_FLUSH`` of it."""

    @property
    def followed(self) -> bool:
        """Some instance's newest plan shadows this worker and no cut was made for it."""
        return self.sets is not None and self.watch.followed(self.sets)

    def _follow_switch(self) -> None:
        """The old instance's side of the cut (:class:`SwitchWatch`): at a step boundary,
        a switch that moves hash parts of this worker's keys to instances shadowing it
        stops them here at the routed offset reached; committed at once, with the
        state, and named in every later ``worker_progress`` row."""
        sets = self.sets
        assert sets is not None
        for spec, promised in self.watch.look(sets, self.offset):
            self.watch.cut(sets, spec, self.offset, promised)
            self._dirty = self._cut_unsaved = True

    def end(self) -> int:
        """The end offset of the worker's partition of ``routed`` (0 if the broker has none)."""
        return end_offset(self.client, self.s.topic, self.s.worker)

    def step(self, end: int | None = None) -> int:
        """Fetch and process up to ``max_fetch`` records; flush when due. Returns records read."""
        if self.sets is not None and self.s.scale_out:
            self._follow_switch()
        # Followed by a shadow: short steps and commits, so a switch is seen soon and the
        # shadow (bounded by this worker's commit) stays close behind. A shadow waiting
        # for its source's cut takes short steps too, so it sees the cut soon.
        shadow = self.shadow if self.shadow is not None and self.shadow.active else None
        followed = self.followed
        interval = self.s.flush_interval_s / (self.FOLLOWED_FLUSH if followed else 1)
        cap = self.s.max_fetch
        chunk: int | None = None  # a full step of a scale-out run looks for a switch per chunk
        if self.s.service_us > 0:  # keep a flush due every flush interval under backlog
            full = max(1, min(cap, int(self.s.flush_interval_s * 1e6 / self.s.service_us)))
            # short only once within one short step of its bound: further behind, full steps
            # replay faster (the cut's P is never before the bound, so nothing is missed)
            parts = max(int((shadow.meta or {}).get("parts", 1)), 1) if shadow else 0
            slack = max(1, full // self.FOLLOWED_STEP) * parts
            short = followed or (shadow is not None and shadow.awaiting_cut(slack))
            cap = max(1, full // self.FOLLOWED_STEP) if short else full
            if not short and self.sets is not None and self.s.scale_out:
                chunk = max(1, full // self.FOLLOWED_STEP)
        n = read = replayed = took = 0
        t0 = self.clock.now()
        # The shadow first: the own partition's records of its keys wait for the take anyway.
        if shadow is not None:
            shadow.follow()
            ends = self.client.end_offsets(self.s.topic)  # one look-up for both
            now = self.wall()
            taken0 = len(shadow.taken)
            read, replayed = shadow.step(
                self.client, self.s.topic, ends, cap, lambda k, recs: self._apply(k, recs, now)
            )
            self._owed += replayed  # a shadow does the operator's work
            took = len(shadow.taken) - taken0
            if read:
                n += read
                self._dirty = True
            end = max(end or 0, ends.get(self.s.worker, 0))
        t1 = self.clock.now()
        upto = self.offset + cap if end is None else min(end, self.offset + cap)
        if self.watch.due is not None:  # not past a cut a dead process promised
            upto = min(upto, max(self.watch.due, self.offset))
        self._paid = self._paid_s = 0
        own = self._process(upto, end is None, chunk) if upto > self.offset else 0
        n += own
        self._sample_latency()
        t2 = self.clock.now()
        self._pay()
        t3 = self.clock.now()
        owed = self._paid
        if chunk is not None and self.followed:
            interval = 0.0  # a plan named it during a full step: commit now (the shadow's bound)
        if shadow is not None and own == 0 and not shadow.live_any:
            # replaying suppressed before any cut: a commit saves only the replay's progress
            # (a crash replays it again), and would delay seeing the cut
            interval *= self.FOLLOWED_FLUSH
        if self._dirty and (self._cut_unsaved or t3 - self._last_flush >= interval):
            self.flush()
        if (shadow is not None or followed) and (read or own):  # where a step's time goes
            log.info(
                "worker %d: %s step read %d replayed %d took %d in %.2f s; own %d in %.2f s;"
                " cost of %d records %.2f s; flush %.2f s",
                self.s.worker,
                "shadow" if shadow is not None else "followed",
                read,
                replayed,
                took,
                t1 - t0,
                own,
                t2 - t1 - (self._paid_s - (t3 - t2)),
                owed,
                self._paid_s,
                self.clock.now() - t3,
            )
        return n

    def _commit_version(self) -> int:
        """Routed offset plus records read in shadowed partitions, raised past a dead
        process's uncommitted flush (:meth:`_skip_stale`; :mod:`skewlab.io.progress`)."""
        read = self.shadow.read if self.shadow is not None else 0
        return self.offset + read + (self.sets.bump if self.sets is not None else 0)

    def _pay(self) -> None:
        """Pay the operator's cost of the records owed (:attr:`_owed`), counted in the step's
        ``_paid`` records and ``_paid_s`` seconds."""
        owed, self._owed = self._owed, 0
        if owed:
            t = self.clock.now()
            self.busy(self.s.service_us * 1e-6 * owed)
            self._paid += owed
            self._paid_s += self.clock.now() - t

    def _process(self, upto: int, to_end: bool = False, chunk: int | None = None) -> int:
        """Read the own partition up to ``upto`` (``to_end``: up to its end, if before;
        one request for both, :mod:`skewlab.live.worker.fetch`) and process it.

        ``chunk``: process the records (with message sets) ``chunk`` at a time, paying
        each chunk's cost and looking for a switch after it, so a switch that comes
        during a full step is cut within a chunk, not a step, after it. A cut, a dead
        process's promise ahead, or a plan that names this worker (it is followed from
        then on, and commits at once: its commit bounds the shadow) ends the step there;
        the rest is read again."""
        topic, me = self.s.topic, self.s.worker
        if to_end:
            recs = fetch_available(self.client, topic, me, self.offset, upto)
            if not recs:  # at the end: nothing read
                return 0
        else:
            recs = fetch_range(self.client, topic, me, self.offset, upto)
        if self.sets is not None:
            if chunk is None:
                return self._process_sets(recs)
            n, cuts = 0, len(self.sets.cuts)
            for part in recs.chunks(chunk):
                n += self._process_sets(part)
                self._pay()
                self._follow_switch()
                if len(self.sets.cuts) > cuts or self.watch.due is not None or self.followed:
                    break
            return n
        if not recs:
            self._dirty = True
            return 0
        b = classify(recs)
        keys, ts, sizes, parts, offs = b.keys, b.ts, b.sizes, b.src_partition, b.src_offset
        if b.kinds.count(DATA) != len(b):  # the route job only forwards valid events
            ok = [i for i, k in enumerate(b.kinds) if k == DATA]
            for i, k in enumerate(b.kinds):
                if k != DATA:
                    log.error(
                        "worker %d: invalid routed record at %d", self.s.worker, recs[i].offset
                    )
            keys, ts = [keys[i] for i in ok], [ts[i] for i in ok]
            sizes, parts, offs = ([col[i] for i in ok] for col in (sizes, parts, offs))
        taken = self.agg.process(keys, ts, sizes, parts, offs)
        self.busy(self.s.service_us * 1e-6 * int(taken.sum()))
        now = self.wall()
        t = np.asarray(ts, dtype=np.float64)[taken]
        self.latency.add_many(window_starts(t, self.s.window_s), now - t)
        self.offset = recs[-1].offset + 1
        self._dirty = True
        return len(keys)

    def flush(self) -> None:
        """Commit the increments up to the current offset (steps 1-3 of the module doc)."""
        off, run, wk = self.offset, self.s.run_id, self.s.worker
        o = self._commit_version()
        app = self.s.app_id
        if self.version is not None and o <= self.version:
            return  # nothing read since the last commit (keep the increments for the next)
        if self.sets is not None:
            self.client.flush()
            tau = ms(self.wall())
            self.store.append(
                "operator_state", state_table(self.sets.changed_rows(), o, wk, tau),
                app_id=app, version=o, run_id=run,
            )  # fmt: skip
            applied = [self._handoff_row(h) for h in self.sets.take_applied()]
            if applied:  # nothing to mark: an empty commit per flush is a Delta commit wasted
                self.store.append("handoffs", applied, app_id=app, version=o, run_id=run)
        wm = encode_watermarks(
            self.agg.watermarks, o, off, self.sets.cuts if self.sets is not None else None
        )
        self.store.append(
            "worker_progress",
            [{"worker": wk, "routed_offset": off, "watermarks": wm}],
            app_id=app,
            version=o,
            run_id=run,
        )
        rows = partial_rows(self.agg.drain(), wk)
        crash_point("worker.before_commit")  # everything but the partials (the commit) written
        self.store.append("partials", rows, app_id=app, version=o, run_id=run)
        crash_point("worker.after_commit")
        if self._cut_unsaved:
            self._cut_unsaved = False
            crash_point("scaleout.after_cut")  # the old instance's cut committed
        self._sample_latency()
        lat = latency_rows(self.latency.drain(), wk)
        if lat:  # a shadow's steps apply nothing: no empty commit
            self.store.append("latency", lat, app_id=app, version=o, run_id=run)
        self.version = o
        self.flushes += 1
        self._dirty = False
        self._last_flush = self.clock.now()

    def _handoff_row(self, h: Handoff) -> dict[str, object]:
        """The ``handoffs`` row of ``h`` (:func:`~skewlab.live.worker.rows.handoff_row`)."""
        key = (h.key, h.set_id)
        shadow = self.shadow.taken.pop(key, None) if self.shadow is not None else None
        times = self._applied_ms.pop(key, None) if shadow is None else None
        return handoff_row(h, shadow, times)

    def _sets_done(self) -> bool:
        """No message set is still open here (always true without message sets)."""
        if self.sets is None:
            return True
        if self._dirty:  # send completed hand-offs and commit before deciding
            self.flush()
        return self.sets.stream_ended and self.sets.waiting() == 0

    def stop_requested(self) -> bool:
        """Whether the settings name a stop file and it exists."""
        return self.s.stop_file is not None and Path(self.s.stop_file).exists()

    def run(self, sleep: Callable[[float], None] = time.sleep) -> WorkerReport:
        """Work until the stop file exists and the partition is drained; flush last."""
        warm_classify()  # the first decode's imports and kernels, before the worker is ready
        if self.s.ready_file:
            Path(self.s.ready_file).write_text(str(self.wall()))
        while True:
            n = self.step()
            if n == 0:
                if self.stop_requested() and self.offset >= self.end() and self._sets_done():
                    break
                sleep(self.s.poll_interval_s)
        if self._dirty:
            self.flush()
        self.client.close()
        if self.shadow is not None:
            self.shadow.reader.close()
        return WorkerReport(
            self.s.worker,
            self.start_offset,
            self.offset,
            self.agg.accepted,
            self.agg.dropped,
            self.flushes,
        )


def run(s: WorkerSettings) -> int:
    """Run the instance of settings ``s`` (read once by its process) to its end; exit code."""
    log.info("worker process up: %.2f s after its start (interpreter, imports)", process_age_s())
    report = Worker(s).run()
    log.info("worker done: %s", report)
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m skewlab.live.worker.process SETTINGS_JSON`` (and ``jobs/work.py``)."""
    args = process_args(argv, "worker SETTINGS_JSON")
    if args is None:
        return 2
    return run(read_worker_settings(args[0]))


if __name__ == "__main__":
    without_pandas()
    raise SystemExit(main())
