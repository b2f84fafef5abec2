"""Two live workers on an in-memory topic: a secondary shadows the primary and takes over.

Worker 0 is the primary of operator 0; worker 1 gets a plan (as the state
manager writes it) to shadow hash part 1 of 2 of worker 0's keys, and a
``SwitchRouting`` decision moves that part to it. The routed records, end-of-set
markers and hand-offs are written by hand the way the route job and the workers
write them. Checked: the shadow never runs past the primary's commit; at the
switch the primary stops the moved keys at a cut ``P`` (no hand-off), the
secondary replays up to ``P`` suppressed and applies the primary's backlog of
its keys after ``P`` as live output; the key state and the partials are exact
under restarts of either side and any interleaving of their steps.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from skewlab.io.delta import DeltaStore
from skewlab.io.kafka.base import KafkaSettings, Record
from skewlab.live.report.control import final_key_state
from skewlab.live.worker import process as worker_mod
from skewlab.live.worker import switch_watch
from skewlab.live.worker.process import Worker
from skewlab.live.worker.settings import WorkerSettings
from skewlab.pipeline import events
from skewlab.state import owner, split_hash

RUN = "shadow-run"
TOPIC = "routed"
SPLITTERS = 1


class Topic:
    """An in-memory ``routed`` shared by the workers' clients."""

    def __init__(self) -> None:
        self.parts: dict[int, list[Record]] = {}
        self.now_ms = 1_000

    def append(self, p: int, key: str, value: bytes, headers: list[tuple[str, bytes]]) -> None:
        log = self.parts.setdefault(p, [])
        self.now_ms += 1
        log.append(Record(TOPIC, p, len(log), key.encode(), value, tuple(headers), self.now_ms))


class Client:
    def __init__(self, topic: Topic) -> None:
        self.t = topic

    def fetch(self, topic: str, p: int, start: int, end: int) -> list[Record]:
        return self.t.parts.get(p, [])[start:end]

    def end_offsets(self, topic: str) -> dict[int, int]:
        return {p: len(v) for p, v in self.t.parts.items()}

    def produce(
        self, topic: str, value: bytes, key: bytes, partition: int, headers: Any = ()
    ) -> None:
        self.t.append(partition, key.decode(), value, list(headers))

    def flush(self) -> None:
        pass

    def close(self, flush_s: float = 10.0) -> None:
        pass


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Topic, DeltaStore, Path]:
    topic = Topic()
    monkeypatch.setattr(worker_mod, "connect", lambda s: Client(topic))
    return topic, DeltaStore(str(tmp_path / "delta")), tmp_path


def make(tmp: Path, i: int, **settings: Any) -> Worker:
    """Instance ``i`` on the fake topic; ``settings`` replace the defaults below."""
    kw: dict[str, Any] = {"window_s": 1.0, "flush_interval_s": 0.0, **settings}
    s = WorkerSettings(
        run_id=RUN,
        worker=i,
        topic=TOPIC,
        kafka=KafkaSettings("fake:0"),
        delta_root=str(tmp / "delta"),
        splitters=SPLITTERS,
        cost="sleep",
        scale_out=True,
        **kw,
    )
    w = Worker(s, busy=lambda s: None)
    w.watch.poll_s = (0.0, 0.0)  # look at decisions every step
    if w.shadow is not None:
        w.shadow.poll_s = w.shadow.cut_poll_s = 0.0  # and at the source's commit and cuts
    return w


KEYS = [f"k{i}" for i in range(12)]
MOVED = [k for k in KEYS if owner(k, 2, split_hash) == 1]


