"""A dedicated simulator of one stateful operator whose instance count changes under a policy.

A fluid queueing model of one operator stepped every ``dt_s``: the input ramp, instance
groups with their backlogs and stream positions, the policy's actions mapped to start-up,
state loading and checkpoint stalls, and downstream latency from the furthest connected
position. The model step by step: docs/sim.md, "The scale-out model".
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skewlab.clock import ManualClock
from skewlab.errors import ConfigError
from skewlab.keys import KeyVocab
from skewlab.sim.scaleout_result import (
    ScaleOutEvent,
    ScaleOutResult,
    arrival_latency,
    weighted_quantile,
)
from skewlab.state.base import (
    Action,
    FeedInput,
    Phase,
    Replay,
    Role,
    SplitState,
    StartInstances,
    StopInstances,
    SwitchRouting,
    TakeCheckpoint,
)
from skewlab.state.fairness import FairnessTracker
from skewlab.state.policies import PolicyConfig
from skewlab.state.score import ScoreConfig, Signals, bottleneck_score

__all__ = ["ScaleOutSimConfig", "simulate_scaleout"]

log = logging.getLogger(__name__)

_DURATIONS = ("period_s", "duration_s", "startup_s", "redeploy_s", "measure_s", "dt_s")
_RATES = ("base_rate", "service_rate")
RAMPS = ("continuous", "step", "alternate")
_KEY_RATES = ("snapshot_keys_per_s", "write_keys_per_s", "read_keys_per_s", "copy_keys_per_s")


@dataclass(frozen=True)
class ScaleOutSimConfig:
    """The operator, its load ramp and the costs of state handling (module doc)."""

    policy: PolicyConfig
    base_rate: float = 200.0
    growth: float = 2.0
    period_s: float = 500.0
    ramp: str = "continuous"
    """``continuous`` (the seed's "increased continuously ... doubling every 500 s"), ``step``
    or ``alternate`` (low ``base_rate`` / high ``base_rate * growth`` every ``period_s``)."""
    duration_s: float = 2000.0
    service_rate: float = 150.0
    """Tuples per second one instance processes."""
    state_keys: int = 100_000
    startup_s: float = 2.0
    redeploy_s: float = 20.0
    snapshot_keys_per_s: float = 2e6
    write_keys_per_s: float = 5e5
    read_keys_per_s: float = 1e6
    copy_keys_per_s: float = 1e6
    measure_s: float = 1.0
    noise: float = 0.05
    dt_s: float = 0.05
    score: ScoreConfig = field(default_factory=ScoreConfig)
    seed: int = 1

    def __post_init__(self) -> None:
        for name in _DURATIONS + _KEY_RATES + ("base_rate", "service_rate"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{name} must be > 0, got {getattr(self, name)!r}")
        if self.growth < 1 or self.state_keys < 1 or self.noise < 0:
            raise ConfigError("need growth >= 1, state_keys >= 1 and noise >= 0")
        if self.ramp not in RAMPS:
            raise ConfigError(f"ramp must be one of {', '.join(RAMPS)}, got {self.ramp!r}")
        if self.dt_s > self.measure_s:
            raise ConfigError(f"dt_s ({self.dt_s}) must not exceed measure_s ({self.measure_s})")

    def scaled(self, f: float) -> ScaleOutSimConfig:
        """The same run with time compressed by ``f``: durations (and the score's
        reference times) x f, every rate / f. The fluid model is invariant under
        this change, so a tiny run reproduces the full one's shape and ratios."""
        if not f > 0:
            raise ConfigError(f"scale must be > 0, got {f!r}")
        changes: dict[str, Any] = {n: getattr(self, n) * f for n in _DURATIONS}
        changes.update({n: getattr(self, n) / f for n in (*_KEY_RATES, *_RATES)})
        changes["score"] = dataclasses.replace(
            self.score,
            queue_ref_s=self.score.queue_ref_s * f,
            latency_ref_s=self.score.latency_ref_s * f,
        )
        return dataclasses.replace(self, **changes)

    def rate(self, t: float) -> float:
        """``base_rate * growth ** (t / period_s)``, continuous or in steps; alternating:
        ``base_rate`` in even periods, ``base_rate * growth`` in odd ones (``ramp``)."""
        if self.ramp == "continuous":
            periods = t / self.period_s
        elif self.ramp == "step":
            periods = float(t // self.period_s)
        else:
            periods = float(int(t // self.period_s) % 2)
        return float(self.base_rate * self.growth**periods)


@dataclass
class _Group:
    ids: tuple[int, ...]
    role: Role
    shares: np.ndarray
    backlog: np.ndarray
    ready_at: float
    pos: float = 0.0
    fed: bool = False
    connected: bool = False
    announced: bool = False
    stall_until: float = 0.0


class _Run:
    """One simulation; :func:`simulate_scaleout` is the entry point."""

    def __init__(self, cfg: ScaleOutSimConfig) -> None:
        self.cfg = cfg
        self.clock = ManualClock(0.0)
        self.policy = cfg.policy.build(clock=self.clock)
        self.rng = np.random.default_rng(cfg.seed)
        self.vocab = KeyVocab(f"k{i}" for i in range(cfg.state_keys))
        self._shares: dict[int, np.ndarray] = {}
        self.groups: list[_Group] = []
        self.arrived = 0.0
        self.down = 0.0
        self.checkpoints: dict[int, tuple[float, float]] = {}  # id -> (pos, usable_at)
        self.events: list[ScaleOutEvent] = []
        self.decided: float | None = None
        self.stall = 0.0
        self.load = 0.0
        self.cp_pos = 0.0  # position of the connected group at the last checkpoint
        n = len(self.policy.active)
        g = self._group(self.policy.active, Role.PRIMARY, 0.0)
        g.fed = g.connected = g.announced = True
        assert len(g.ids) == n

    def shares(self, n: int) -> np.ndarray:
        if n not in self._shares:
            where = self.vocab.buckets(13, n)
            self._shares[n] = np.bincount(where, minlength=n) / float(len(self.vocab))
        return self._shares[n]

    def _group(self, ids: tuple[int, ...], role: Role, ready_at: float) -> _Group:
        n = len(ids)
        g = _Group(ids, role, self.shares(n), np.zeros(n), ready_at)
        self.groups.append(g)
        return g

    def find(self, ids: tuple[int, ...]) -> _Group | None:
        return next((g for g in self.groups if g.ids == ids), None)

    def connected(self) -> _Group | None:
        return next((g for g in self.groups if g.connected), None)

    # ------------------------------------------------------------ actions

    def execute(self, actions: list[Action]) -> None:
        now = self.clock.now()
        cfg = self.cfg
        for a in actions:
            if isinstance(a, StartInstances):
                cold = not self.groups
                ready = now + cfg.startup_s + (cfg.redeploy_s if cold else 0.0)
                self._group(a.instances, a.role, ready)
            elif isinstance(a, StopInstances):
                self.groups = [g for g in self.groups if g.ids != a.instances]
            elif isinstance(a, TakeCheckpoint):
                src = self.find(a.instances)
                if src is None:
                    continue
                keys_i = cfg.state_keys / len(src.ids)
                src.stall_until = max(src.stall_until, now) + keys_i / cfg.snapshot_keys_per_s
                self.stall += cfg.state_keys / cfg.snapshot_keys_per_s
                self.cp_pos = src.pos
                self.checkpoints[a.checkpoint] = (
                    src.pos,
                    now + cfg.state_keys / cfg.write_keys_per_s,
                )
            elif isinstance(a, SplitState):
                self._split(a, now)
            elif isinstance(a, FeedInput):
                g = self.find(a.targets)
                if g is not None:
                    g.fed = True
            elif isinstance(a, SwitchRouting):
                for g in self.groups:
                    if g.ids == a.old:
                        g.fed = g.connected = False
                    elif g.ids == a.new:
                        g.fed = g.connected = True
                        g.role = Role.PRIMARY
                self._record(now, len(a.old), len(a.new))
            elif isinstance(a, Replay):
                pass  # the backlog set by SplitState is beta plus the input after tau

    def _split(self, a: SplitState, now: float) -> None:
        g = self.find(a.targets)
        if g is None:
            return
        cfg = self.cfg
        keys_i = cfg.state_keys / len(a.targets)
        if a.checkpoint is None:
            src = self.find(a.sources)
            g.pos = src.pos if src is not None else self.down
            g.ready_at += keys_i / cfg.copy_keys_per_s
            self.load += cfg.state_keys / cfg.copy_keys_per_s
        else:
            pos, usable_at = self.checkpoints[a.checkpoint]
            g.pos = pos
            g.ready_at = max(g.ready_at, usable_at) + keys_i / cfg.read_keys_per_s
            self.load += cfg.state_keys / cfg.read_keys_per_s
        g.backlog = (self.arrived - g.pos) * g.shares

    def _record(self, now: float, before: int, after: int) -> None:
        """A take-over, dated from its decision (:meth:`observe`)."""
        t = self.decided if self.decided is not None else now
        kind = "scale-in" if after < before else "scale-out"
        self.events.append(ScaleOutEvent(t, kind, before, after, None))
        self.decided = None

    def finish_events(self) -> None:
        """Mark the last event done once its instances are connected and ready."""
        g = self.connected()
        now = self.clock.now()
        if self.events and self.events[-1].done is None and g is not None and now >= g.ready_at:
            self.events[-1] = dataclasses.replace(self.events[-1], done=now)

    def observe(self, score: float) -> None:
        """Feed one score (and the changed share of keys) to the policy and run its actions.

        The observation at which the policy enters SCALING, or switches routing
        at once, is the scale decision the take-over time is measured from.
        """
        conn = self.connected()
        n = 0.0 if conn is None else max(conn.pos - self.cp_pos, 0.0)
        changed = float(-np.expm1(-n / self.cfg.state_keys))
        before = self.policy.phase
        actions = self.policy.observe(score, changed)
        entered = self.policy.phase is Phase.SCALING and before is not Phase.SCALING
        if self.decided is None and (entered or any(isinstance(a, SwitchRouting) for a in actions)):
            self.decided = self.clock.now()
        self.execute(actions)
        self.finish_events()

    # ------------------------------------------------------------ step

    def step(self, dt: float, lam: float) -> tuple[float, np.ndarray | None]:
        """Advance ``dt``; returns the processing of the connected group's instances."""
        now = self.clock.now()
        self.arrived += lam * dt
        done_conn: np.ndarray | None = None
        for g in self.groups:
            if g.fed:
                g.backlog += lam * dt * g.shares
            # the part of the step after start-up and snapshot stalls (fluid: a stall
            # shorter than a step costs its own length, not the whole step)
            usable = now + dt - max(now, g.ready_at, g.stall_until)
            if usable <= 0:
                done = np.zeros_like(g.backlog)
            else:
                done = np.minimum(g.backlog, self.cfg.service_rate * usable)
                g.backlog -= done
                g.pos += float(done.sum())
            if g.connected:
                self.down = max(self.down, g.pos)
                done_conn = done
        return self.down, done_conn

    def acks(self) -> None:
        now = self.clock.now()
        conn = self.connected()
        for g in list(self.groups):
            if not g.announced and now >= g.ready_at:
                g.announced = True
                self.execute(self.policy.on_ready(g.ids))
            if (
                g.announced
                and g.fed
                and not g.connected
                and g.role is Role.REPLACEMENT
                and conn is not None
                and g.pos >= conn.pos - 1e-6
            ):
                self.execute(self.policy.on_caught_up(g.ids))

    def score(self, lam: float, processed: np.ndarray, interval: float) -> float:
        g = self.connected()
        if g is None:
            return 100.0
        mu = self.cfg.service_rate
        noisy = lam * max(0.0, 1.0 + self.cfg.noise * float(self.rng.standard_normal()))
        best = 0.0
        fresh = processed.shape != g.shares.shape  # the group took over during the interval
        for i, share in enumerate(g.shares):
            busy = min(lam * share / mu, 1.0) if fresh else float(processed[i]) / (mu * interval)
            s = Signals(noisy * share, mu, float(g.backlog[i]), busy, float(g.backlog[i]) / mu)
            best = max(best, bottleneck_score(s, self.cfg.score))
        return best


def simulate_scaleout(cfg: ScaleOutSimConfig) -> ScaleOutResult:
    """Run ``cfg.policy`` against the load ramp; see the module doc for the model."""
    run = _Run(cfg)
    steps = round(cfg.duration_s / cfg.dt_s)
    per_measure = max(1, round(cfg.measure_s / cfg.dt_s))
    dt = cfg.dt_s
    arrivals = np.empty(steps + 1)
    downs = np.empty(steps + 1)
    arrivals[0] = downs[0] = 0.0
    alive = np.empty(steps)
    backup = 0.0
    pause = cur_pause = max_pause = 0.0
    fair = FairnessTracker()
    window = np.zeros(cfg.policy.start_instances)
    scores: list[float] = []
    for k in range(steps):
        t = k * dt
        lam = cfg.rate(t)
        before = run.down
        down, done = run.step(dt, lam)
        arrivals[k + 1], downs[k + 1] = run.arrived, down
        conn = run.connected()
        if conn is not None and done is not None:
            window = done if window.shape != done.shape else window + done
        if run.arrived - down > 1e-6 and down - before <= 1e-12:
            pause += dt
            cur_pause += dt
            max_pause = max(max_pause, cur_pause)
        else:
            cur_pause = 0.0
        alive[k] = sum(len(g.ids) for g in run.groups)
        backup += dt * any(g.role is Role.SECONDARY for g in run.groups)
        ready = len(conn.ids) if conn is not None and t >= conn.ready_at else 0
        fair.add(dt, float(ready), lam / cfg.service_rate)
        run.clock.set((k + 1) * dt)
        run.acks()
        run.finish_events()
        if (k + 1) % per_measure == 0:
            s = run.score(lam, window, cfg.measure_s)
            scores.append(s)
            window = np.zeros_like(window)
            run.observe(s)
    arrivals, downs = _drain(run, arrivals, downs, steps)
    return _result(cfg, run, arrivals, downs, alive, scores, backup, pause, max_pause, fair)


def _drain(
    run: _Run, arrivals: np.ndarray, downs: np.ndarray, steps: int
) -> tuple[np.ndarray, np.ndarray]:
    """After the run, no more input: step on (at most another run's length) until all is out.

    The tuples still queued at the end get their real latency, and ``processed
    == arrived`` afterwards checks that no tuple was lost in a take-over.
    """
    extra_a, extra_d = [], []
    dt = run.cfg.dt_s
    k = steps
    while run.arrived - run.down > 1e-6 and k < 2 * steps:
        down, _ = run.step(dt, 0.0)
        k += 1
        run.clock.set(k * dt)
        run.acks()
        extra_a.append(run.arrived)
        extra_d.append(down)
    return np.concatenate([arrivals, extra_a]), np.concatenate([downs, extra_d])


def _result(
    cfg: ScaleOutSimConfig,
    run: _Run,
    arrivals: np.ndarray,
    downs: np.ndarray,
    alive: np.ndarray,
    scores: list[float],
    backup: float,
    pause: float,
    max_pause: float,
    fair: FairnessTracker,
) -> ScaleOutResult:
    dt = cfg.dt_s
    steps = len(alive)
    lat, weights = arrival_latency(arrivals, downs, steps, dt, 1.0 / cfg.service_rate)
    per = max(1, round(cfg.measure_s / dt))
    m = steps // per
    w = weights[: m * per].reshape(m, per)
    lat_series = (lat[: m * per].reshape(m, per) * w).sum(1) / np.maximum(w.sum(1), 1e-12)
    thr = np.diff(downs[::per][: m + 1]) / cfg.measure_s
    for e in run.events:
        log.debug("%s event %s", cfg.policy.name, e)
    return ScaleOutResult(
        policy=cfg.policy.name,
        t=np.arange(m) * cfg.measure_s,
        rate=np.array([cfg.rate(i * cfg.measure_s) for i in range(m)]),
        instances=alive[: m * per].reshape(m, per).max(1),
        throughput=thr,
        latency_s=lat_series,
        score=np.asarray(scores[:m]),
        events=list(run.events),
        instance_seconds=float(alive.sum() * dt),
        backup_seconds=backup,
        pause_s=pause,
        max_pause_s=max_pause,
        latency_mean_s=float((lat * weights).sum() / weights.sum()),
        latency_p99_s=weighted_quantile(lat, weights, 0.99),
        fairness=fair.fd,
        processed=float(downs[-1]),
        arrived=float(arrivals[-1]),
        checkpoints=len(run.checkpoints),
        duration_s=steps * dt,
        snapshot_stall_s=run.stall,
        state_load_s=run.load,
    )
