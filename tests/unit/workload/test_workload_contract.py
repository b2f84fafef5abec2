"""One contract suite over every synthetic workload (see skewlab.workload.base)."""

from __future__ import annotations

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.workload import (
    CountryHalfWorkload,
    CountryWorkload,
    DynamicWorkload,
    EpsSwitchWorkload,
    Workload,
    ZipfWorkload,
    parse_workload,
)
from skewlab.workload._common import BLOCK

pytestmark = pytest.mark.unit

WORKLOADS = [
    pytest.param(ZipfWorkload(seed=3, keys=500), id="zipf"),
    pytest.param(CountryWorkload(seed=3, ratio=60), id="country"),
    pytest.param(CountryHalfWorkload(seed=3, ratio=80), id="country-half"),
    pytest.param(EpsSwitchWorkload(seed=3, low_s=1.0, high_s=2.0, keys=300), id="eps-switch"),
    pytest.param(DynamicWorkload(seed=3, period=1.0, shift=2, keys=300), id="dynamic"),
]


def _collect(w: Workload, n: int, chunk: int, rate: float = 10_000.0):
    keys, ids, ts, sizes, seqs = [], [], [], [], []
    for c in w.events(n, chunk=chunk, rate=rate):
        assert 0 < len(c) <= chunk
        assert len(c.ts) == len(c.sizes) == len(c)
        assert c.keys.ids.dtype == np.int64
        seqs.append(c.seq0)
        keys.extend(c.keys.keys())
        ids.append(c.keys.ids)
        ts.append(c.ts)
        sizes.append(c.sizes)
    return keys, np.concatenate(ids), np.concatenate(ts), np.concatenate(sizes), seqs


@pytest.mark.parametrize("w", WORKLOADS)
def test_is_a_workload_with_a_name(w):
    assert isinstance(w, Workload)
    assert w.spec().startswith(w.name)


@pytest.mark.parametrize("w", WORKLOADS)
def test_same_seed_same_stream_whatever_the_chunk_size(w):
    n = BLOCK + 5_000
    ref_keys, ref_ids, ref_ts, ref_sizes, _ = _collect(w, n, chunk=n)
    for chunk in (1_000, 7_777, BLOCK, BLOCK + 1):
        keys, ids, ts, sizes, _ = _collect(w, n, chunk=chunk)
        assert keys == ref_keys
        assert np.array_equal(ids, ref_ids)
        assert np.array_equal(ts, ref_ts)
        assert np.array_equal(sizes, ref_sizes)


@pytest.mark.parametrize("w", WORKLOADS)
def test_other_seed_other_stream(w):
    a, *_ = _collect(w, 2_000, chunk=500)
    b, *_ = _collect(type(w)(**{**w.__dict__, "seed": w.seed + 1}), 2_000, chunk=500)
    assert a != b


@pytest.mark.parametrize("w", WORKLOADS)
def test_chunks_are_contiguous_exact_and_timed_by_rate(w):
    keys, _, ts, sizes, seqs = _collect(w, 10_001, chunk=3_000, rate=500.0)
    assert len(keys) == 10_001
    assert seqs == [0, 3_000, 6_000, 9_000]
    assert np.allclose(ts, np.arange(10_001) / 500.0)
    assert np.all(np.diff(ts) >= 0)
    assert np.all(sizes == 100)


@pytest.mark.parametrize("w", WORKLOADS)
def test_ids_index_one_vocabulary_per_stream(w):
    chunks = list(w.events(5_000, chunk=1_000))
    vocab = chunks[0].vocab
    assert all(c.vocab is vocab for c in chunks)
    for c in chunks:
        assert c.keys.keys() == [vocab.keys[i] for i in c.keys.ids.tolist()]
    assert len(set(vocab.keys)) == len(vocab)
    assert next(iter(w.events(5_000, chunk=1_000))).vocab is not vocab


@pytest.mark.parametrize("w", WORKLOADS)
def test_spec_round_trips(w):
    assert parse_workload(w.spec(), seed=w.seed) == w


@pytest.mark.parametrize("w", WORKLOADS)
def test_zero_events_and_bad_stream_arguments(w):
    assert list(w.events(0)) == []
    for kwargs in ({"n": -1}, {"n": 10, "chunk": 0}, {"n": 10, "rate": 0.0}, {"n": 1.5}):
        with pytest.raises(ConfigError):
            list(w.events(**kwargs))


@pytest.mark.parametrize("w", WORKLOADS)
def test_bad_seed_and_size_are_refused(w):
    for bad in ({"seed": -1}, {"seed": 1.5}, {"size": -1}):
        with pytest.raises(ConfigError):
            type(w)(**{**w.__dict__, **bad})


@pytest.mark.parametrize("w", WORKLOADS)
def test_size_parameter_sets_every_event_size(w):
    sized = type(w)(**{**w.__dict__, "size": 512})
    assert all(np.all(c.sizes == 512) for c in sized.events(3_000, chunk=1_000))
    assert "size=512" in sized.spec()