class Input:
    """Events of ``KEYS``, routed like the route job routes them."""

    def __init__(self, topic: Topic) -> None:
        self.topic, self.n, self.counts = topic, 0, Counter[str]()

    def send(self, rounds: int, moved_to: int | None = None) -> None:
        for _ in range(rounds):
            for k in KEYS:
                p, hdrs = 0, [events.src_header(0, self.n)]
                if moved_to is not None and k in MOVED:
                    p = moved_to
                    hdrs.append((events.SET_HEADER, b"1:0"))
                val = events.encode_routed(k, 1.0 + self.n * 1e-3, self.n, 1)
                self.topic.append(p, k, val, hdrs)
                self.n += 1
                self.counts[k] += 1

    def switch(self, to: int) -> None:
        """The routing switch: one end-of-set marker per moved key on the old partition."""
        for k in MOVED:
            self.topic.append(0, k, b"", [(events.EOS_HEADER, f"0:{to}:0".encode())])

    def end(self) -> None:
        for p in (0, 1):
            self.topic.append(p, "", b"", [(events.END_HEADER, b"1")])


def decide(store: DeltaStore, detail: dict[str, Any], version: int, ts: int = 0) -> None:
    """One ``decisions`` row as the state manager writes it."""
    store.append(
        "decisions",
        [
            {
                "ts": ts,
                "loop": "scale-out",
                "policy": "active-backup",
                "detail": json.dumps(detail),
                "cost": 0.0,
                "imbalance_before": None,
                "imbalance_after": None,
                "reason": "test",
            }
        ],
        app_id=f"scaleout-decisions:{RUN}",
        version=version,
        run_id=RUN,
    )


def switch(store: DeltaStore, version: int = 1) -> None:
    """The state manager's routing switch: part 1 of 2 of worker 0's keys to worker 1."""
    detail = {"action": "SwitchRouting", "from": [0], "to": [0, 1], "version": version}
    decide(store, detail, 1000 + version, ts=10)


def plan(store: DeltaStore, checkpoint: bool = False, epoch: int = 5, **extra: Any) -> None:
    """The state manager's plan for instance 1 (``extra``: e.g. ``checkpoint_id``, ``refs``)."""
    one = {
        "epoch": epoch,
        "group": 0,
        "sources": [0],
        "part": 1,
        "parts": 2,
        "checkpoint": checkpoint,
    }
    detail = {"action": "StartInstances", "plans": {"1": one | extra}}
    decide(store, detail, epoch)


def drain(*ws: Worker) -> None:
    for _ in range(20):
        for w in ws:
            w.step()


def partials_by_worker(store: DeltaStore) -> Counter[int]:
    t = store.read("partials", run_id=RUN, columns=["worker", "count"])
    out: Counter[int] = Counter()
    for w, c in zip(t["worker"].to_pylist(), t["count"].to_pylist()):
        out[w] += c
    return out


def partials_by_key(store: DeltaStore) -> Counter[str]:
    t = store.read("partials", run_id=RUN, columns=["key", "count"])
    out: Counter[str] = Counter()
    for k, c in zip(t["key"].to_pylist(), t["count"].to_pylist()):
        out[k] += c
    return out


def assert_exact(store: DeltaStore, inp: Input) -> None:
    """Every record applied exactly once (partials per key) and the key state is the
    sequential result: the whole count at one holder, the moved keys at worker 1."""
    assert partials_by_key(store) == inp.counts
    counts, holders, violations = final_key_state(store, RUN)
    assert counts == dict(inp.counts) and violations == 0
    assert all(n == 1 for n in holders.values())


def finish(inp: Input, *ws: Worker) -> None:
    drain(*ws)
    inp.end()
    drain(*ws)
    for w in ws:
        w.flush()


def count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """A list that grows by one at each call of ``module.name`` (which still runs)."""
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*a: Any) -> Any:
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(module, name, counted)
    return calls


