"""Contract suite over every rebalancer: mappings kept, DLB never worse, snapshots resume."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.rebalance import REBALANCER_NAMES, LoadSnapshot, imbalance, make_rebalancer

pytestmark = pytest.mark.unit

PARAMS = {"smalops": {"threshold": 0.05, "gate": False}}


@st.composite
def intervals(draw: st.DrawFn) -> tuple[int, list[LoadSnapshot]]:
    workers = draw(st.integers(1, 6))
    n = draw(st.integers(0, 40))
    out = []
    for t in range(draw(st.integers(1, 3))):
        loads = draw(st.lists(st.integers(1, 500), min_size=n, max_size=n))
        where = draw(st.lists(st.integers(0, workers - 1), min_size=n, max_size=n))
        out.append(
            LoadSnapshot(
                now=10.0 * (t + 1),
                interval_s=10.0,
                workers=workers,
                keys=tuple(f"k{i}" for i in range(n)),
                loads=np.array(loads, dtype=np.int64),
                placement=np.array(where, dtype=np.int64),
            )
        )
    return workers, out


def apply(s: LoadSnapshot, moves: tuple) -> np.ndarray:
    final = np.array(s.placement)
    index = {k: i for i, k in enumerate(s.keys)}
    for m in moves:
        i = index[m.key]
        assert final[i] == m.src != m.dst
        final[i] = m.dst
    return final


@pytest.mark.parametrize("name", REBALANCER_NAMES)
@settings(max_examples=40, deadline=None)
@given(case=intervals())
def test_never_loses_or_duplicates_a_mapping(name: str, case: tuple) -> None:
    workers, snaps = case
    rb = make_rebalancer(name, workers, **PARAMS.get(name, {})).build()
    for s in snaps:
        d = rb.decide(s.now, s)
        keys = [m.key for m in d.moves]
        assert len(keys) == len(set(keys))
        final = apply(s, d.moves)
        assert ((final >= 0) & (final < workers)).all()
        assignment = [k for k, _ in d.assignment]
        assert len(assignment) == len(set(assignment)) and set(assignment) <= set(s.keys)
        index = {k: i for i, k in enumerate(s.keys)}
        assert all(final[index[k]] == w for k, w in d.assignment)
        assert s.worker_loads(final).sum() == s.loads.sum()
        assert d.imbalance_after == pytest.approx(imbalance(s.worker_loads(final)))


@pytest.mark.parametrize("name", ["dlb-h", "dlb-l"])
@settings(max_examples=60, deadline=None)
@given(case=intervals())
def test_dlb_pass_never_worsens_imbalance(name: str, case: tuple) -> None:
    workers, snaps = case
    rb = make_rebalancer(name, workers).build()
    for s in snaps:
        d = rb.decide(s.now, s)
        assert d.imbalance_after <= d.imbalance_before + 1e-9


@pytest.mark.parametrize("name", REBALANCER_NAMES)
@settings(max_examples=25, deadline=None)
@given(case=intervals())
def test_snapshot_restore_gives_same_decisions(name: str, case: tuple) -> None:
    workers, snaps = case
    cfg = make_rebalancer(name, workers, **PARAMS.get(name, {}))
    a = cfg.build()
    a.decide(snaps[0].now, snaps[0])
    state = pickle.loads(pickle.dumps(a.snapshot()))
    b = cfg.build(state=state)
    for s in [*snaps[1:], snaps[0]]:
        da, db = a.decide(s.now, s), b.decide(s.now, s)
        assert da.moves == db.moves and da.assignment == db.assignment
        assert da.reason == db.reason


@pytest.mark.parametrize("name", REBALANCER_NAMES)
def test_restore_into_wrong_policy_fails(name: str) -> None:
    from skewlab.errors import StateError

    other = "dlb-h" if name != "dlb-h" else "lptf"
    state = make_rebalancer(other, 3).build().snapshot()
    with pytest.raises(StateError):
        make_rebalancer(name, 3, **PARAMS.get(name, {})).build(state=state)
