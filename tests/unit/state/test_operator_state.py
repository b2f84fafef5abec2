"""decompose / compose (seed Eq. 1) and the read-equivalence property, with hypothesis."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.errors import ConfigError, StateError
from skewlab.state import (
    OperatorState,
    SplitHashes,
    compose,
    decompose,
    owner,
    repartition,
    split_hash,
    split_hashes,
)

pytestmark = pytest.mark.unit

states = st.dictionaries(st.text(max_size=8), st.integers() | st.text(max_size=4), max_size=60)


@settings(max_examples=150, deadline=None)
@given(state=states, eta=st.integers(1, 9), probe=st.lists(st.text(max_size=8), max_size=10))
def test_parts_read_like_the_original_and_compose_back(state, eta, probe):
    parts = decompose(state, eta)
    assert len(parts) == eta
    for key in [*state, *probe]:
        assert parts[owner(key, eta)].read(key) == OperatorState(state).read(key)
    assert sum(len(p) for p in parts) == len(state)
    assert dict(compose(*parts)) == state


@settings(max_examples=50, deadline=None)
@given(state=states, eta=st.integers(1, 8), eta2=st.integers(1, 8))
def test_repartition_is_compose_then_decompose(state, eta, eta2):
    again = repartition(decompose(state, eta), eta2)
    assert [dict(p) for p in again] == [dict(p) for p in decompose(state, eta2)]


def test_custom_hash_and_its_range_is_checked():
    parts = decompose({"a": 1, "bb": 2, "ccc": 3}, 3, hash=lambda k, n: len(k) - 1)
    assert [dict(p) for p in parts] == [{"a": 1}, {"bb": 2}, {"ccc": 3}]
    with pytest.raises(StateError, match="outside"):
        decompose({"a": 1}, 2, hash=lambda k, n: n)


def test_overlapping_parts_refuse_to_compose():
    with pytest.raises(StateError, match="more than one part"):
        compose({"a": 1}, {"a": 2})


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.text(max_size=12), max_size=40), eta=st.integers(1, 9))
def test_split_hashes_are_split_hash_of_each_key(keys, eta):
    """The batch a restore and a cut use gives every key the part the switch's hash does."""
    assert split_hashes(keys, eta) == [split_hash(k, eta) for k in keys]


@settings(max_examples=100, deadline=None)
@given(
    first=st.lists(st.text(max_size=12), max_size=30),
    later=st.lists(st.text(max_size=12), max_size=30),
    eta=st.integers(1, 9),
)
def test_kept_split_hashes_give_split_hash_for_any_eta(first, later, eta):
    """Hashed once (some keys before, some only when asked), a key's part among ``eta``
    is ``split_hash``'s; each distinct key is kept once."""
    h = SplitHashes()
    h.add(first)
    keys = first + later
    assert [r % eta for r in h.raw(keys)] == split_hashes(keys, eta)
    assert [h.part(k, eta) for k in keys] == [split_hash(k, eta) for k in keys]
    assert len(h) == len(set(keys))


def test_split_hashes_refuse_no_parts():
    with pytest.raises(StateError, match="eta"):
        split_hashes(["a"], 0)


def test_bad_eta_and_keys():
    with pytest.raises(ConfigError, match="eta"):
        decompose({}, 0)
    with pytest.raises(ConfigError, match="str"):
        OperatorState({1: "x"})  # type: ignore[dict-item]


def test_state_is_immutable_and_pickles():
    s = OperatorState({"a": {"count": 1}})
    assert pickle.loads(pickle.dumps(s)) == s
    assert s.read("missing") is None
    with pytest.raises(TypeError):
        s["b"] = 1  # type: ignore[index]