def primed(env: Any, rounds: int) -> tuple[Topic, DeltaStore, Path, Input, Worker]:
    """The primary (worker 0) with ``rounds`` rounds of input processed and committed;
    partition 1 (the new instance's) exists, empty."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(rounds)
    drain(primary)
    primary.flush()
    return topic, store, tmp, inp, primary


def test_shadow_stays_behind_the_primarys_commit_and_goes_live_at_the_cut(env: Any) -> None:
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    inp.send(3)
    drain(primary)
    primary.flush()  # the committed state the secondary copies
    plan(store)
    secondary = make(tmp, 1)
    assert secondary.shadow is not None and secondary.shadow.active
    inp.send(4)
    drain(secondary)
    src = secondary.sets.shadow_meta["sources"]["0"] if secondary.sets else {}
    assert src["offset"] == 3 * len(KEYS)  # never past what the primary committed
    drain(primary)
    primary.flush()
    drain(secondary)
    assert src["offset"] == 7 * len(KEYS) and partials_by_worker(store)[1] == 0
    inp.send(2)  # the primary's backlog at the switch
    switch(store)
    inp.switch(1)
    inp.send(2, moved_to=1)
    primary.step()  # learns the switch: cuts at its offset, drops the moved keys after it
    (cut,) = primary.sets.cuts if primary.sets else []
    assert cut["at"] == 7 * len(KEYS) and cut["keys"] == len(MOVED)
    drain(secondary)
    assert src["live"] and src["cut"] == cut["at"]
    taken = secondary.sets.received if secondary.sets else {}
    assert {k for k, s in taken.items() if s == 1} == set(MOVED)
    finish(inp, primary, secondary)
    assert primary.handoffs_sent == 0  # stopped at the cut: no state leaves
    assert_exact(store, inp)
    by_worker = partials_by_worker(store)
    # the backlog after the cut (2 rounds) and the records routed to it: processed once, here
    assert by_worker[1] == 4 * len(MOVED)
    ho = store.read("handoffs", run_id=RUN, columns=["key", "applied_ms"]).to_pylist()
    assert {r["key"] for r in ho} == set(MOVED)
    assert {r["applied_ms"] for r in ho} == {src["live_ms"]}  # processing again from the cut


def test_restarted_old_and_new_instances_keep_the_cut(env: Any) -> None:
    """The primary dies right after committing its cut, the secondary after going live
    and committing: both resume from their commits, the run ends exact."""
    _topic, store, tmp, inp, primary = primed(env, 2)
    plan(store)
    first = make(tmp, 1)
    inp.send(3)
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    primary.step()  # cut at 24 (its offset), the first step after it processed the backlog
    assert primary.version is not None
    primary = make(tmp, 0)  # restarted: the cut comes back from its committed state
    assert primary.sets is not None and len(primary.sets.cuts) == 1
    assert set(primary.sets.cut) == set(MOVED)
    drain(first)
    first.flush()
    read = first.shadow.read if first.shadow else 0
    assert read > 0
    inp.send(1, moved_to=1)
    again = make(tmp, 1)  # crashed after its commit: same plan epoch, resumes live
    assert again.shadow is not None and again.shadow.read == read
    finish(inp, primary, again)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)


def shadow_view(w: Worker) -> dict[str, tuple[int, str, bool, dict[str, Any]]]:
    """Each shadowed key of ``w``: (set, status, live, state), decoding every base key."""
    assert w.sets is not None
    return {k: (e.set_id, e.status.value, e.live, e.state) for k, e in w.sets.shadow.items()}


def test_restored_keys_are_not_rewritten_and_a_restart_restores_them_again(env: Any) -> None:
    """The restore keeps its keys as the source's rows (decoded when used): the first
    commit writes none of them; an instance restarted before or after going live
    restores the same part again, live where its plan reached the cut; exact."""
    _topic, store, tmp, inp, primary = primed(env, 3)
    plan(store)
    first = make(tmp, 1)
    first.flush()
    own = store.read("operator_state", run_id=RUN, columns=["key"], filters=[("instance", "=", 1)])
    assert set(own["key"].to_pylist()) == {""}  # its own (meta) row only
    restored = shadow_view(first)
    assert set(restored) == set(MOVED) and all(v[3]["count"] == 3 for v in restored.values())
    again = make(tmp, 1)  # restarted before it changed any key
    assert shadow_view(again) == restored
    inp.send(2)
    drain(primary)
    primary.flush()
    plan(store, epoch=6)  # a later plan: restored where the primary will cut
    again = make(tmp, 1, max_fetch=1)  # one step reads 2 records: stops right after the cut
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    primary.step()  # the cut, where the new restore stands: nothing to replay
    meta = again.sets.shadow_meta if again.sets else None
    assert meta is not None
    for _ in range(200):
        again.step()
        if meta["sources"]["0"]["live"]:
            break
    again.flush()
    assert again.sets is not None and again.sets.shadow.base_size >= len(MOVED) - 2
    live = shadow_view(again)
    assert len(live) >= len(MOVED) - 2 and all(v[2] for v in live.values())
    third = make(tmp, 1)  # restarted after going live: the keys still shadowed are live
    assert shadow_view(third) == live
    finish(inp, primary, third)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)


def test_replacement_restores_the_newest_checkpoint_and_replays_up_to_the_cut(env: Any) -> None:
    """Checkpointing: theta at tau from ``operator_state``, beta and the rest replayed
    suppressed up to the cut, the primary's backlog after it live."""
    from skewlab.control.scaleout.state import write_checkpoint

    topic, store, tmp, inp, primary = primed(env, 2)
    inp.send(1)  # received, not yet processed: beta of the checkpoint
    ends = Client(topic).end_offsets(TOPIC)
    out = write_checkpoint(store, RUN, 0, [0], 0, ends)
    assert out["beta_records"] == len(KEYS)
    drain(primary)
    primary.flush()  # the primary moves on past the checkpoint
    inp.send(2)
    plan(store, checkpoint=True)
    new = make(tmp, 1)
    assert new.sets is not None and new.sets.shadow_meta is not None
    restore = new.sets.shadow_meta["restore"]
    assert restore["checkpoint"] == 0 and restore["beta_records"] == len(KEYS)
    assert restore["keys"] == len(MOVED)
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    primary.step()
    drain(new)
    taken = {k for k, s in new.sets.received.items() if s == 1}
    assert taken == set(MOVED)
    finish(inp, primary, new)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)
    ho = store.read("handoffs", run_id=RUN, columns=["key", "tuples"]).to_pylist()
    assert all(r["tuples"] == 3 for r in ho)  # beta (1 round) + the 2 rounds after it


