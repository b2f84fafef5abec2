"""A worker's committed progress: routed offset and dedup watermarks at a commit version.

A worker commits once per flush under app transaction version ``V``. Without
shadow sets ``V`` is its routed offset. A worker that also replays another
instance's partition (a scale-out shadow, docs/scaleout.md) commits
``V = routed offset + records read in shadowed partitions``, so that shadow
progress alone still commits; its ``worker_progress`` row then carries ``V`` as
``"v"`` in the watermarks JSON. :func:`progress_at` finds either kind of row.
A worker that stopped keys at a scale-out cut carries its cuts as ``"cuts"`` in
every row from that commit on (docs/scaleout.md, "The cut"); :func:`committed_progress`
reads them for the keys' new instance.
"""

from __future__ import annotations

import json
from typing import Any

from skewlab.errors import ConfigError
from skewlab.pipeline.store import Store

__all__ = ["committed_progress", "encode_watermarks", "progress_at"]

VERSION_FIELD = "v"
CUTS_FIELD = "cuts"


def encode_watermarks(
    watermarks: dict[int, int],
    version: int,
    offset: int,
    cuts: list[dict[str, Any]] | None = None,
) -> str:
    """The ``worker_progress.watermarks`` JSON; ``"v"`` only when ``version != offset``,
    ``"cuts"`` only when the worker made a cut."""
    d: dict[str, Any] = {str(p): v for p, v in sorted(watermarks.items())}
    if version != offset:
        d[VERSION_FIELD] = version
    if cuts:
        d[CUTS_FIELD] = cuts
    return json.dumps(d)


def decode_watermarks(text: str) -> tuple[dict[int, int], int | None]:
    """Inverse of :func:`encode_watermarks`: (watermarks, version or None)."""
    d = json.loads(text)
    v = d.get(VERSION_FIELD)
    return _watermarks(d), None if v is None else int(v)


def _watermarks(d: dict[str, Any]) -> dict[int, int]:
    """The per-partition watermarks of a decoded ``worker_progress.watermarks`` JSON."""
    return {int(p): int(o) for p, o in d.items() if p not in (VERSION_FIELD, CUTS_FIELD)}


def _row_at(store: Store, run_id: str, worker: int, version: int) -> tuple[int, dict[str, Any]]:
    """(routed offset, decoded watermarks JSON) of ``worker``'s progress row written for its
    commit ``version``. Raises ConfigError when the commit has no progress row."""
    t = store.read(
        "worker_progress",
        run_id=run_id,
        columns=["routed_offset", "watermarks"],
        filters=[("worker", "=", worker)],
    )
    for off, text in zip(t["routed_offset"].to_pylist(), t["watermarks"].to_pylist()):
        d = json.loads(text)
        v = d.get(VERSION_FIELD)
        if (int(v) if v is not None else int(off)) == version:
            return int(off), d
    raise ConfigError(f"worker {worker}: committed at version {version} but no progress row")


def committed_progress(
    store: Store, run_id: str, worker: int, app_id: str
) -> tuple[int, list[dict[str, Any]]]:
    """(routed offset, cuts) of ``worker``'s last commit (``app_id``'s ``partials``
    version); ``(0, [])`` before its first commit. A row written for a commit that never
    happened (a crash before ``partials``) is not read."""
    version = store.committed_version("partials", app_id)
    if version is None:
        return 0, []
    off, d = _row_at(store, run_id, worker, version)
    return off, list(d.get(CUTS_FIELD, []))


def progress_at(store: Store, run_id: str, worker: int, version: int) -> tuple[int, dict[int, int]]:
    """(routed offset, watermarks) of ``worker`` at its commit ``version``.

    Raises ConfigError when the commit has no progress row (a broken commit)."""
    off, d = _row_at(store, run_id, worker, version)
    return off, _watermarks(d)
