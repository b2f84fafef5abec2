"""One contract suite run over every registered grouping (STYLE.md rule 10)."""

from __future__ import annotations

import pickle
from collections import Counter, defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError, StateError
from skewlab.grouping import GROUPING_NAMES, GROUPINGS, make_grouping
from skewlab.grouping.base import Grouping, GroupingConfig
from skewlab.hashing import DKG_SEED, bucket
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.testing import FakeClock

pytestmark = pytest.mark.unit

W = 8
CHUNK = 400
STEP = 5.0  # seconds of clock per chunk: 30 chunks span warm-up, promotions, checks

every_grouping = pytest.mark.parametrize("name", GROUPING_NAMES)


def run_batches(g: Grouping, clock: FakeClock, vocab: KeyVocab, ids: np.ndarray) -> np.ndarray:
    out = []
    for i in range(0, len(ids), CHUNK):
        clock.advance(STEP)
        out.append(g.route_batch(KeyBatch(ids[i : i + CHUNK], vocab)))
    return np.concatenate(out) if out else np.empty(0, dtype=np.int64)


def run_single(g: Grouping, clock: FakeClock, vocab: KeyVocab, ids: np.ndarray) -> np.ndarray:
    out = []
    keys = vocab.keys
    for i in range(0, len(ids), CHUNK):
        clock.advance(STEP)
        out.extend(g.route(keys[j]) for j in ids[i : i + CHUNK].tolist())
    return np.array(out, dtype=np.int64)


@every_grouping
def test_config_satisfies_protocols(name: str) -> None:
    cfg = make_grouping(name, workers=W)
    assert isinstance(cfg, GroupingConfig)
    g = cfg.build(clock=FakeClock())
    assert isinstance(g, Grouping)
    assert g.workers == W
    assert cfg.name == name


