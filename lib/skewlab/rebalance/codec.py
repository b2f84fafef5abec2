"""Rebalancer snapshots <-> JSON-safe dicts, and a fresh policy seeded with a key map.

The scheduled control DAG stores a snapshot between intervals; invariant:
``snapshot_from_dict(json.loads(json.dumps(snapshot_to_dict(s)))) == s``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from skewlab.errors import StateError
from skewlab.rebalance.base import Rebalancer, RebalancerConfig
from skewlab.rebalance.dlb import MapSnapshot
from skewlab.rebalance.smalops import SmalopsSnapshot
from skewlab.sketch.lossy_counting import LossyCountingSnapshot

__all__ = ["seeded", "snapshot_from_dict", "snapshot_to_dict"]


def _pairs(items: Any) -> list[list[Any]]:
    return [[str(k), int(w)] for k, w in items]


def snapshot_to_dict(snap: Any) -> dict[str, Any]:
    """A JSON-safe dict of a rebalancer snapshot (numpy ints become ints)."""
    if isinstance(snap, SmalopsSnapshot):
        sk = snap.sketch
        return {
            "kind": "smalops",
            "policy": snap.policy,
            "workers": int(snap.workers),
            "sketch": {
                "epsilon": float(sk.epsilon),
                "n": int(sk.n),
                "window": int(sk.window),
                "pruned_at": int(sk.pruned_at),
                "entries": [[str(k), int(f), int(d)] for k, f, d in sk.entries],
            },
            "heavy": _pairs(snap.heavy),
            "rng_state": snap.rng_state,
            "decisions": int(snap.decisions),
        }
    if isinstance(snap, MapSnapshot):
        return {
            "kind": "map",
            "policy": snap.policy,
            "workers": int(snap.workers),
            "assignment": _pairs(snap.assignment),
            "decisions": int(snap.decisions),
        }
    raise StateError(f"no codec for a {type(snap).__name__} snapshot")


def snapshot_from_dict(data: Mapping[str, Any]) -> SmalopsSnapshot | MapSnapshot:
    """Inverse of :func:`snapshot_to_dict`; :class:`StateError` on anything else."""
    try:
        kind = data["kind"]
        if kind == "smalops":
            sk = data["sketch"]
            return SmalopsSnapshot(
                policy=str(data["policy"]),
                workers=int(data["workers"]),
                sketch=LossyCountingSnapshot(
                    epsilon=float(sk["epsilon"]),
                    n=int(sk["n"]),
                    window=int(sk["window"]),
                    pruned_at=int(sk["pruned_at"]),
                    entries=tuple((str(k), int(f), int(d)) for k, f, d in sk["entries"]),
                ),
                heavy=tuple((str(k), int(w)) for k, w in data["heavy"]),
                rng_state=str(data["rng_state"]),
                decisions=int(data["decisions"]),
            )
        if kind == "map":
            return MapSnapshot(
                policy=str(data["policy"]),
                workers=int(data["workers"]),
                assignment=tuple((str(k), int(w)) for k, w in data["assignment"]),
                decisions=int(data["decisions"]),
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"malformed rebalancer snapshot: {exc!r}") from None
    raise StateError(f"unknown rebalancer snapshot kind {data.get('kind')!r}")


def seeded(config: RebalancerConfig, pinned: Mapping[str, int]) -> Rebalancer:
    """A fresh rebalancer of ``config`` whose explicit map is ``pinned``.

    Used when a control loop starts on a run that already routes by an
    ``assignments`` version (written by another loop, or by this policy before a
    policy change): without the map a fresh DLB or LPTF would send every pinned
    key home at its first decision. SMALOPS takes the keys as its heavy map (the
    next decision drops those that are not heavy). Counters start at zero.
    """
    fresh = config.build().snapshot()
    items = tuple((str(k), int(w)) for k, w in sorted(pinned.items()))
    if not items:
        return config.build()
    if isinstance(fresh, SmalopsSnapshot):
        return config.build(state=dataclasses.replace(fresh, heavy=items))
    if isinstance(fresh, MapSnapshot):
        return config.build(state=dataclasses.replace(fresh, assignment=items))
    raise StateError(f"cannot seed a {type(fresh).__name__} rebalancer with a key map")
