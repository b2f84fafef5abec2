"""A scale-out instance's process started ahead, with its imports done: released to run.

Starting a Python worker (interpreter and imports: numpy, pyarrow, pandas,
deltalake, librdkafka) took 0.4-0.8 s of a checkpointing scale-out's pause, before
the restore could begin. The run starts the first spare instance of each operator
this way at start-up (``RunContext`` spawners, docs/scaleout.md, "Warm spares"):
the process imports the worker, reads its settings once and runs one throwaway Delta
query (a process's first query sets up delta-rs' query engine, ~0.1 s that the restore
would pay), then waits, holding no state and reading nothing more,
until its ``go`` file exists (the state manager starts the instance: it runs
``skewlab.live.worker.process`` on those settings) or the run's workers are told to stop
(it exits 0 without having run). Storm, where the seed measured, grows an operator
by executors inside worker processes that already run.

``python -m skewlab.live.worker.warm GO_FILE STOP_FILE SETTINGS_JSON``
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from skewlab.io.delta.store import warm_up_queries
from skewlab.live.driver.launch import process_age_s, process_args, without_pandas
from skewlab.live.worker import process as worker
from skewlab.live.worker.settings import read_worker_settings

__all__ = ["POLL_S", "main", "wait_for_release"]

log = logging.getLogger(__name__)

POLL_S = 0.01
"""How often a warm process looks for its ``go`` file."""


def wait_for_release(go: Path, stop: Path, sleep: Callable[[float], None] = time.sleep) -> bool:
    """Block until ``go`` exists (True: run the instance) or ``stop`` does (False)."""
    while True:
        if go.exists():
            return True
        if stop.exists():
            return False
        sleep(POLL_S)


def main(argv: list[str] | None = None) -> int:
    """Wait for release, then run the worker on its settings (exit code as the worker's)."""
    args = process_args(argv, "warm GO_FILE STOP_FILE SETTINGS_JSON")
    if args is None:
        return 2
    go, stop, settings = Path(args[0]), Path(args[1]), read_worker_settings(args[2])
    log.info("warm instance process: imports done %.2f s after its start", process_age_s())
    secs = warm_up_queries(go.parent)  # the restore's first Delta read would pay it
    log.info("warm instance process: Delta query engine warmed in %.2f s", secs)
    waited = time.monotonic()
    if not wait_for_release(go, stop):
        log.info("warm instance process: never started, the run's workers stopped")
        return 0
    log.info("warm instance process released after %.1f s", time.monotonic() - waited)
    return worker.run(settings)


if __name__ == "__main__":
    without_pandas()
    raise SystemExit(main())
