"""One live experiment on the embedded (or a real) stack, start to verdict.

``run_experiment(settings)`` does, in order:

1. make sure the broker runs (embedded tansu under the data dir, unless a
   bootstrap is given), and create the run's topics ``events-<run>`` (P
   partitions) and ``routed-<run>`` (W partitions);
2. start the Spark route job and the W worker processes (subprocesses, logs
   under ``<data dir>/runs/<run>/``) and wait until the route query is up;
3. produce the workload at the target rate, showing progress (produced /
   routed / processed, current imbalance); with ``rebalance`` set, the
   rebalancer loop (:mod:`skewlab.live.rebalancer`) runs in a thread meanwhile
   and the route job and workers move keys by message sets; with ``scale_out``
   set, the state manager (:mod:`skewlab.live.state_manager`) does instead: it
   scores the workers, starts / stops instances on the spare partitions of
   ``routed`` (created up front) and moves keys by the same message sets;
4. stop: the control loop stops, the route job drains all input and exits
   (end-of-stream goes to the spare partitions too), then the running workers
   drain their partitions, flush to Delta and exit;
5. merge ``partials`` into ``results`` and check them against a plain count of
   ``events`` (the verdict), compute the summary, log the MLflow run;
6. delete the run's topics (the broker keeps topics in memory).

Process handles are exposed through ``hooks`` so the crash tests can kill the
route job or a worker mid-stream and restart it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import make_grouping
from skewlab.io.delta import DeltaStore
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.live.aggregate import merge, plain_count, results_counts
from skewlab.live.producer import ProduceSettings, produce, ramp_events
from skewlab.live.route_job import RouteSettings
from skewlab.live.summary import RunSummary, summarize
from skewlab.live.worker import WorkerSettings, settings_to_json
from skewlab.metrics import imb_score
from skewlab.pipeline.exactness import check
from skewlab.workload import parse_workload

log = logging.getLogger(__name__)


class ExperimentError(SkewlabError):
    """A part of the live run failed; the message says which and where its log is."""


@dataclass(frozen=True)
class ExperimentSettings:
    """The parameters of one live run (the CLI and the DAG build this)."""

    strategy: str = "dkg"
    workers: int = 4
    partitions: int = 4
    workload: str = "zipf:s=1.1,v=2.72"
    rate: float = 5_000.0
    duration_s: float = 20.0
    events: int | None = None
    service_us: float = 0.0
    window_s: float = 15.0
    payload_bytes: int = 100
    seed: int = 1
    client: str = "confluent"
    home: str = ".skewlab"
    bootstrap: str | None = None
    trigger_s: float = 1.0
    max_events_per_trigger: int | None = None
    flush_interval_s: float = 1.0
    strategy_params: dict[str, Any] = field(default_factory=dict)
    mlflow: bool = True
    experiment: str | None = None
    keep_topics: bool = False
    quality: bool = True
    """Run the Great Expectations suites on the run's tables (skewlab.quality)."""
    rebalance: str | None = None
    rebalance_interval_s: float = 10.0
    rebalance_lead_s: float = 1.0
    rebalance_params: dict[str, Any] = field(default_factory=dict)
    scale_out: str | None = None
    """Scale-out policy of the state manager: checkpoint | active-backup | restart."""
    scale_out_interval_s: float = 1.0
    scale_out_lead_s: float = 0.5
    max_instances: int = 2
    """Instances per scaled worker at most (spare partitions of routed: W x (this - 1))."""
    scale_out_params: dict[str, Any] = field(default_factory=dict)
    load_ramp: str | None = None
    """``FACTORx/INTERVALs``: the rate multiplies by FACTOR every INTERVAL seconds."""

    def __post_init__(self) -> None:
        if self.load_ramp is not None:
            from skewlab.live.state_manager import parse_ramp

            parse_ramp(self.load_ramp)
        if self.scale_out is not None:
            if self.rebalance is not None:
                raise ConfigError("--scale-out and --rebalance both write assignments; pick one")
            if self.strategy != "key":
                raise ConfigError(
                    f"--scale-out runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            self.state_manager_settings("check", "")
        if self.rebalance is not None:
            from skewlab.live.rebalancer import POLICIES

            if self.rebalance not in POLICIES:
                raise ConfigError(
                    f"rebalance must be one of {', '.join(POLICIES)}, got {self.rebalance!r}"
                )
            if self.strategy != "key":
                raise ConfigError(
                    f"--rebalance runs on top of KEY grouping, got strategy {self.strategy!r}; "
                    "use --strategy key"
                )
            from skewlab.rebalance import make_rebalancer

            make_rebalancer(self.rebalance, workers=self.workers, **self.rebalance_params)
            if not self.rebalance_interval_s > 0:
                raise ConfigError(
                    f"rebalance interval must be > 0 s, got {self.rebalance_interval_s}"
                )
        if not 1 <= self.workers <= 64:
            raise ConfigError(f"workers must be in 1..64, got {self.workers}")
        if not 1 <= self.partitions <= 64:
            raise ConfigError(f"partitions must be in 1..64, got {self.partitions}")
        if not self.rate > 0:
            raise ConfigError(f"rate must be > 0 events/s, got {self.rate}")
        if self.events is None and not self.duration_s > 0:
            raise ConfigError(f"duration must be > 0 s, got {self.duration_s}")
        if self.events is not None and self.events < 1:
            raise ConfigError(f"events must be >= 1, got {self.events}")
        if self.service_us < 0:
            raise ConfigError(f"service time must be >= 0 us, got {self.service_us}")
        if not self.window_s > 0:
            raise ConfigError(f"window must be > 0 s, got {self.window_s}")
        make_grouping(self.strategy, workers=self.workers, **self.strategy_params)
        parse_workload(self.workload, seed=self.seed)

    @property
    def n_events(self) -> int:
        if self.events is not None:
            return self.events
        if self.load_ramp is not None:
            from skewlab.live.state_manager import parse_ramp

            return ramp_events(self.rate, self.duration_s, *parse_ramp(self.load_ramp))
        return max(1, round(self.rate * self.duration_s))

    @property
    def message_sets(self) -> bool:
        return self.rebalance is not None or self.scale_out is not None

    def state_manager_settings(self, run_id: str, delta_root: str) -> Any:
        from skewlab.live.state_manager import StateManagerSettings

        assert self.scale_out is not None
        return StateManagerSettings(
            run_id=run_id,
            delta_root=delta_root,
            policy=self.scale_out,
            workers=self.workers,
            service_us=self.service_us,
            max_instances=self.max_instances,
            interval_s=self.scale_out_interval_s,
            lead_s=self.scale_out_lead_s,
            params=dict(self.scale_out_params),
        )


@dataclass
class Procs:
    """The run's subprocesses; hooks may kill and restart them (crash tests)."""

    route: subprocess.Popen[bytes] | None = None
    workers: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    restart_route: Callable[[], None] = lambda: None
    restart_worker: Callable[[int], None] = lambda i: None


Hook = Callable[[int, Procs], None]
"""Called with the number of events produced so far (after each produce chunk)."""

ProgressFn = Callable[[dict[str, float]], None]


BOOTSTRAP_ENV = "SKEWLAB_KAFKA_BOOTSTRAP"
"""A Kafka to use instead of the embedded broker (``--bootstrap`` wins)."""
DELTA_ROOT_ENV = "SKEWLAB_DELTA_ROOT"
"""Where the Delta tables live (a path or ``s3://...``); default ``<data dir>/delta``."""
SPARK_MASTER_ENV = "SKEWLAB_SPARK_MASTER"
"""The route job's Spark master; default ``local[2]``."""


def delta_root_of(home: Path) -> str:
    """The Delta root of runs under data dir ``home`` (``$SKEWLAB_DELTA_ROOT`` wins)."""
    return os.environ.get(DELTA_ROOT_ENV) or str(home / "delta")


def new_run_id(strategy: str) -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{strategy}-{stamp}-{uuid.uuid4().hex[:6]}"


def _spawn(module: str, arg: str, log_path: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    out = open(log_path, "ab")  # noqa: SIM115 - owned by the child for its life
    return subprocess.Popen(
        [sys.executable, "-m", module, arg], stdout=out, stderr=subprocess.STDOUT, env=env
    )


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_experiment(
    s: ExperimentSettings,
    progress: ProgressFn | None = None,
    hook: Hook | None = None,
    run_id: str | None = None,
) -> RunSummary:
    """Run one live experiment (steps 1-6 of the module doc) and return its summary."""
    run_id = run_id or new_run_id(s.strategy)
    home = Path(s.home).resolve()
    run_dir = home / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    delta_root = delta_root_of(home)
    bootstrap = s.bootstrap or os.environ.get(BOOTSTRAP_ENV) or _ensure_broker(home)
    kafka = KafkaSettings(bootstrap, s.client)
    client = connect(kafka)
    events_topic, routed_topic = f"events-{run_id}", f"routed-{run_id}"
    client.create_topic(events_topic, s.partitions)
    sm_settings = s.state_manager_settings(run_id, delta_root) if s.scale_out is not None else None
    n_routed = sm_settings.partitions if sm_settings is not None else s.workers
    client.create_topic(routed_topic, n_routed)
    stop_route, stop_workers = run_dir / "route.stop", run_dir / "workers.stop"
    route_settings = RouteSettings(
        run_id=run_id,
        bootstrap=bootstrap,
        events_topic=events_topic,
        routed_topic=routed_topic,
        workers=s.workers,
        strategy=s.strategy,
        strategy_params=dict(s.strategy_params),
        delta_root=delta_root,
        checkpoint=str(run_dir / "checkpoint"),
        client=s.client,
        window_s=s.window_s,
        trigger_s=s.trigger_s,
        max_events_per_trigger=s.max_events_per_trigger,
        stop_file=str(stop_route),
        message_sets=s.message_sets,
        spark_master=os.environ.get(SPARK_MASTER_ENV) or "local[2]",
    )
    (run_dir / "route.json").write_text(route_settings.to_json())
    worker_files: dict[int, Path] = {}

    def worker_file(i: int) -> Path:
        ws = WorkerSettings(
            run_id=run_id,
            worker=i,
            topic=routed_topic,
            kafka=kafka,
            delta_root=delta_root,
            window_s=s.window_s,
            service_us=s.service_us,
            flush_interval_s=s.flush_interval_s,
            stop_file=str(stop_workers),
            splitters=s.partitions if s.message_sets else 0,
            cost="sleep" if s.scale_out is not None else "spin",
            ready_file=str(run_dir / f"worker-{i}.ready"),
        )
        worker_files[i] = run_dir / f"worker-{i}.json"
        worker_files[i].write_text(settings_to_json(ws))
        return worker_files[i]

    for i in range(s.workers):
        worker_file(i)
    (run_dir / "settings.json").write_text(json.dumps(asdict(s), indent=2))

    procs = Procs()

    def start_route() -> None:
        procs.route = _spawn(
            "skewlab.live.route_job", str(run_dir / "route.json"), run_dir / "route.log"
        )

    def start_worker(i: int) -> None:
        (run_dir / f"worker-{i}.ready").unlink(missing_ok=True)
        path = worker_files.get(i) or worker_file(i)
        procs.workers[i] = _spawn("skewlab.live.worker", str(path), run_dir / f"worker-{i}.log")

    procs.restart_route, procs.restart_worker = start_route, start_worker
    t_start = time.time()
    rebalancer: Any = None
    manager: Any = None
    try:
        start_route()
        for i in range(s.workers):
            start_worker(i)
        _wait_ready(run_dir / "route.ready", procs, run_dir)
        if s.rebalance is not None:
            from skewlab.live.rebalancer import RebalanceSettings, start_loop

            rebalancer = start_loop(
                RebalanceSettings(
                    run_id=run_id,
                    delta_root=delta_root,
                    policy=s.rebalance,
                    workers=s.workers,
                    interval_s=s.rebalance_interval_s,
                    lead_s=s.rebalance_lead_s,
                    params=dict(s.rebalance_params),
                )
            )
        if sm_settings is not None:
            manager = _start_manager(sm_settings, client, routed_topic, procs, run_dir)
        watch = _Watcher(client, events_topic, routed_topic, delta_root, run_id, progress)
        workload = parse_workload(s.workload, seed=s.seed)
        ps = _produce_settings(s, events_topic)

        def on_chunk(sent: int, total: int) -> None:
            watch.tick(sent, total)
            if hook is not None:
                hook(sent, procs)

        t_produce = time.time()
        report = produce(client, workload, ps, progress=on_chunk)
        for loop in (rebalancer, manager):
            if loop is not None:
                loop[1].set()
                loop[0].join()
        if manager is not None:
            manager[2].kafka.close()
        stop_route.touch()
        _wait_exit("route job", procs, lambda: procs.route, run_dir / "route.log", watch)
        if manager is not None:
            _end_spares(client, routed_topic, s.workers, n_routed)
        stop_workers.touch()
        live = sorted(manager[2].running) if manager is not None else range(s.workers)
        for i in live:
            _wait_exit(f"worker {i}", procs, _getter(procs, i), run_dir / f"worker-{i}.log", watch)
        t_done = time.time()
        if manager is not None:
            manager[2].track_events(final=True)
        store = DeltaStore(delta_root)
        merge(store, run_id)
        expected, _ = plain_count(client, events_topic, s.window_s)
        exactness = check(expected, results_counts(store, run_id))
        log.info("exactness of %s: %s", run_id, exactness.summary())
        summary = summarize(
            store,
            run_id,
            s,
            report,
            exactness,
            t_produce,
            t_done,
            run_dir,
            time.time() - t_start,
            scale=manager[2].report() if manager is not None else None,
        )
        quality = None
        if s.quality:
            from skewlab.quality import check_run

            quality = check_run(store, run_id, events_counts=expected, window_s=s.window_s)
            summary.quality = "passed" if quality.ok else "failed"
            summary.quality_failures = list(quality.failures)
        if s.mlflow:
            from skewlab.live.tracking import log_run

            summary = log_run(summary, s, home, quality)
        return summary
    finally:
        for loop in (rebalancer, manager):
            if loop is not None:
                loop[1].set()
        for p in [procs.route, *list(procs.workers.values())]:
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
        if not s.keep_topics:
            for t in (events_topic, routed_topic):
                try:
                    client.delete_topic(t)
                except SkewlabError as exc:
                    log.warning("could not delete topic %s: %s", t, exc)
        client.close()


def _produce_settings(s: ExperimentSettings, topic: str) -> ProduceSettings:
    if s.load_ramp is None:
        return ProduceSettings(topic, s.partitions, s.n_events, s.rate, s.payload_bytes)
    from skewlab.live.state_manager import parse_ramp

    factor, interval = parse_ramp(s.load_ramp)
    return ProduceSettings(
        topic,
        s.partitions,
        s.n_events,
        s.rate,
        s.payload_bytes,
        chunk=int(min(2048, max(32, s.rate / 10))),  # 0.1 s of the first step
        ramp_factor=factor,
        ramp_interval_s=interval,
    )


def _start_manager(
    sm: Any, client: Any, routed_topic: str, procs: Procs, run_dir: Path
) -> tuple[Any, Any, Any]:
    """Start the state manager thread with start / stop / readiness of worker processes."""
    from skewlab.live.state_manager import Processes, start_loop

    def stop(i: int) -> None:
        p = procs.workers.get(i)
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def ready(i: int) -> float | None:
        p = procs.workers.get(i)
        f = run_dir / f"worker-{i}.ready"
        if p is None or p.poll() is not None or not f.exists():
            return None
        try:
            return float(f.read_text())
        except ValueError:  # caught mid-write: ready at the next look
            return None

    own = connect(KafkaSettings(client.settings.bootstrap, client.settings.client))
    return start_loop(sm, own, routed_topic, Processes(procs.restart_worker, stop, ready))


def _end_spares(client: Any, topic: str, first: int, n: int) -> None:
    """End of stream on the spare partitions (the route job ends its W own ones)."""
    from skewlab.pipeline import events

    for w in range(first, n):
        client.produce(topic, b"", partition=w, headers=[(events.END_HEADER, b"1")])
    client.flush()


def _getter(procs: Procs, i: int) -> Callable[[], subprocess.Popen[bytes] | None]:
    return lambda: procs.workers.get(i)


def _ensure_broker(home: Path) -> str:
    from skewlab.services import get_service

    state = get_service("broker", home).start()
    return state.url


def _wait_ready(marker: Path, procs: Procs, run_dir: Path, timeout_s: float = 180.0) -> None:
    deadline = time.time() + timeout_s
    while not marker.exists():
        if procs.route is not None and procs.route.poll() is not None:
            raise ExperimentError(
                f"route job exited ({procs.route.returncode}) before it was ready; "
                f"{run_dir / 'route.log'}: {_tail(run_dir / 'route.log')}"
            )
        if time.time() > deadline:
            raise ExperimentError(f"route job not ready after {timeout_s:.0f} s")
        time.sleep(0.2)


def _wait_exit(
    what: str,
    procs: Procs,
    get: Callable[[], subprocess.Popen[bytes] | None],
    log_path: Path,
    watch: _Watcher,
    timeout_s: float = 600.0,
) -> None:
    deadline = time.time() + timeout_s
    while True:
        p = get()
        if p is None:
            raise ExperimentError(f"{what} was never started")
        rc = p.poll()
        if rc is not None:
            if rc != 0:
                raise ExperimentError(f"{what} failed (exit {rc}); {log_path}: {_tail(log_path)}")
            return
        if time.time() > deadline:
            raise ExperimentError(f"{what} did not finish within {timeout_s:.0f} s")
        watch.tick(None, None)
        time.sleep(0.25)


class _Watcher:
    """Progress: produced / routed / processed and current imbalance, at most once a second."""

    def __init__(
        self,
        client: Any,
        events_topic: str,
        routed_topic: str,
        delta_root: str,
        run_id: str,
        progress: ProgressFn | None,
    ) -> None:
        self.client, self.events_topic, self.routed_topic = client, events_topic, routed_topic
        self.store = DeltaStore(delta_root)
        self.run_id = run_id
        self.progress = progress
        self._last = 0.0
        self._sent = 0
        self._total = 0

    def tick(self, sent: int | None, total: int | None) -> None:
        if sent is not None and total is not None:
            self._sent, self._total = sent, total
        now = time.time()
        if self.progress is None or now - self._last < 1.0:
            return
        self._last = now
        routed = self.client.end_offsets(self.routed_topic)
        loads = [routed.get(w, 0) for w in sorted(routed)]
        prog = self.store.read(
            "worker_progress", run_id=self.run_id, columns=["worker", "routed_offset"]
        )
        done: dict[int, int] = {}
        for w, o in zip(prog["worker"].to_pylist(), prog["routed_offset"].to_pylist()):
            done[w] = max(done.get(w, 0), o)
        self.progress(
            {
                "produced": float(self._sent),
                "total": float(self._total),
                "routed": float(sum(loads)),
                "processed": float(sum(done.values())),
                "imbalance": imb_score(loads) if sum(loads) else 0.0,
            }
        )
