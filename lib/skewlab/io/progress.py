"""A worker's committed progress: routed offset and dedup watermarks at a commit version.

A worker commits once per flush under app transaction version ``V``. Without
shadow sets ``V`` is its routed offset. A worker that also replays another
instance's partition (a scale-out shadow, docs/scaleout.md) commits
``V = routed offset + records read in shadowed partitions``, so that shadow
progress alone still commits; its ``worker_progress`` row then carries ``V`` as
``"v"`` in the watermarks JSON. :func:`progress_at` finds either kind of row.
"""

from __future__ import annotations

import json

from skewlab.errors import ConfigError
from skewlab.pipeline.store import Store

__all__ = ["encode_watermarks", "progress_at"]

VERSION_FIELD = "v"


def encode_watermarks(watermarks: dict[int, int], version: int, offset: int) -> str:
    """The ``worker_progress.watermarks`` JSON; ``"v"`` only when ``version != offset``."""
    d: dict[str, int] = {str(p): v for p, v in sorted(watermarks.items())}
    if version != offset:
        d[VERSION_FIELD] = version
    return json.dumps(d)


def decode_watermarks(text: str) -> tuple[dict[int, int], int | None]:
    """Inverse of :func:`encode_watermarks`: (watermarks, version or None)."""
    d = json.loads(text)
    v = d.pop(VERSION_FIELD, None)
    return {int(p): int(o) for p, o in d.items()}, None if v is None else int(v)


def progress_at(store: Store, run_id: str, worker: int, version: int) -> tuple[int, dict[int, int]]:
    """(routed offset, watermarks) of ``worker`` at its commit ``version``.

    Raises ConfigError when the commit has no progress row (a broken commit)."""
    t = store.read(
        "worker_progress",
        run_id=run_id,
        columns=["routed_offset", "watermarks"],
        filters=[("worker", "=", worker)],
    )
    for off, text in zip(t["routed_offset"].to_pylist(), t["watermarks"].to_pylist()):
        wm, v = decode_watermarks(text)
        if (v if v is not None else off) == version:
            return int(off), wm
    raise ConfigError(f"worker {worker}: committed at version {version} but no progress row")
