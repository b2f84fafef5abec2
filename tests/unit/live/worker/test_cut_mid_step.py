"""An old instance's cut, off its step's path: seen within a chunk, keys hashed before.

An instance takes full steps (a flush interval's work) until a plan names it as a
source; with ``switch_at_start`` the plan and the switch come at once, while it is
inside such a step. It pays its cost a chunk (``1 / FOLLOWED_STEP`` of a step) at a
time and looks for a switch after each, so its cut ``P`` comes a chunk after the
switch, not a step: the replacement has that much less to replay. Same in-memory
topic and helpers as :mod:`tests.unit.live.worker.test_shadow_worker`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from skewlab.control.scaleout.state import write_checkpoint
from skewlab.io.kafka.base import FetchedRange, Record
from skewlab.live.worker.process import Worker
from skewlab.pipeline import events
from skewlab.state import owner, split_hash
from tests.unit.live.worker.test_shadow_worker import (
    KEYS,
    MOVED,
    RUN,
    TOPIC,
    Client,
    assert_exact,
    env,
    finish,
    make,
    plan,
    primed,
    switch,
)

__all__ = ["env"]  # the fixture, imported for the tests below

SERVICE_US, FLUSH_S = 1000.0, 0.2
FULL = int(FLUSH_S * 1e6 / SERVICE_US)
"""A full step's records (a flush interval's work); a chunk is ``FULL // 16``."""


def full_stepper(w: Worker, busy: Any) -> Worker:
    """``w``'s instance again, paying its cost through ``busy`` (records of 1 ms each)."""
    s = dataclasses.replace(w.s, cost="spin", service_us=SERVICE_US, flush_interval_s=FLUSH_S)
    out = Worker(dataclasses.replace(s, max_fetch=10 * FULL), busy=busy)
    out.watch.poll_s = (0.0, 0.0)
    return out


def decided_in_first_chunk(env: Any, switch_too: bool) -> tuple[Any, Any, Any, Worker, list[float]]:
    """A primary with 3 rounds committed, taking full steps and more than a full step
    behind; while it pays for the first chunk of its next step the state manager takes
    a checkpoint at its commit and plans a replacement (and with ``switch_too``
    switches). Returns (store, tmp, input, primary, the costs it paid)."""
    topic, store, tmp, inp, primary = primed(env, 3)
    paid: list[float] = []

    def busy(seconds: float) -> None:
        paid.append(seconds)
        if len(paid) == 1:
            write_checkpoint(store, RUN, 0, [0], 0, Client(topic).end_offsets(TOPIC))
            plan(store, checkpoint=True)
            if switch_too:
                switch(store)

    primary = full_stepper(primary, busy)
    inp.send(FULL // len(KEYS) + 2)
    return store, tmp, inp, primary, paid


def test_a_switch_during_a_full_step_is_cut_a_chunk_after_it(env: Any) -> None:
    """Checkpointing with the switch at the start: the checkpoint at the primary's
    commit, then plan and switch written while it works off a full step. The cut is at
    the end of the chunk it was paying for; its step ends there (the rest is read
    again); the replacement restores the checkpoint, replays up to the cut and the run
    is exact."""
    store, tmp, inp, primary, paid = decided_in_first_chunk(env, switch_too=True)
    tau, chunk = primary.offset, FULL // Worker.FOLLOWED_STEP
    primary.step()
    assert paid[0] == chunk * SERVICE_US * 1e-6  # the first chunk's cost, alone
    (cut,) = primary.sets.cuts if primary.sets else []
    assert cut["at"] == tau + chunk and cut["keys"] == len(MOVED)
    assert primary.offset == tau + chunk  # the step ended at the cut
    assert primary.version == tau + chunk  # and committed it at once
    inp.switch(1)
    inp.send(1, moved_to=1)
    new = make(tmp, 1)
    assert new.sets is not None and new.sets.shadow_meta is not None
    assert new.sets.shadow_meta["restore"]["checkpoint"] == 0
    finish(inp, primary, new)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)
    src = new.sets.shadow_meta["sources"]["0"]
    assert src["live"] and src["cut"] == tau + chunk  # replayed up to the cut, then live
    ho = store.read("handoffs", run_id=RUN, columns=["key"]).to_pylist()
    assert {r["key"] for r in ho} == set(MOVED)