def test_a_checkpoint_is_restored_by_reference_before_its_copy_is_written(env: Any) -> None:
    """The plan names the checkpoint with the commit version and routed end it was taken
    at (``refs``): the replacement reads theta there (the rows the copy is made from) at
    once, never waiting for the copy, and restores what the copy holds; exact."""
    from skewlab.control.scaleout.state import write_checkpoint
    from skewlab.io.state_store import CheckpointStore

    topic, store, tmp, inp, primary = primed(env, 2)
    inp.send(1)  # received, not yet processed: beta
    ends = Client(topic).end_offsets(TOPIC)
    tau = primary.version
    assert tau is not None
    refs = {"0": {"version": tau, "end": ends[0]}}
    drain(primary)
    primary.flush()  # the primary moves on past the checkpoint
    inp.send(2)
    plan(store, checkpoint=True, epoch=5, checkpoint_id=0, refs=refs)
    assert CheckpointStore(store, f"{RUN}#g0", "g0").checkpoints() == []  # no copy yet
    new = make(tmp, 1)
    assert new.sets is not None and new.sets.shadow_meta is not None
    restore = new.sets.shadow_meta["restore"]
    assert restore["checkpoint"] == 0 and restore["by_reference"]
    assert restore["beta_records"] == len(KEYS) and restore["keys"] == len(MOVED)
    by_reference = shadow_view(new)
    # the copy of the same checkpoint, restored by a later plan, holds the same part
    write_checkpoint(store, RUN, 0, [0], 0, {0: ends[0]}, {0: tau})
    plan(store, checkpoint=True, epoch=6, checkpoint_id=0)
    copy = make(tmp, 1)
    assert copy.sets is not None and copy.sets.shadow_meta is not None
    assert not copy.sets.shadow_meta["restore"]["by_reference"]
    assert shadow_view(copy) == by_reference
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    primary.step()
    drain(copy)
    finish(inp, primary, copy)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)
    ho = store.read("handoffs", run_id=RUN, columns=["key", "tuples"]).to_pylist()
    assert all(r["tuples"] == 3 for r in ho)  # beta (1 round) + the 2 rounds after it


