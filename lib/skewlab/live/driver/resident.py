"""A resident process of the data dir (the route host, the warm workers app), known by files.

Its directory holds ``record`` (the detached process's :class:`ProcRecord`), a ready file it
writes once warm, and a ``stop`` file it leaves on. Shared by
:mod:`skewlab.live.driver.route_host` and :mod:`skewlab.live.driver.warm_app`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

from skewlab.live.driver.handle import ProcRecord
from skewlab.live.driver.launch import Detached


def read_record(path: Path) -> ProcRecord | None:
    """The process record in ``path``, if one was written."""
    try:
        return ProcRecord(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def running(path: Path) -> bool:
    """Whether the process recorded in ``path`` runs."""
    rec = read_record(path)
    return rec is not None and Detached(rec).alive()


def read_ready(ready: Path, record: Path) -> dict[str, Any] | None:
    """The JSON of ready file ``ready`` while the process recorded in ``record`` runs."""
    try:
        out = dict(json.loads(ready.read_text()))
    except (OSError, ValueError):
        return None
    return out if running(record) else None


def stop(record: Path, stop_file: Path, grace_s: float) -> None:
    """Touch ``stop_file``, wait up to ``grace_s`` for the recorded process to leave, kill
    what is left of it (its group)."""
    rec = read_record(record)
    if rec is None:
        return
    stop_file.parent.mkdir(parents=True, exist_ok=True)
    stop_file.touch()
    proc = Detached(rec)
    deadline = time.monotonic() + grace_s
    while proc.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