def test_a_plan_during_a_full_step_ends_it_a_chunk_after_and_commits_there(env: Any) -> None:
    """Checkpointing, the plan written while the old instance works off a full step:
    the step ends after the chunk in progress and commits there at once (the commit
    bounds the replacement's replay), the next steps are a followed instance's short
    ones, and the switch after them is cut and exact."""
    store, tmp, inp, primary, _paid = decided_in_first_chunk(env, switch_too=False)
    tau, chunk = primary.offset, FULL // Worker.FOLLOWED_STEP
    primary.step()
    assert primary.followed and not (primary.sets and primary.sets.cuts)
    assert primary.offset == tau + chunk  # the step ended after the chunk
    assert primary.version == tau + chunk  # and committed there
    assert primary.step() == chunk  # followed: a short step
    new = make(tmp, 1)
    switch(store)
    primary.step()
    (cut,) = primary.sets.cuts if primary.sets else []
    assert cut["at"] == tau + 2 * chunk and cut["keys"] == len(MOVED)
    inp.switch(1)
    inp.send(1, moved_to=1)
    finish(inp, primary, new)
    assert primary.handoffs_sent == 0
    assert_exact(store, inp)


def test_without_a_switch_a_full_step_pays_chunk_by_chunk_and_runs_to_its_end(
    env: Any,
) -> None:
    """No decision: the step runs its full length, its cost paid in chunks that add up
    to the cost of every record applied."""
    _topic, _store, _tmp, inp, primary = primed(env, 1)
    start = primary.offset
    paid: list[float] = []
    primary = full_stepper(primary, paid.append)
    inp.send(FULL // len(KEYS) + 2)
    assert primary.step() == FULL
    assert primary.offset == start + FULL and not (primary.sets and primary.sets.cuts)
    chunk = FULL // Worker.FOLLOWED_STEP
    assert len(paid) == -(-FULL // chunk)
    assert abs(sum(paid) - FULL * SERVICE_US * 1e-6) < 1e-9


def test_a_fetched_range_cuts_into_chunks_that_keep_every_record() -> None:
    recs = [Record(TOPIC, 0, i, b"k", str(i).encode(), (), i) for i in range(10)]
    rng = FetchedRange.of_records(TOPIC, 0, recs)
    parts = rng.chunks(4)
    assert [len(p) for p in parts] == [4, 4, 2]
    assert [r.offset for p in parts for r in p] == list(range(10))
    assert [p[-1].value for p in parts] == [b"3", b"7", b"9"]
    assert rng.chunks(10) == [rng]


def test_an_old_instance_hashes_its_keys_once_followed_and_at_the_cut_only_new_ones(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The split hash of every key held is taken when a plan first names the instance as
    a source; at the switch the cut hashes only the keys first seen since, and cuts
    exactly the moved part's keys."""
    from skewlab.state import operator_state

    hashed: list[str] = []
    real = operator_state.key_hashes

    def counted(keys: list[str], seed: int) -> list[int]:
        hashed.extend(keys)
        return real(keys, seed)

    monkeypatch.setattr(operator_state, "key_hashes", counted)
    _topic, store, _tmp, inp, primary = primed(env, 2)
    plan(store)
    primary.step()  # sees the plan: followed
    assert primary.followed and sorted(hashed) == sorted(KEYS)
    hashed.clear()
    new = "fresh"
    inp.topic.append(
        0, new, events.encode_routed(new, 9.0, inp.n, 1), [events.src_header(0, inp.n)]
    )
    inp.n += 1
    inp.counts[new] += 1
    primary.step()
    switch(store)
    inp.switch(1)
    primary.step()
    (cut,) = primary.sets.cuts if primary.sets else []
    assert hashed == [new]  # the only key the cut had not hashed before
    moved = set(MOVED) | ({new} if owner(new, 2, split_hash) == 1 else set())
    assert set(primary.sets.cut if primary.sets else {}) == moved
    assert cut["keys"] == len(moved)


def test_the_promise_is_written_before_the_keys_are_looked_at(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new instance waits only for the cut's offset: the ``Cut`` row is in
    ``decisions`` before the old instance looks at which keys it stops (100k at the
    README's scale); the committed cut then counts them."""
    from skewlab.live.worker.cut import cuts_of
    from skewlab.pipeline.handoff import KeySets

    _topic, store, _tmp, inp, primary = primed(env, 2)
    plan(store)
    primary.step()
    promised_first: list[bool] = []
    real = KeySets.cuttable

    def looked(self: KeySets, moved: Any) -> list[str]:
        promised_first.append(bool(cuts_of(store, RUN, 0)))
        return real(self, moved)

    monkeypatch.setattr(KeySets, "cuttable", looked)
    switch(store)
    inp.switch(1)
    primary.step()
    assert promised_first == [True]
    (promise,) = cuts_of(store, RUN, 0).values()
    (cut,) = primary.sets.cuts if primary.sets else []
    assert promise["at"] == cut["at"] and "keys" not in promise
    assert cut["keys"] == len(MOVED)