def test_stopped_secondary_counts_nothing_and_a_new_plan_starts_afresh(env: Any) -> None:
    """The load fell back: the secondary is stopped after committing its shadow; later a
    new plan (epoch) on the same partition restores again instead of resuming."""
    _topic, store, tmp, inp, primary = primed(env, 2)
    plan(store, epoch=5)
    stopped = make(tmp, 1)
    inp.send(2)
    drain(primary)
    primary.flush()
    drain(stopped)
    stopped.flush()  # it committed shadow progress, then was killed
    assert stopped.version is not None and stopped.version > 0
    drain(primary)
    primary.flush()
    plan(store, epoch=6)  # alarming again later
    again = make(tmp, 1)
    meta = again.sets.shadow_meta if again.sets else None
    assert meta is not None and meta["epoch"] == 6
    assert meta["sources"]["0"]["offset"] == primary.offset  # copied afresh, not resumed
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    finish(inp, again, primary)
    assert_exact(store, inp)
    by_worker = partials_by_worker(store)
    assert by_worker[1] == len(MOVED)  # only what was routed to it after the switch


def test_a_source_without_a_switch_hands_off_as_before(env: Any) -> None:
    """No switch decision (a run without cuts): the markers end the sets, the primary
    hands off, the shadow (behind the primary's commit) takes and compares."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    primary.flush()
    plan(store)
    secondary = make(tmp, 1)
    inp.send(3)
    inp.switch(1)
    inp.send(1, moved_to=1)
    finish(inp, primary, secondary)
    assert primary.handoffs_sent == len(MOVED) and not (primary.sets and primary.sets.cuts)
    assert_exact(store, inp)


class Died(Exception):
    """A worker process killed inside its flush."""


def dies_in(fn: Any, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Run ``fn()``; a flush in it is killed after writing everything but ``partials``
    (its commit). Returns whether it died."""

    def die(name: str) -> None:
        if name == "worker.before_commit":
            raise Died(name)

    with monkeypatch.context() as m:
        m.setattr(worker_mod, "crash_point", die)
        try:
            fn()
        except Died:
            return True
    return False


def dying_flush(w: Worker, monkeypatch: pytest.MonkeyPatch) -> None:
    """``w.flush()`` killed after writing everything but ``partials`` (its commit)."""
    assert dies_in(w.flush, monkeypatch)


def unsaved(w: Worker) -> bool:
    """Whether ``w.flush()`` would commit (it read something since its last commit)."""
    return w._commit_version() > (-1 if w.version is None else w.version)


