"""Checkpoints ``(theta, tau, beta)`` in the Delta table ``operator_state``, idempotently.

The scale-out seed's checkpointed state (theta_o, tau_o, beta_o), one row per checkpoint x
instance x key; the write protocol is on :meth:`CheckpointStore.write`, the row layout in
docs/io.md. One run holds the checkpoints of one operator.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewlab.errors import StateError
from skewlab.pipeline.store import Store
from skewlab.state.checkpoint import Checkpoint, StreamTuple
from skewlab.state.operator_state import OperatorState

__all__ = ["TABLE", "CheckpointStore", "newest_rows", "state_rows_at"]

log = logging.getLogger(__name__)

TABLE = "operator_state"


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode("utf-8")


class CheckpointStore:
    """Write and read checkpoints of one operator of one run through a store (pipeline.store)."""

    def __init__(self, store: Store, run_id: str, operator: str = "operator") -> None:
        self.store = store
        self.run_id = run_id
        self.operator = operator

    @property
    def app_id(self) -> str:
        """The Delta app id of this operator's checkpoints: ``operator_state:<op>:<run_id>``."""
        return f"{TABLE}:{self.operator}:{self.run_id}"

    @staticmethod
    def encode(checkpoint: int, parts: Mapping[int, Checkpoint]) -> dict[str, list[Any]]:
        """The columns of ``parts`` (instance -> its checkpoint), step 1 of :meth:`write`."""
        cols: dict[str, list[Any]] = {
            c: [] for c in ("checkpoint", "instance", "key", "value", "tau", "buffered")
        }
        for instance, part in parts.items():
            if part.checkpoint != checkpoint:
                raise StateError(f"part of instance {instance} is checkpoint {part.checkpoint}")
            buffered: dict[str, list[list[Any]]] = defaultdict(list)
            for t in part.beta:
                buffered[t.key].append([t.tau, t.value])
            keys = list(part.theta) + [k for k in buffered if k not in part.theta]
            if not keys:
                keys = [""]
            theta = part.theta
            for key in keys:
                cols["key"].append(key)
                cols["value"].append(_dumps(theta[key]) if key in theta else b"")
                b = buffered.get(key)
                cols["buffered"].append(None if b is None else _dumps(b))
            n = len(keys)
            cols["checkpoint"].extend([checkpoint] * n)
            cols["instance"].extend([instance] * n)
            cols["tau"].extend([part.tau] * n)
        return cols

    def write(self, checkpoint: int, parts: Mapping[int, Checkpoint]) -> bool:
        """Store checkpoint ``checkpoint`` (all parts, one commit); ``False`` if already there.

        1. Encode every part ``(theta, tau, beta)`` into columns (:meth:`encode`).
        2. Append them in **one** Delta commit with app transaction ``(app_id, checkpoint)``,
           so a checkpoint is in the table whole or not at all, and writing it again (a state
           manager restarted after the commit) is a no-op.
        """
        cols = self.encode(checkpoint, parts)
        done = self.store.append(
            TABLE, cols, app_id=self.app_id, version=checkpoint, run_id=self.run_id
        )
        log.debug(
            "checkpoint %d of %s: %d rows, new=%s", checkpoint, self.app_id, len(cols["key"]), done
        )
        return done

    def checkpoints(self) -> list[int]:
        """Ids of the checkpoints stored for this run, ascending."""
        table = self.store.read(TABLE, self.run_id, columns=["checkpoint"])
        return sorted(int(v) for v in pc.unique(table.column("checkpoint")).to_pylist())

    def latest(self) -> int | None:
        """The newest stored checkpoint id (``None``: none yet)."""
        table = self.store.read(TABLE, self.run_id, columns=["checkpoint"])
        return None if table.num_rows == 0 else int(pc.max(table.column("checkpoint")).as_py())

    def read(self, checkpoint: int) -> dict[int, Checkpoint]:
        """Every instance's part of ``checkpoint`` (empty dict if it was never written)."""
        table = self.store.read(TABLE, self.run_id, filters=[("checkpoint", "=", checkpoint)])
        return self.decode(checkpoint, table)

    @staticmethod
    def decode(checkpoint: int, table: pa.Table) -> dict[int, Checkpoint]:
        """Inverse of :meth:`encode` for the rows of one checkpoint."""
        instances = table.column("instance").to_pylist()
        keys = table.column("key").to_pylist()
        values = table.column("value").to_pylist()
        taus = table.column("tau").to_pylist()
        buffered = table.column("buffered").to_pylist()
        theta: dict[int, dict[str, Any]] = defaultdict(dict)
        beta: dict[int, list[StreamTuple]] = defaultdict(list)
        tau: dict[int, int] = {}
        for inst, key, value, t, buf in zip(instances, keys, values, taus, buffered, strict=True):
            if tau.setdefault(inst, t) != t:
                raise StateError(
                    f"checkpoint {checkpoint}, instance {inst}: two taus {t}, {tau[inst]}"
                )
            if value:
                theta[inst][key] = json.loads(value)
            if buf is not None:
                beta[inst].extend(StreamTuple(bt, key, bv) for bt, bv in json.loads(buf))
        return {
            inst: Checkpoint(
                checkpoint,
                OperatorState(theta[inst]),
                tau[inst],
                tuple(sorted(beta[inst], key=lambda x: x.tau)),
            )
            for inst in sorted(tau)
        }


def newest_rows(t: pa.Table) -> pa.Table:
    """Per key, the row of its newest ``checkpoint`` among the incremental state rows
    ``t``, sorted by key: :func:`~skewlab.pipeline.handoff.latest_rows` as one Arrow sort
    and a mask, without making a Python object of any row it drops (a restarted
    worker's 100k keys came from 240k rows of history)."""
    if t.num_rows == 0:
        return t
    t = t.take(pc.sort_indices(t, [("key", "ascending"), ("checkpoint", "descending")]))
    keys = t["key"].combine_chunks()
    first = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    return t.filter(pa.concat_arrays([pa.array([True]), first]))


def state_rows_at(
    store: Store, run_id: str, instance: int, checkpoint: int
) -> list[tuple[str, bytes, bytes | None]]:
    """The key state of worker ``instance`` at its flush ``checkpoint``: per key, the row
    of its newest incremental checkpoint at or before it (:func:`newest_rows`)."""
    t = newest_rows(
        store.read(
            "operator_state",
            run_id=run_id,
            columns=["checkpoint", "key", "value", "buffered"],
            filters=[("instance", "=", instance), ("checkpoint", "<=", checkpoint)],
        )
    )
    return list(zip(t["key"].to_pylist(), t["value"].to_pylist(), t["buffered"].to_pylist()))
