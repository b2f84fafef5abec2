"""Checks a run's size before any service starts: disk for its events, cores for its workers.

A run keeps every event twice on the broker's disk (``events`` and ``routed``, the
embedded broker's log under the data dir), plus Kafka's per-record overhead; the Delta
tables hold aggregates, far smaller. :func:`check_run_size` refuses, in one line naming
the numbers and the flag that overrides, a run whose planned events need more than
:data:`DISK_SHARE` of the data dir's free disk at :func:`bytes_per_event`; it returns a
warning when the workers outnumber what the machine's cores can run side by side.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from skewlab.errors import ConfigError
from skewlab.runsettings import ExperimentSettings
from skewlab.spec import n_events

RECORD_OVERHEAD_BYTES = 120
"""Per copy of an event on the broker's disk beyond its payload: the JSON envelope (key,
ts, seq), the routed copy's headers and Kafka's record and batch framing (a bound, not
an average: a key may be long)."""

DISK_SHARE = 0.8
"""At most this share of the data dir's free disk is planned for one run."""

WORKERS_PER_CORE = 4
"""More workers per core than this gets a warning: every worker is a busy process."""

ALLOW_FLAG = "--allow-large"

CLI_FIX = f"lower --rate, --duration or --events, or pass {ALLOW_FLAG} to run it anyway"
"""What a refused ``skewlab run`` can do about it (the DAG says its own)."""


def bytes_per_event(payload_bytes: int) -> int:
    """Disk one event costs a run: two copies (``events``, ``routed``) with overhead."""
    return 2 * (payload_bytes + RECORD_OVERHEAD_BYTES)


def _gb(n: float) -> str:
    return f"{n / 1e9:,.1f} GB" if n >= 1e8 else f"{n / 1e6:,.1f} MB"


def check_run_size(
    s: ExperimentSettings,
    allow_large: bool = False,
    free_bytes: Callable[[Path], int] = lambda p: shutil.disk_usage(p).free,
    cores: int | None = None,
    fix: str = CLI_FIX,
) -> list[str]:
    """Refuse (:class:`ConfigError`) a run ``s`` too large for
    its data dir's disk unless ``allow_large``; return warnings (workers vs cores).
    ``fix``: what the refused caller can do, ending the message (the CLI's flags)."""
    home = Path(s.home).expanduser()
    where = next((p for p in (home, *home.parents) if p.exists()), Path("/"))
    per = bytes_per_event(s.payload_bytes)
    events = n_events(s.spec.workload)
    need, free = events * per, free_bytes(where)
    if not allow_large and need > DISK_SHARE * free:
        raise ConfigError(
            f"this run plans {events:,} events: about {_gb(need)} on the broker's disk at "
            f"{per} bytes per event (two copies, events and routed), more than "
            f"{DISK_SHARE:.0%} of the {_gb(free)} free under {where}; {fix}"
        )
    n_cores = cores or os.cpu_count() or 1
    if s.workers > WORKERS_PER_CORE * n_cores:
        return [
            f"{s.workers} workers on {n_cores} cores: each worker is a busy process, so "
            f"start-up slows down and rates are CPU-bound; the run goes on"
        ]
    return []
