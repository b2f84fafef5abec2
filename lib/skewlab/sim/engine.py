"""Discrete-event queueing simulation of a grouping feeding ``W`` FIFO workers.

DKG's topology reduced to its queues: keyed events dealt to ``S`` splitters, each routing with
its own grouping, workers serving first come, first served. Entry points :func:`simulate`
and :class:`SimConfig`; the order of one run is on :class:`Simulator`, in full in docs/sim.md.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from skewlab.clock import Clock, ManualClock, SystemClock
from skewlab.errors import ConfigError
from skewlab.grouping.base import Grouping, GroupingConfig
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.metrics import LatencyHistogram, dist_cost, e_lb, imb_score, std_dev_pct, throughput
from skewlab.sim.base import LoadView, RoutingOverride, SimError, SimHook
from skewlab.sim.queue import route_queues
from skewlab.sim.result import SimResult
from skewlab.sim.service import ConstantService, ServiceTime
from skewlab.sim.tracking import WindowTracker
from skewlab.workload.base import Workload

__all__ = ["Progress", "SimConfig", "Simulator", "simulate"]

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
"""``progress(events_done, events_total)``, called after every chunk."""

ARRIVALS: tuple[str, ...] = ("workload", "poisson")
"""Arrival processes of :attr:`SimConfig.arrivals`."""


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Parameters of the simulator (the grouping brings ``W``, the workload the keys).

    ``service`` defaults to DKG's ``processDuration`` (1 ms); ``window_s`` to
    DKG's WorkerBolt tick (``timeIntervalOfWorkerBolts`` = 15 s).
    """

    service: ServiceTime = field(default_factory=lambda: ConstantService(1e-3))
    splitters: int = 1
    window_s: float = 15.0
    block_s: float = 0.1
    block_events: int = 8192
    chunk: int = 65_536
    seed: int = 0
    arrivals: str = "workload"
    """``workload``: the workload's event times; ``poisson``: a Poisson process at the rate."""

    def __post_init__(self) -> None:
        if not isinstance(self.service, ServiceTime):
            raise ConfigError(f"service must be a ServiceTime model, got {self.service!r}")
        if self.arrivals not in ARRIVALS:
            raise ConfigError(
                f"arrivals must be one of {', '.join(ARRIVALS)}, got {self.arrivals!r}"
            )
        for name in ("splitters", "block_events", "chunk"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("window_s", "block_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ConfigError(f"{name} must be a positive number of seconds, got {value!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ConfigError(f"seed must be an integer, got {self.seed!r}")

    def build(
        self,
        grouping: GroupingConfig,
        workload: Workload,
        hooks: Sequence[SimHook] = (),
        timer: Clock | None = None,
    ) -> Simulator:
        """The simulator of ``grouping`` over ``workload`` with control-loop ``hooks``.

        ``timer`` only measures this process's own compute time (default
        :class:`~skewlab.clock.SystemClock`); it never affects results.
        """
        return Simulator(self, grouping, workload, hooks, timer or SystemClock())


class _HookState:
    """One hook's tick schedule and the loads it will see at its next tick."""

    def __init__(self, hook: SimHook, workers: int) -> None:
        interval = hook.interval_s
        if not isinstance(interval, int | float) or not math.isfinite(interval) or interval <= 0:
            raise ConfigError(f"hook interval_s must be a positive number, got {interval!r}")
        self.hook = hook
        self.interval = float(interval)
        self.next_due = self.interval
        self.since = 0.0
        self.worker_loads = np.zeros(workers, dtype=np.int64)
        self.key_counts = np.zeros(0, dtype=np.int64)
        self.last_worker = np.zeros(0, dtype=np.int64)
        self.override: RoutingOverride | None = None

    def account(self, ids: np.ndarray, workers: np.ndarray, vocab_size: int) -> None:
        if self.key_counts.size < vocab_size:
            cap = max(vocab_size, 2 * self.key_counts.size)
            self.key_counts = np.concatenate(
                [self.key_counts, np.zeros(cap - self.key_counts.size, dtype=np.int64)]
            )
            self.last_worker = np.concatenate(
                [self.last_worker, np.full(cap - self.last_worker.size, -1, dtype=np.int64)]
            )
        self.worker_loads += np.bincount(workers, minlength=self.worker_loads.size)
        np.add.at(self.key_counts, ids, 1)
        self.last_worker[ids] = workers

    def view(self, now: float, backlog: np.ndarray, vocab: KeyVocab) -> LoadView:
        def ro(a: np.ndarray) -> np.ndarray:
            a = a.copy()
            a.flags.writeable = False
            return a

        return LoadView(
            now=now,
            since=self.since,
            worker_loads=ro(self.worker_loads),
            key_counts=ro(self.key_counts),
            last_worker=ro(self.last_worker),
            backlog_s=ro(backlog),
            vocab=vocab,
            override=self.override,
        )

    def reset(self, now: float) -> None:
        self.since = now
        self.next_due = now + self.interval
        self.worker_loads[:] = 0
        self.key_counts[:] = 0
        self.last_worker[:] = -1


class Simulator:
    """Runs one grouping config over one workload. One :meth:`run`, in order:

    1. pull one chunk of events; draw every event's service time from the seeded generator in
       stream order (every grouping faces the same costs); ``arrivals="poisson"`` redraws the
       times as a Poisson process at the rate;
    2. cut the chunk into blocks (``block_s``, ``block_events``, hook ticks); set the shared
       :class:`~skewlab.clock.ManualClock` to each block's first event time;
    3. call the hooks that are due (:class:`~skewlab.sim.base.SimHook`), install overrides;
    4. route the block: splitter ``seq % S`` routes event ``seq`` with ``route_batch``; pins
       replace its decisions; hooks with ``on_events`` see the routed block;
    5. run every worker's FIFO queue (:func:`~skewlab.sim.queue.route_queues`), holding
       handed-off keys until their state is ready; record waits and sojourns;
    6. count per (window, worker) and each key's workers per window;
    7. after the last chunk compute the metrics into a :class:`SimResult`.

    Details and the hand-off's bound on overtaking: docs/sim.md.

    Every :meth:`run` builds fresh groupings, so runs are repeatable: the same
    config, workload seed and service seed give the same result.
    """

    def __init__(
        self,
        config: SimConfig,
        grouping: GroupingConfig,
        workload: Workload,
        hooks: Sequence[SimHook],
        timer: Clock,
    ) -> None:
        self.config = config
        self.grouping = grouping
        self.workload = workload
        self.hooks = tuple(hooks)
        self.timer = timer
        self.workers = int(grouping.workers)

    def run(self, events: int, rate: float, progress: Progress | None = None) -> SimResult:
        """Simulate ``events`` events arriving at ``rate`` events/s (workload event time)."""
        if not isinstance(events, int) or isinstance(events, bool) or events < 1:
            raise ConfigError(f"events must be an integer >= 1, got {events!r}")
        if not math.isfinite(rate) or rate <= 0:
            raise ConfigError(f"rate must be a positive number of events/s, got {rate!r}")
        return _Run(self, events, float(rate), progress).execute()


class _Run:
    """The mutable state of one :meth:`Simulator.run`."""

    def __init__(self, sim: Simulator, events: int, rate: float, progress: Progress | None):
        cfg = sim.config
        self.sim = sim
        self.cfg = cfg
        self.n = events
        self.rate = rate
        self.progress = progress
        self.W = sim.workers
        self.clock = ManualClock(0.0)
        self.routers: list[Grouping] = [
            sim.grouping.build(clock=self.clock) for _ in range(cfg.splitters)
        ]
        self.rng = np.random.default_rng(cfg.seed)
        self.arrival_rng = np.random.default_rng([cfg.seed, 1])
        self.t_arrival = 0.0
        self.last_dep = np.zeros(self.W)
        self.hold = np.zeros(0)
        self.hold_until = -math.inf
        self.delay = LatencyHistogram()
        self.soj = LatencyHistogram()
        self.tracker = WindowTracker(self.W, cfg.window_s)
        self.hooks = [_HookState(h, self.W) for h in sim.hooks]
        self.watchers = [h for h in self.hooks if callable(getattr(h.hook, "on_events", None))]
        self.pinned = np.zeros(0, dtype=np.int64)
        self.pinned_vocab = -1
        self.merged: dict[str, int] = {}
        self.ticks = 0
        self.overrides = 0
        self.route_s = 0.0
        self.workload_s = 0.0

    def execute(self) -> SimResult:
        timer = self.sim.timer
        t_start = timer.now()
        first_ts: float | None = None
        done = 0
        it = iter(self.sim.workload.events(self.n, chunk=self.cfg.chunk, rate=self.rate))
        while True:
            t0 = timer.now()
            chunk = next(it, None)
            self.workload_s += timer.now() - t0
            if chunk is None:
                break
            if len(chunk) == 0:
                continue
            ts = np.asarray(chunk.ts, dtype=np.float64)
            if self.cfg.arrivals == "poisson":
                ts = self.t_arrival + np.cumsum(
                    self.arrival_rng.exponential(1.0 / self.rate, ts.size)
                )
                self.t_arrival = float(ts[-1])
            if first_ts is None:
                first_ts = float(ts[0])
            self._chunk(chunk.seq0, chunk.keys.ids, ts, chunk.vocab)
            done += len(chunk)
            if self.progress is not None:
                self.progress(done, self.n)
        if done != self.n:
            raise SimError(f"workload yielded {done} events, expected {self.n}")
        self.tracker.finish()
        return self._result(first_ts or 0.0, timer.now() - t_start)

    def _chunk(self, seq0: int, ids: np.ndarray, ts: np.ndarray, vocab: KeyVocab) -> None:
        """Steps 1-6 of :class:`Simulator` for one chunk."""
        cfg = self.cfg
        m = ids.size
        services = cfg.service.sample(m, self.rng)
        workers = np.empty(m, dtype=np.int64)
        start = q_start = 0
        while start < m:
            t_block = float(ts[start])
            due = self._due()
            if t_block >= due:
                self._queues(ids, workers, ts, services, q_start, start)
                q_start = start
                self._tick(t_block, vocab)
                due = self._due()
            end = min(start + cfg.block_events, m)
            end = min(end, int(np.searchsorted(ts, t_block + cfg.block_s, side="left")))
            if math.isfinite(due):
                end = min(end, int(np.searchsorted(ts, due, side="left")))
            end = max(end, start + 1)
            if t_block > self.clock.now():
                self.clock.set(t_block)
            workers[start:end] = self._route(seq0 + start, ids[start:end], vocab)
            for h in self.hooks:
                h.account(ids[start:end], workers[start:end], len(vocab))
            if self.watchers and self._watch(float(ts[end - 1]), ids[start:end], vocab):
                self._queues(ids, workers, ts, services, q_start, end)
                q_start = end
                self._handoffs(float(ts[end - 1]), vocab)
            start = end
        self._queues(ids, workers, ts, services, q_start, m)
        self.tracker.add(ts, ids, workers, len(vocab))

    def _due(self) -> float:
        return min((h.next_due for h in self.hooks), default=math.inf)

    def _route(self, seq: int, ids: np.ndarray, vocab: KeyVocab) -> np.ndarray:
        """Step 4: splitter ``seq % S`` routes each event; overrides pin keys."""
        timer = self.sim.timer
        t0 = timer.now()
        s_count = len(self.routers)
        if s_count == 1:
            out = np.asarray(self.routers[0].route_batch(KeyBatch(ids, vocab)), dtype=np.int64)
        else:
            out = np.empty(ids.size, dtype=np.int64)
            for s, router in enumerate(self.routers):
                first = (s - seq) % s_count
                if first < ids.size:
                    sub = ids[first::s_count]
                    out[first::s_count] = router.route_batch(KeyBatch(sub, vocab))
        self.route_s += timer.now() - t0
        if out.size != ids.size or (out.size and (out.min() < 0 or out.max() >= self.W)):
            raise SimError(
                f"grouping {self.sim.grouping.name!r} returned workers outside 0..{self.W - 1}"
            )
        if self.merged:
            if self.pinned_vocab != len(vocab):
                self._pin(vocab)
            pins = self.pinned[ids]
            hit = pins >= 0
            out[hit] = pins[hit]
        return out

    def _pin(self, vocab: KeyVocab) -> None:
        """Rebuild the id -> pinned worker table (-1 = grouping decides)."""
        self.pinned = np.full(len(vocab), -1, dtype=np.int64)
        for key, worker in self.merged.items():
            i = vocab.id_of(key)
            if i is not None:
                self.pinned[i] = worker
        self.pinned_vocab = len(vocab)

    def _watch(self, now: float, ids: np.ndarray, vocab: KeyVocab) -> bool:
        """Step 4's stream watchers; true when one of them installed a new override."""
        changed = False
        for h in self.watchers:
            decision = h.hook.on_events(now, ids, vocab)  # type: ignore[attr-defined]
            if decision is not None:
                self._install(h, decision)
                changed = True
        return changed

    def _install(self, h: _HookState, decision: object) -> None:
        if not isinstance(decision, RoutingOverride):
            raise SimError(f"hook returned {type(decision).__name__}, not an override")
        bad = [w for _, w in decision.pairs if w >= self.W]
        if bad:
            raise SimError(f"hook pinned a key to worker {bad[0]} of {self.W}")
        h.override = decision
        self.overrides += 1
        self._merge()

    def _handoffs(self, now: float, vocab: KeyVocab) -> None:
        """Step 5's holds: each handed-off key is ready at ``max(D_src, now) + transfer_s``."""
        for h in self.hooks:
            take = getattr(h.hook, "take_handoffs", None)
            if take is None:
                continue
            for key, src, transfer_s in take():
                i = vocab.id_of(key)
                if i is None:
                    continue
                if self.hold.size < len(vocab):
                    grown = np.full(max(len(vocab), 2 * self.hold.size), -math.inf)
                    grown[: self.hold.size] = self.hold
                    self.hold = grown
                ready = max(float(self.last_dep[src]), now) + float(transfer_s)
                self.hold[i] = max(float(self.hold[i]), ready)
                self.hold_until = max(self.hold_until, ready)

    def _queues(
        self,
        ids: np.ndarray,
        workers: np.ndarray,
        ts: np.ndarray,
        services: np.ndarray,
        lo: int,
        hi: int,
    ) -> None:
        """Step 5 for events ``lo:hi`` of the chunk."""
        if hi <= lo:
            return
        ready = None
        if self.hold_until > float(ts[lo]):
            if self.hold.size < int(ids[lo:hi].max()) + 1:
                grown = np.full(int(ids[lo:hi].max()) + 1, -math.inf)
                grown[: self.hold.size] = self.hold
                self.hold = grown
            ready = self.hold[ids[lo:hi]]
        wait, sojourn = route_queues(
            workers[lo:hi], ts[lo:hi], services[lo:hi], self.last_dep, ready
        )
        self.delay.add(wait)
        self.soj.add(sojourn)

    def _tick(self, t_block: float, vocab: KeyVocab) -> None:
        """Step 3: call every hook due at or before ``t_block``, earliest first."""
        while True:
            due = self._due()
            if due > t_block:
                return
            for h in self.hooks:
                if h.next_due != due:
                    continue
                backlog = np.maximum(self.last_dep - due, 0.0)
                decision = h.hook.on_tick(due, h.view(due, backlog, vocab))
                self.ticks += 1
                if decision is not None:
                    self._install(h, decision)
                take_pauses = getattr(h.hook, "take_pauses", None)
                if take_pauses is not None:  # optional: state-migration pauses (base.py)
                    for w, pause in take_pauses().items():
                        self.last_dep[w] = max(float(self.last_dep[w]), due) + pause
                self._handoffs(due, vocab)
                h.reset(due)
                if h.next_due <= t_block:
                    # no events since ``due``: skip the empty ticks (a gap in a trace)
                    h.next_due = due + h.interval * (math.floor((t_block - due) / h.interval) + 1)

    def _merge(self) -> None:
        self.merged = {}
        for h in self.hooks:
            if h.override is not None:
                self.merged.update(h.override.pairs)
        self.pinned_vocab = -1

    def _result(self, first_ts: float, wall: float) -> SimResult:
        """Step 7."""
        loads = self.tracker.window_loads()
        totals = loads.sum(axis=0) if loads.size else np.zeros(self.W, dtype=np.int64)
        per_key = self.tracker.workers_per_key()
        makespan = max(float(self.last_dep.max()) - first_ts, 0.0)
        wk = self.tracker.window_keys
        result = SimResult(
            strategy=self.sim.grouping.name,
            workers=self.W,
            splitters=self.cfg.splitters,
            events=self.n,
            rate=self.rate,
            service_mean_s=self.cfg.service.mean,
            window_s=self.cfg.window_s,
            makespan_s=makespan,
            throughput=throughput(self.n, makespan),
            worker_loads=tuple(int(x) for x in totals),
            std_dev=std_dev_pct(totals),
            imb_score=imb_score(totals),
            e_lb=e_lb(totals),
            dist_cost=dist_cost(per_key),
            distinct_keys=int(np.count_nonzero(per_key)),
            partials=self.tracker.partials,
            window_keys=wk,
            merge_cost=self.tracker.partials / wk if wk else 0.0,
            queue_delay=self.delay.summary(),
            sojourn=self.soj.summary(),
            hook_ticks=self.ticks,
            overrides=self.overrides,
            wall_s=wall,
            route_s=self.route_s,
            workload_s=self.workload_s,
            window_loads=loads,
            delay_cdf=self.delay.cdf(),
        )
        log.debug(
            "simulated %s: %d events, %.3fs wall (route %.3fs, workload %.3fs)",
            result.strategy,
            self.n,
            wall,
            self.route_s,
            self.workload_s,
        )
        return result


def simulate(
    grouping: GroupingConfig,
    workload: Workload,
    events: int,
    rate: float,
    *,
    config: SimConfig | None = None,
    hooks: Sequence[SimHook] = (),
    progress: Progress | None = None,
) -> SimResult:
    """One-call form: ``(config or SimConfig()).build(grouping, workload, hooks).run(...)``."""
    sim = (config or SimConfig()).build(grouping, workload, hooks)
    return sim.run(events, rate, progress)