@pytest.mark.parametrize("seed", range(12))
def test_any_interleaving_applies_every_record_once(
    env: Any, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seeded interleavings of the old and the new instance's steps, flushes and
    restarts (also killed inside a flush, leaving state rows of a commit that never
    happened), with the switch (and so the cut) at a different offset each time: every
    record is counted once and the key state is the sequential result."""
    topic, store, tmp = env
    rng = np.random.default_rng(seed)
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0, max_fetch=int(rng.integers(3, 30)))
    inp.send(int(rng.integers(0, 3)))
    drain(primary)
    primary.flush()
    plan(store, checkpoint=False)
    new = make(tmp, 1, max_fetch=int(rng.integers(3, 30)))
    rounds_before = int(rng.integers(1, 6))
    rounds_after = int(rng.integers(1, 4))
    switched = False
    for t in range(60):
        if t < rounds_before:
            inp.send(1)
        elif not switched:
            switch(store)
            inp.switch(1)
            switched = True
        elif t < rounds_before + 1 + rounds_after:
            inp.send(1, moved_to=1)
        act = int(rng.integers(0, 8))
        if act == 0:
            primary.step()
        elif act == 1:
            new.step()
        elif act == 2:
            primary.flush()
        elif act == 3:
            new.flush()
        elif act == 4 and rng.random() < 0.3:  # a crash: the uncommitted work is lost
            primary = make(tmp, 0, max_fetch=primary.s.max_fetch)
        elif act == 5 and rng.random() < 0.3:
            new = make(tmp, 1, max_fetch=new.s.max_fetch)
        elif act == 6 and rng.random() < 0.5 and dies_in(primary.step, monkeypatch):
            primary = make(tmp, 0, max_fetch=primary.s.max_fetch)  # maybe after a promise
        elif act == 7 and rng.random() < 0.3 and unsaved(new):
            dying_flush(new, monkeypatch)
            new = make(tmp, 1, max_fetch=new.s.max_fetch)
    finish(inp, primary, new)
    drain(primary, new)
    primary.flush()
    new.flush()
    assert_exact(store, inp)
    (cut,) = primary.sets.cuts if primary.sets else []  # one cut, kept across restarts
    src = new.sets.shadow_meta["sources"]["0"] if new.sets and new.sets.shadow_meta else {}
    assert src["live"] and src["cut"] == cut["at"]
    print(f"seed {seed}: cut {cut['keys']} keys at {cut['at']}")


def test_a_cut_after_a_flush_that_died_is_committed_above_it(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The primary dies inside a flush (state rows at 60, no commit) before the switch;
    restarted, it cuts at its commit (24), earlier than those rows: its next commit goes
    above them, so the secondary never reads the dead flush's rows as a commit without
    the cut."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0, max_fetch=36, flush_interval_s=1000.0)
    inp.send(2)
    drain(primary)
    primary.flush()
    assert primary.version == 24
    plan(store)
    secondary = make(tmp, 1)
    inp.send(3)
    primary.step()
    assert primary.offset == 60
    dying_flush(primary, monkeypatch)
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    primary = make(tmp, 0, max_fetch=36, flush_interval_s=1000.0)
    primary.step()  # the cut at 24, then the same 36 records the dead process read
    (cut,) = primary.sets.cuts if primary.sets else []
    assert cut["at"] == 24 and primary.offset == 60
    primary.flush()
    assert primary.version is not None and primary.version > 60
    finish(inp, primary, secondary)
    src = secondary.sets.shadow_meta["sources"]["0"] if secondary.sets else {}
    assert src["live"] and src["cut"] == 24
    assert_exact(store, inp)


def test_a_cut_promised_by_a_dead_process_is_kept_by_the_next(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The primary promises its cut at 36 (its ``Cut`` row) and dies in the flush that
    would commit it; restarted at its commit (24) it reads up to 36 before it cuts:
    the secondary, already live at 36 from the promise, and it agree."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0, flush_interval_s=1000.0)
    inp.send(2)
    drain(primary)
    primary.flush()
    plan(store)
    secondary = make(tmp, 1)
    inp.send(1)
    primary.step()  # 24 -> 36, not committed
    inp.send(2)
    switch(store)
    inp.switch(1)
    inp.send(1, moved_to=1)
    assert dies_in(primary.step, monkeypatch)  # promised at 36, died committing it
    drain(secondary)  # live from the promise, before any commit of the cut
    src = secondary.sets.shadow_meta["sources"]["0"] if secondary.sets else {}
    assert src["live"] and src["cut"] == 36
    primary = make(tmp, 0, flush_interval_s=1000.0)
    assert primary.offset == 24 and primary.sets is not None and not primary.sets.cuts
    primary.step()  # reads up to the promise: 24 -> 36, no cut yet
    assert primary.offset == 36 and not primary.sets.cuts
    primary.step()
    assert [c["at"] for c in primary.sets.cuts] == [36]
    finish(inp, primary, secondary)
    assert_exact(store, inp)


def test_an_old_instance_reads_decisions_only_when_they_changed(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The switch look-up of an instance reads ``decisions`` only when the table's
    version moved since its last look (a look is then ~2 ms): a plan or a switch
    written in between is read at the next look."""
    topic, store, tmp = env
    inp = Input(topic)
    topic.parts[1] = []
    primary = make(tmp, 0)
    reads = count_calls(monkeypatch, switch_watch, "switches")
    inp.send(1)
    plan(store)
    primary.step()
    primary.step()
    primary.step()
    assert len(reads) == 1 and primary.followed  # read once: the plan
    switch(store)
    primary.step()  # the switch: read, cut
    assert len(reads) == 2 and primary.sets is not None and len(primary.sets.cuts) == 1


def test_a_shadow_replaying_before_any_cut_commits_four_times_less_often(env: Any) -> None:
    """Before any cut a shadow's commit saves only its replay progress: it comes every
    ``FOLLOWED_FLUSH`` flush intervals (on the injected clock), at the usual interval
    once keys are live."""
    from skewlab.testing import FakeClock

    _topic, store, tmp, inp, primary = primed(env, 1)
    plan(store)
    clock = FakeClock(0.0)
    new = Worker(
        dataclasses.replace(make(tmp, 1).s, flush_interval_s=1.0, max_fetch=6),
        clock=clock,
        busy=lambda s: None,
    )
    assert new.shadow is not None
    new.shadow.poll_s = new.shadow.cut_poll_s = 0.0
    inp.send(6)  # after the restore: the primary works it off and commits, the shadow replays
    drain(primary)
    primary.flush()
    steps = 0
    while new.shadow.active and not new.shadow.live_any and steps < 6:
        clock.advance(1.5)  # past one flush interval each step
        n = new.step()
        steps += 1
        assert n > 0  # replaying every step
    assert steps == 6  # still replaying: 6 rounds after the restore, 12 records per step
    assert new.flushes == 2  # at 6 s and 12 s (every 4 x 1 s), not at each 1.5 s step


def test_a_shadow_looks_for_its_cut_only_when_decisions_changed(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shadow without its cut looks for it often, but reads the sources' ``Cut``
    rows only when the ``decisions`` table's version moved since its last look; the
    old instance's promise is such a change, seen at the next look."""
    from skewlab.live.worker import shadow as shadow_mod

    _topic, store, tmp, inp, primary = primed(env, 2)
    plan(store)
    new = make(tmp, 1)
    assert new.shadow is not None
    reads = count_calls(monkeypatch, shadow_mod, "cuts_of")
    for _ in range(4):
        new.step()
    assert len(reads) == 1  # the first look; the version stood since
    inp.send(1)
    switch(store)  # a decision row: the version moves, no cut for this plan yet
    new.step()
    assert len(reads) == 2 and new.shadow.meta["sources"]["0"].get("cut") is None
    new.step()
    assert len(reads) == 2
    inp.switch(1)
    primary.step()  # sees the switch: its promise is written
    new.step()
    assert len(reads) == 3
    cut = primary.sets.cuts[0]["at"] if primary.sets else None
    assert new.shadow.meta["sources"]["0"]["cut"] == cut
    for _ in range(4):
        new.step()
    assert len(reads) == 3  # the cut known: no more looks
    finish(inp, primary, new)
    assert_exact(store, inp)
