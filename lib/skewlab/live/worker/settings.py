"""A worker's settings (written by the run as JSON, read back once by the worker process:
:func:`read_worker_settings`) and its report; the worker itself:
:mod:`skewlab.live.worker.process`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from skewlab.errors import ConfigError
from skewlab.io.kafka.base import KafkaSettings
from skewlab.rundir import RunDir, settings_text


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """One worker's configuration (validated here, at the edge)."""

    run_id: str
    worker: int
    topic: str
    kafka: KafkaSettings
    delta_root: str
    window_s: float = 15.0
    service_us: float = 0.0
    flush_interval_s: float = 2.0
    poll_interval_s: float = 0.05
    max_fetch: int = 20_000
    stop_file: str | None = None
    splitters: int = 0
    """Splitters of the route job when message sets are on (a rebalancer runs); 0 = off."""
    cost: str = "spin"
    """How the per-event cost is paid: ``spin`` (busy CPU) or ``sleep`` (an instance that
    stands for its own node: scale-out runs on 2 cores would otherwise starve Spark)."""
    ready_file: str | None = None
    """Written once the worker has restored its state and is about to read (scale-out)."""
    scale_out: bool = False
    """A scale-out run: the worker follows the state manager's switches and stops the
    keys they move at a cut (docs/scaleout.md, "The cut")."""

    def __post_init__(self) -> None:
        if self.cost not in ("spin", "sleep"):
            raise ConfigError(f"cost must be spin or sleep, got {self.cost!r}")
        if self.splitters < 0:
            raise ConfigError(f"splitters must be >= 0, got {self.splitters}")
        if self.worker < 0:
            raise ConfigError(f"worker must be >= 0, got {self.worker}")
        if self.window_s <= 0:
            raise ConfigError(f"window_s must be > 0, got {self.window_s}")
        if self.service_us < 0:
            raise ConfigError(f"service_us must be >= 0, got {self.service_us}")

    @property
    def app_id(self) -> str:
        """The worker's Delta app id (``RunDir.worker_app`` of worker and run)."""
        return RunDir.worker_app(self.worker, self.run_id)


@dataclass(slots=True)
class WorkerReport:
    """What :meth:`Worker.run` did: the offsets it started and stopped at, records taken
    and replays dropped by the watermark, and its Delta flushes."""

    worker: int
    start_offset: int
    end_offset: int
    accepted: int
    dropped: int
    flushes: int


def settings_to_json(s: WorkerSettings) -> str:
    """``s`` as JSON for the worker process; of ``kafka`` only bootstrap and client go."""
    d = {f: getattr(s, f) for f in s.__dataclass_fields__}
    d["kafka"] = {"bootstrap": s.kafka.bootstrap, "client": s.kafka.client}
    return json.dumps(d)


def settings_from_json(text: str) -> WorkerSettings:
    """Settings from :func:`settings_to_json`'s text, validated again (:class:`ConfigError`)."""
    d = json.loads(text)
    d["kafka"] = KafkaSettings(**d["kafka"])
    return WorkerSettings(**d)


def read_worker_settings(arg: str) -> WorkerSettings:
    """An instance process's settings, read and validated once at its start (a worker's or a
    warm spare's): ``arg`` is its settings file (``RunDir.worker_settings(i)``) or that
    file's JSON text."""
    return settings_from_json(settings_text(arg))