@every_grouping
def test_exact_merge_of_partials(name: str, stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    clock = FakeClock()
    routed = run_batches(make_grouping(name, workers=W).build(clock=clock), clock, vocab, ids)
    assert routed.shape == ids.shape and routed.dtype == np.int64
    partials: dict[int, Counter[str]] = defaultdict(Counter)
    for key_id, worker in zip(ids.tolist(), routed.tolist()):
        partials[worker][vocab.keys[key_id]] += 1
    merged: Counter[str] = Counter()
    for part in partials.values():
        merged.update(part)
    assert merged == Counter(vocab.keys[i] for i in ids.tolist())
    assert sum(sum(p.values()) for p in partials.values()) == len(ids)


@every_grouping
def test_deterministic(name: str, stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    runs = []
    for _ in range(2):
        clock = FakeClock()
        runs.append(
            run_batches(make_grouping(name, workers=W).build(clock=clock), clock, vocab, ids)
        )
    assert np.array_equal(runs[0], runs[1])


def _used(vocab: KeyVocab, ids: np.ndarray, routed: np.ndarray) -> dict[str, set[int]]:
    used: dict[str, set[int]] = defaultdict(set)
    for key_id, worker in zip(ids.tolist(), routed.tolist()):
        used[vocab.keys[key_id]].add(worker)
    return used


@every_grouping
def test_bounds(name: str, stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    clock = FakeClock()
    g = make_grouping(name, workers=W).build(clock=clock)
    routed = run_batches(g, clock, vocab, ids)
    assert routed.min() >= 0 and routed.max() < W
    used = _used(vocab, ids, routed)
    most = max(len(ws) for ws in used.values())
    limit = {"shuffle": W, "key": 1, "pkg": 2, "dkg": W, "d-choices": W, "w-choices": W}[name]
    assert 1 <= most <= limit
    if name == "key":
        assert all(ws == {bucket(k, W, DKG_SEED)} for k, ws in used.items())
    if name == "shuffle":
        per_worker = np.bincount(routed, minlength=W)
        assert per_worker.max() - per_worker.min() <= 1


def test_dkg_uses_a_ring_slice_no_larger_than_its_pool(stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    clock = FakeClock()
    g = make_grouping("dkg", workers=W).build(clock=clock)
    max_pool: dict[str, int] = defaultdict(lambda: 2)
    routed = []
    for i in range(0, len(ids), CHUNK):
        clock.advance(STEP)
        chunk = ids[i : i + CHUNK]
        keys = {vocab.keys[j] for j in chunk.tolist()}
        for k in keys:
            max_pool[k] = max(max_pool[k], g.pool_size(k))
        routed.append(g.route_batch(KeyBatch(chunk, vocab)))
        for k in keys:
            max_pool[k] = max(max_pool[k], g.pool_size(k))
    used = _used(vocab, ids, np.concatenate(routed))
    assert max(max_pool.values()) > 2, "the hot keys should have scaled up"
    for key, workers in used.items():
        home = bucket(key, W, DKG_SEED)
        offsets = {(w - home) % W for w in workers}
        assert max(offsets) < max_pool[key] <= W


def test_d_choices_with_fixed_d_stays_within_d_workers(stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    clock = FakeClock()
    routed = run_batches(
        make_grouping("d-choices", workers=W, d=3).build(clock=clock), clock, vocab, ids
    )
    used = _used(vocab, ids, routed)
    assert max(len(ws) for ws in used.values()) == 3


@every_grouping
def test_batch_equals_single_events(name: str, stream: tuple[KeyVocab, np.ndarray]) -> None:
    vocab, ids = stream
    cfg = make_grouping(name, workers=W)
    c1, c2 = FakeClock(), FakeClock()
    g1, g2 = cfg.build(clock=c1), cfg.build(clock=c2)
    assert np.array_equal(run_batches(g1, c1, vocab, ids), run_single(g2, c2, vocab, ids))
    assert dict(g1.snapshot()) == dict(g2.snapshot())


@every_grouping
@settings(max_examples=15, deadline=None)
@given(
    data=st.lists(st.integers(0, 30), min_size=1, max_size=300),
    steps=st.lists(st.sampled_from([0.0, 1.0, 14.0, 61.0]), min_size=1, max_size=8),
    workers=st.integers(1, 6),
)
def test_batch_equals_single_events_property(
    name: str, data: list[int], steps: list[float], workers: int
) -> None:
    vocab = KeyVocab(f"p{i}" for i in range(31))
    ids = np.array(data, dtype=np.int64)
    cfg = make_grouping(name, workers=workers, **({"capacity": 10} if name == "dkg" else {}))
    c1, c2 = FakeClock(), FakeClock()
    g1, g2 = cfg.build(clock=c1), cfg.build(clock=c2)
    parts = np.array_split(ids, len(steps))
    for step, part in zip(steps, parts):
        c1.advance(step)
        c2.advance(step)
        got = g1.route_batch(KeyBatch(part, vocab))
        want = [g2.route(vocab.keys[i]) for i in part.tolist()]
        assert got.tolist() == want
    assert dict(g1.snapshot()) == dict(g2.snapshot())


@every_grouping
def test_snapshot_restore_continues_identically(
    name: str, stream: tuple[KeyVocab, np.ndarray]
) -> None:
    vocab, ids = stream
    cfg = make_grouping(name, workers=W)
    half = (len(ids) // CHUNK // 2) * CHUNK
    clock = FakeClock()
    g = cfg.build(clock=clock)
    run_batches(g, clock, vocab, ids[:half])
    snap = pickle.loads(pickle.dumps(g.snapshot()))
    with pytest.raises(TypeError):
        snap["grouping"] = "other"  # type: ignore[index]

    clock2 = FakeClock(clock.now())
    restored = cfg.build(state=snap, clock=clock2)
    # The restored router sees the same keys through a fresh vocabulary with other ids.
    fresh = KeyVocab(reversed(vocab.keys))
    rest = ids[half:]
    fresh_ids = np.array([fresh.id_of(vocab.keys[i]) for i in rest.tolist()], dtype=np.int64)
    want = run_batches(g, clock, vocab, rest)
    got = run_batches(restored, clock2, fresh, fresh_ids)
    assert np.array_equal(want, got)
    assert dict(g.snapshot()) == dict(restored.snapshot())


@every_grouping
def test_snapshot_refuses_another_grouping_or_worker_count(name: str) -> None:
    cfg = make_grouping(name, workers=W)
    snap = cfg.build(clock=FakeClock()).snapshot()
    with pytest.raises(StateError):
        make_grouping(name, workers=W + 1).build(state=snap, clock=FakeClock())
    other = "key" if name != "key" else "shuffle"
    with pytest.raises(StateError):
        make_grouping(other, workers=W).build(state=snap, clock=FakeClock())


@pytest.mark.parametrize("cls", sorted(set(GROUPINGS.values()), key=lambda c: c.name))
@pytest.mark.parametrize("workers", [0, -3, True, 2.0, "4", None])
def test_bad_worker_counts_are_config_errors(cls: type, workers: object) -> None:
    with pytest.raises(ConfigError, match="workers"):
        cls(workers=workers)
