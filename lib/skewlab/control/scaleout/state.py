"""What the live state manager computes from Delta and offsets: its score, its checkpoints.

:func:`score_from_backlog` scores one instance over a signal window (the backlog still
queued at every look, against capacity ``1 / service_s``); :func:`write_checkpoint` writes
an operator's committed worker state as one checkpoint ``(theta, tau, beta)``;
:class:`Placement` and :class:`VersionRows` keep the sweep's per-key operator and hash and
build a routing version as columns. Details: docs/scaleout.md (score and triggering;
checkpoints).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from skewlab.hashing import buckets
from skewlab.io.progress import progress_at
from skewlab.io.state_store import CheckpointStore
from skewlab.pipeline.handoff import META_KEY
from skewlab.pipeline.store import Store
from skewlab.rebalance.base import hash_worker
from skewlab.rundir import RunDir
from skewlab.state.operator_state import SplitHashes
from skewlab.state.score import Signals, bottleneck_score

log = logging.getLogger(__name__)


def score_from_backlog(
    arrived: int, completed: int, backlogs: list[int], dt: float, service_s: float
) -> float:
    """The bottleneck score of one instance over one signal window (0..100).

    ``backlogs``: per look in the window (oldest first), the records routed by
    the look before that are still not committed: work that waited at least one
    step, so records in flight between two commits do not count. Capacity is
    ``1 / service_s`` records/s. The backlog that counts is the *smallest* one
    of the window: work still queued at every look, which a burst of input
    delivered at once (a slow route job's late micro-batch) or a late commit
    does not fake. When it stayed above 0.2 s of
    work the instance was busy the whole window, and its offered utilisation is
    ``rho = arrived / completed`` (both in records: a machine that runs
    everything slower, or steps this loop late, scales both alike); otherwise
    ``rho = arrived * service_s / dt`` and ``busy = completed * service_s / dt``.
    The queue and latency terms of :func:`~skewlab.state.score.bottleneck_score`
    both come from that backlog: queue = its records, latency = its seconds of
    work at capacity.
    """
    cap = 1.0 / service_s
    backlog = min(backlogs) if backlogs else 0
    slack = max(1.0, 0.2 * cap)
    if len(backlogs) >= 2 and backlog > slack and completed > 0:
        rho, busy = arrived / completed, 1.0
    elif dt > 0:
        rho, busy = arrived * service_s / dt, min(max(completed * service_s / dt, 0.0), 1.0)
    else:
        rho, busy = 0.0, 0.0
    sig = Signals(max(rho, 0.0) * cap, cap, backlog, busy, backlog * service_s)
    return bottleneck_score(sig)


def write_checkpoint(
    store: Store,
    run_id: str,
    group: int,
    instances: list[int],
    cp_id: int,
    ends: dict[int, int] | None = None,
    versions: dict[int, int | None] | None = None,
) -> dict[str, Any]:
    """Checkpoint ``cp_id`` of operator ``group``: the committed state of its ``instances``
    (at the commit version ``versions[j]`` when given: the one seen when the checkpoint
    was requested, so a later commit, such as an old instance's cut, is not in it).

    Per instance: theta = its ``operator_state`` rows at its last committed
    flush, tau = that flush's commit version (:mod:`skewlab.io.progress`: its
    routed offset unless it shadows), beta = the records it had received and not
    yet reflected in theta: its routed partition from that offset to its end
    ``ends[j]`` at the checkpoint (``routed`` is the buffer; stored as the offset
    range ``theta[""]["beta"]``, replayed first on restore). Written in
    :class:`~skewlab.io.state_store.CheckpointStore`'s layout and app id under run
    id ``<run>#g<group>`` (idempotent: a second write of ``cp_id`` changes nothing);
    a key's value is the worker's JSON as stored (parsed only to merge a buffer),
    so ``CheckpointStore.read`` gives the same theta as the rows themselves.
    The in-process state manager and the ``skewlab_control`` DAG both call this.
    """
    cps = CheckpointStore(store, f"{run_id}#g{group}", f"g{group}")
    pieces: list[pa.Table] = []
    taus: dict[int, int] = {}
    beta = keys = 0
    for j in instances:
        if versions is not None and j in versions:
            version = versions[j]
        else:
            version = store.committed_version("partials", RunDir.worker_app(j, run_id))
        rows = _newest_rows(store, run_id, j, version)
        offset = 0 if version is None else progress_at(store, run_id, j, version)[0]
        end = max((ends or {}).get(j, offset), offset)
        beta += end - offset
        taus[j] = version or 0
        is_meta = pc.equal(rows["key"], META_KEY)
        old_meta = rows.filter(is_meta)["value"].to_pylist()
        m = json.loads(old_meta[0]) if old_meta and old_meta[0] else {}
        m["beta"] = [offset, end]
        theta = rows.filter(pc.invert(is_meta))
        keys += theta.num_rows
        n = theta.num_rows + 1
        pieces.append(
            pa.table(
                {
                    "checkpoint": pa.array(np.full(n, cp_id, dtype=np.int64)),
                    "instance": pa.array(np.full(n, j, dtype=np.int64)),
                    "key": pa.concat_arrays(
                        [theta["key"].combine_chunks(), pa.array([META_KEY], pa.string())]
                    ),
                    "value": pa.concat_arrays(
                        [theta["value"].combine_chunks(), pa.array([_dumps(m)], pa.binary())]
                    ),
                    "tau": pa.array(np.full(n, taus[j], dtype=np.int64)),
                    "buffered": pa.nulls(n, pa.binary()),
                }
            )
        )
    table = pa.concat_tables(pieces) if pieces else None
    new = (
        store.append("operator_state", table, app_id=cps.app_id, version=cp_id, run_id=cps.run_id)
        if table is not None
        else cps.write(cp_id, {})
    )
    log.info("operator %d: checkpoint %d written=%s (tau %s)", group, cp_id, new, taus)
    return {
        "checkpoint": cp_id,
        "tau": taus,
        "keys": keys,
        "beta_records": beta,
        "new": new,
    }


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


def _newest_rows(store: Store, run_id: str, instance: int, version: int | None) -> pa.Table:
    """Columns ``key`` (string) and ``value`` (binary) of ``instance``'s state at its commit
    ``version`` (per key its newest row at or before it, as ``state_rows_at``), each
    value as a checkpoint stores it: the worker's JSON bytes as they are, merged with
    the key's buffered records (``buffered``) if it has any. Newest rows are picked by
    an Arrow sort and kept as Arrow columns; only buffered rows are parsed."""
    empty = pa.table({"key": pa.array([], pa.string()), "value": pa.array([], pa.binary())})
    if version is None:
        return empty
    t = store.read(
        "operator_state",
        run_id=run_id,
        columns=["checkpoint", "key", "value", "buffered"],
        filters=[("instance", "=", instance), ("checkpoint", "<=", version)],
    )
    if t.num_rows == 0:
        return empty
    t = t.take(pc.sort_indices(t, [("key", "ascending"), ("checkpoint", "descending")]))
    k = t["key"].combine_chunks()
    first = np.ones(len(k), dtype=bool)
    if len(k) > 1:
        first[1:] = pc.not_equal(k[1:], k[:-1]).to_numpy(zero_copy_only=False)
    t = t.filter(pa.array(first))
    value = t["value"].combine_chunks().cast(pa.binary())
    buffered = t["buffered"]
    if buffered.null_count < len(buffered):
        values: list[bytes] = value.to_pylist()
        for i, buf in enumerate(buffered.to_pylist()):
            if buf:
                v = json.loads(values[i])
                v["buffered"] = json.loads(buf)
                values[i] = _dumps(v)
        value = pa.array(values, pa.binary())
    return pa.table({"key": t["key"].combine_chunks().cast(pa.string()), "value": value})


def changed_share(store: Store, run_id: str, taus: dict[int, int], keys: int) -> float | None:
    """Share of an operator's ``keys`` its instances changed since the checkpoint whose
    commit version per instance is ``taus`` (None: no checkpoint yet).

    Each worker flush writes the rows of the keys it changed (incremental
    ``operator_state``), so the changed keys are those with a row newer than tau."""
    if not taus:
        return None
    changed: set[str] = set()
    for j, tau in taus.items():
        t = store.read(
            "operator_state",
            run_id=run_id,
            columns=["key"],
            filters=[("instance", "=", int(j)), ("checkpoint", ">", int(tau))],
        )
        changed.update(k for k in t["key"].to_pylist() if k != META_KEY)
    return len(changed) / max(keys, len(changed), 1)


class Placement:
    """Where the manager's sweep puts each key, hashed once per key: its operator
    (``hash_worker(key, workers)``, KEY grouping) and its split hash, whose rest modulo
    ``n`` is its hash part among ``n`` instances (``owner(key, n, split_hash)``).

    A sweep looks at every key seen (100k at the README's scale) each step; the
    two murmur3 hashes per key were most of the manager's CPU, taken from the
    workers on a shared machine. A key's split hash is taken when the sweeps first
    see it, so the version of a scale-out (every key's part among more instances) is
    column arithmetic at the decision, not 100k hashes (0.1 s of a quiet core, and
    up to a second while the replacements restore on the same cores)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._group: dict[str, int] = {}
        self._split = SplitHashes()
        self._seen: set[str] = set()
        self._at: tuple[object, object] | None = None

    def unseen(self, keys: list[str], instances: object, mapping: object) -> list[str] | None:
        """``keys`` not seen by the sweeps since the last full one, if that one ran with
        the same ``instances`` (per operator) and the same ``mapping`` object; else None
        (a full sweep is due: only then can a key already seen move)."""
        if self._at is None or self._at[0] != instances or self._at[1] is not mapping:
            return None
        return [k for k in keys if k not in self._seen]

    def swept(self, keys: set[str], instances: object, mapping: object) -> None:
        """A full sweep looked at ``keys`` with ``instances`` and left ``mapping``."""
        self._seen, self._at = keys, (instances, mapping)

    def seen(self, more: list[str] | None = None) -> list[str]:
        """The keys the sweeps have looked at so far (the last full one's and since),
        and ``more`` (keys read since, not looked at yet)."""
        return list(self._seen.union(more)) if more else list(self._seen)

    def saw(self, keys: list[str]) -> None:
        """A quick sweep looked at ``keys`` (:meth:`unseen`) and moved none."""
        self._seen.update(keys)

    def group(self, key: str) -> int:
        """The operator ``key`` belongs to."""
        g = self._group.get(key)
        if g is None:
            g = self._group[key] = hash_worker(key, self.workers)
        return g

    def part(self, key: str, n: int) -> int:
        """``key``'s hash part among ``n`` instances of its operator."""
        return self._split.part(key, n)

    def hash_new(self, keys: list[str]) -> None:
        """Take the operator and the split hash of those of ``keys`` not hashed yet, in
        one call each (the sweep's keys first read: 100k at once after a prefill)."""
        self._hash_groups(keys)
        self._split.add(keys)

    def _hash_groups(self, keys: list[str]) -> None:
        todo = [k for k in keys if k not in self._group]
        self._group.update(zip(todo, buckets(todo, self.workers), strict=True))

    def groups(self, keys: list[str]) -> np.ndarray:
        """:meth:`group` of each of ``keys``."""
        self._hash_groups(keys)
        return np.fromiter(map(self._group.__getitem__, keys), np.int64, len(keys))

    def parts(self, keys: list[str], n: np.ndarray | int) -> np.ndarray:
        """:meth:`part` of each of ``keys`` among ``n`` instances (per key if an array)."""
        h = np.fromiter(self._split.raw(keys), np.uint64, len(keys))
        return (h % np.asarray(n, dtype=np.uint64)).astype(np.int64)


@dataclass
class VersionRows:
    """The rows of one ``assignments`` version (:meth:`build`) and what they were built
    from: the groups' instances ``sig``, the map object ``mapping`` and how many keys
    had been seen (``n_seen``: the seen keys only grow)."""

    sig: tuple[tuple[int, ...], ...]
    mapping: object
    n_seen: int
    every: set[str]
    keys: list[str] = field(default_factory=list)
    instances: list[int] = field(default_factory=list)
    sets: list[int] = field(default_factory=list)
    is_move: list[bool] = field(default_factory=list)
    moved: list[tuple[str, int]] = field(default_factory=list)
    unmarked: list[tuple[str, int, int, int]] = field(default_factory=list)
    group_keys: list[int] = field(default_factory=list)

    @classmethod
    def build(
        cls,
        where: Placement,
        seen: list[str],
        sig: tuple[tuple[int, ...], ...],
        mapping: dict[str, tuple[int, int]],
    ) -> VersionRows:
        """The version routing ``seen`` and the mapped keys with each group's instances
        ``sig``: every key held or moved, in key order. A key goes to its group's
        instance of its hash part; it moves (set + 1) when that is not where ``mapping``
        has it (unmapped: its group, set 0), and is kept when mapped and not moving.

        Column arithmetic over the keys (numpy), not a Python loop: at 100k keys the
        loop took 0.3 s alone and 0.8-1.5 s at a scale-out decision, on the cores (and
        the interpreter) the replacements' restore and the producer were using."""
        every = set(seen)
        every.update(mapping)
        ordered = sorted(every)
        rows = cls(sig, mapping, len(seen), every)
        n = len(ordered)
        counts = np.array([len(a) for a in sig], dtype=np.int64)
        rows.group_keys = [0] * len(sig)
        if n == 0:
            return rows
        g = where.groups(ordered)
        rows.group_keys = np.bincount(g, minlength=len(sig)).tolist()
        table = np.zeros((len(sig), int(counts.max())), dtype=np.int64)
        for i, active in enumerate(sig):
            table[i, : len(active)] = active
        to = table[g, where.parts(ordered, counts[g])]
        cur, sid = g.copy(), np.zeros(n, dtype=np.int64)
        inmap = np.zeros(n, dtype=bool)
        if mapping:
            have = [mapping.get(k) for k in ordered]
            inmap = np.fromiter((h is not None for h in have), bool, n)
            at = np.flatnonzero(inmap)
            held = np.array([have[i] for i in at.tolist()], dtype=np.int64).reshape(-1, 2)
            cur[at], sid[at] = held[:, 0], held[:, 1]
        move = to != cur
        keep = np.flatnonzero(move | inmap)
        rows.keys = [ordered[i] for i in keep.tolist()]
        rows.instances = to[keep].tolist()
        rows.sets = (sid[keep] + move[keep]).tolist()
        rows.is_move = move[keep].tolist()
        m = np.flatnonzero(move)
        mk = [ordered[i] for i in m.tolist()]
        rows.moved = list(zip(mk, (sid[m] + 1).tolist(), strict=True))
        rows.unmarked = list(zip(mk, cur[m].tolist(), sid[m].tolist(), to[m].tolist(), strict=True))
        return rows

    def fits(self, sig: tuple[tuple[int, ...], ...], mapping: object, n_seen: int) -> bool:
        """Whether these rows are the version for ``sig``, ``mapping`` and ``n_seen`` keys."""
        return self.sig == sig and self.mapping is mapping and self.n_seen == n_seen
