"""The vectorized Lindley recursion against hand-computed cases and a plain loop."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewlab.sim.queue import fifo_departures, route_queues

pytestmark = pytest.mark.unit


def naive(arrivals: list[float], services: list[float], d0: float = 0.0) -> list[float]:
    """D_n = max(A_n, D_{n-1}) + S_n, one event at a time."""
    out, d = [], d0
    for a, s in zip(arrivals, services, strict=True):
        d = max(a, d) + s
        out.append(d)
    return out


def test_hand_computed() -> None:
    # service 2 s each: 0->2, waits for 2 ->4, waits for 4 ->6, waits for 6 ->8,
    # then the server idles until the arrival at 9 -> 11
    dep = fifo_departures(np.array([0.0, 1.0, 1.5, 5.0, 9.0]), np.full(5, 2.0), 0.0)
    assert dep.tolist() == [2.0, 4.0, 6.0, 8.0, 11.0]


def test_carries_previous_departure() -> None:
    # the server is busy until t=10 from an earlier chunk
    dep = fifo_departures(np.array([3.0, 12.0]), np.array([1.0, 1.0]), 10.0)
    assert dep.tolist() == [11.0, 13.0]


times = st.lists(
    st.tuples(
        st.floats(min_value=0, max_value=5, allow_nan=False),
        st.floats(min_value=1e-3, max_value=3, allow_nan=False),
    ),
    min_size=1,
    max_size=60,
)


@given(times, st.floats(min_value=0, max_value=20), st.integers(min_value=0, max_value=60))
@settings(max_examples=60, deadline=None)
def test_matches_loop_and_chunks(pairs: list[tuple[float, float]], d0: float, cut: int) -> None:
    arrivals = np.cumsum([p[0] for p in pairs])
    services = np.array([p[1] for p in pairs])
    expected = naive(arrivals.tolist(), services.tolist(), d0)
    whole = fifo_departures(arrivals, services, d0)
    np.testing.assert_allclose(whole, expected, rtol=1e-12, atol=1e-9)
    cut = min(cut, len(pairs))
    first = fifo_departures(arrivals[:cut], services[:cut], d0)
    carry = float(first[-1]) if cut else d0
    second = fifo_departures(arrivals[cut:], services[cut:], carry)
    np.testing.assert_allclose(np.concatenate([first, second]), expected, rtol=1e-12, atol=1e-9)


@given(st.integers(min_value=1, max_value=5), st.integers(min_value=0, max_value=2**31))
@settings(max_examples=40, deadline=None)
def test_route_queues_is_one_fifo_per_worker(workers: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 200
    who = rng.integers(0, workers, n)
    arrivals = np.cumsum(rng.exponential(0.5, n))
    services = rng.uniform(0.1, 2.0, n)
    last = rng.uniform(0, 3, workers)
    start = last.copy()
    wait, sojourn = route_queues(who, arrivals, services, last)
    for w in range(workers):
        mine = np.flatnonzero(who == w)
        dep = naive(arrivals[mine].tolist(), services[mine].tolist(), float(start[w]))
        np.testing.assert_allclose(sojourn[mine], np.array(dep) - arrivals[mine], atol=1e-9)
        np.testing.assert_allclose(wait[mine], sojourn[mine] - services[mine], atol=1e-9)
        assert last[w] == pytest.approx(dep[-1] if dep else start[w])
    assert np.all(wait >= 0)


def test_route_queues_empty() -> None:
    last = np.zeros(3)
    wait, sojourn = route_queues(np.zeros(0, np.int64), np.zeros(0), np.zeros(0), last)
    assert wait.size == sojourn.size == 0
    assert last.tolist() == [0.0, 0.0, 0.0]


def test_held_records_join_at_their_ready_time() -> None:
    # one server, 1 s per event; event 1 is held until t=5 (its state arrives then):
    # event 0 at 0 -> 1; event 2 (arrived 2) goes first -> 3; event 1 joins at 5 -> 6
    last = np.zeros(1)
    ready = np.array([-np.inf, 5.0, -np.inf])
    wait, sojourn = route_queues(
        np.zeros(3, np.int64), np.array([0.0, 1.0, 2.0]), np.ones(3), last, ready
    )
    assert sojourn.tolist() == [1.0, 5.0, 1.0]
    assert wait.tolist() == [0.0, 4.0, 0.0]  # counted from the arrival, not the ready time
    assert last.tolist() == [6.0]


def test_ready_in_the_past_changes_nothing() -> None:
    who = np.array([0, 1, 0, 1])
    arr = np.array([0.0, 0.5, 1.0, 1.5])
    svc = np.full(4, 2.0)
    a, b = np.zeros(2), np.zeros(2)
    plain = route_queues(who, arr, svc, a)
    held = route_queues(who, arr, svc, b, np.full(4, -1.0))
    np.testing.assert_array_equal(plain[0], held[0])
    assert a.tolist() == b.tolist()
