"""FIFO single-server queues, vectorized: the Lindley recursion ``D_n = max(A_n, D_{n-1}) + S_n``
as a prefix maximum (derivation in docs/sim.md).
"""

from __future__ import annotations

import numpy as np

__all__ = ["fifo_departures", "route_queues"]


def fifo_departures(
    arrivals: np.ndarray, services: np.ndarray, last_departure: float
) -> np.ndarray:
    """Departure times of one FIFO server (arrivals nondecreasing, seconds).

    Lindley ``D_n = max(A_n, D_{n-1}) + S_n`` computed as the prefix maximum
    ``D_n = C_n + max(D_0, max_{k <= n} (A_k - C_{k-1}))`` with ``C_n`` the cumulative service.

    ``last_departure`` is ``D_0``: when the server finished its previous event.
    """
    if arrivals.size == 0:
        return np.zeros(0)
    cum = np.cumsum(services)
    slack = arrivals - (cum - services)
    np.maximum.accumulate(slack, out=slack)
    np.maximum(slack, last_departure, out=slack)
    return cum + slack


def route_queues(
    workers: np.ndarray,
    arrivals: np.ndarray,
    services: np.ndarray,
    last_departure: np.ndarray,
    ready: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Run every worker's FIFO queue over one block of events in stream order.

    ``workers[i]`` serves event ``i``; ``last_departure`` (one per worker) is
    updated in place. Returns ``(wait, sojourn)`` per event, in stream order.
    Events of one worker keep their stream order (a stable sort), so each
    worker sees its arrivals in FIFO order. With ``ready`` (seconds, per
    event), event ``i`` joins its queue at ``max(arrivals[i], ready[i])``
    (a held record: SMALOPS' split-state hand-off, docs/sim.md), ties kept in stream order; its
    wait and sojourn still count from ``arrivals[i]``.
    """
    n = workers.size
    wait = np.zeros(n)
    sojourn = np.zeros(n)
    if n == 0:
        return wait, sojourn
    n_workers = last_departure.size
    key = workers.astype(np.int16) if n_workers < 32_768 else workers
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(workers[order], np.arange(n_workers + 1), side="left")
    a_sorted = arrivals[order]
    s_sorted = services[order]
    for w in np.flatnonzero(np.diff(bounds)).tolist():
        lo, hi = int(bounds[w]), int(bounds[w + 1])
        a = a_sorted[lo:hi]
        s = s_sorted[lo:hi]
        idx = order[lo:hi]
        joins = a
        if ready is not None:
            r = ready[idx]
            if bool(np.any(r > a)):
                joins = np.maximum(a, r)
                by_join = np.argsort(joins, kind="stable")
                a, s, idx, joins = a[by_join], s[by_join], idx[by_join], joins[by_join]
        dep = fifo_departures(joins, s, float(last_departure[w]))
        last_departure[w] = dep[-1]
        soj = dep - a
        sojourn[idx] = soj
        wait[idx] = soj - s
    np.maximum(wait, 0.0, out=wait)  # float round-off can make a zero wait -1e-18
    return wait, sojourn
