"""Named crash points for fault-injection tests.

``SKEWLAB_CRASH="route.after_produce@2,worker.before_commit"`` ends the process (exit code
:data:`CRASH_EXIT`, ``os._exit``) at the named hits of :func:`crash_point`; with
``SKEWLAB_CRASH_DIR`` set each point fires once per directory. Details and the points:
docs/crash-matrix.md, "Crash points".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from skewlab.envsettings import env_settings

__all__ = ["CRASH_EXIT", "ENV_DIR", "ENV_POINTS", "crash_env", "crash_point", "fired", "parse"]

CRASH_EXIT = 86
ENV_POINTS = "SKEWLAB_CRASH"
ENV_DIR = "SKEWLAB_CRASH_DIR"

_hits: dict[str, int] = {}


def parse(spec: str) -> dict[str, int]:
    """``"a@2,b"`` -> ``{"a": 2, "b": 1}``; raises ValueError naming a bad entry."""
    out: dict[str, int] = {}
    for raw in spec.split(","):
        item = raw.strip()
        if not item:
            continue
        name, _, nth = item.partition("@")
        if not name or (nth and not nth.isdigit()) or (nth and int(nth) < 1):
            raise ValueError(f"bad crash point {item!r}: expected NAME or NAME@N with N >= 1")
        out[name] = int(nth) if nth else 1
    return out


def _marker(directory: str, name: str) -> Path:
    return Path(directory) / f"crash-{name}.fired"


def fired(directory: str | Path, name: str) -> bool:
    """Whether point ``name`` has fired for marker directory ``directory``."""
    return _marker(str(directory), name).exists()


def crash_point(name: str, env: Mapping[str, str] | None = None) -> None:
    """End the process at once if ``SKEWLAB_CRASH`` names ``name`` and this is its n-th hit.

    Counts hits per process. With ``SKEWLAB_CRASH_DIR`` set, a point whose
    marker exists never fires again (the restarted process runs on).
    """
    settings = env_settings(env)
    spec = settings.crash
    if not spec:
        return
    want = parse(spec).get(name)
    if want is None:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] != want:
        return
    directory = settings.crash_dir
    if directory:
        marker = _marker(directory, name)
        marker.parent.mkdir(parents=True, exist_ok=True)
        try:  # created atomically: of processes reaching the point at once, one fires
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
    os._exit(CRASH_EXIT)


def crash_env(points: Mapping[str, int] | list[str], directory: str | Path) -> dict[str, str]:
    """The environment entries that arm ``points`` with markers in ``directory``."""
    items = points.items() if isinstance(points, Mapping) else ((p, 1) for p in points)
    spec = ",".join(f"{p}@{n}" for p, n in items)
    return {ENV_POINTS: spec, ENV_DIR: str(directory)}
