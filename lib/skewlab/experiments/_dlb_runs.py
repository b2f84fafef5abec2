"""The measurements behind ``dlb-switch``: one simulated run per policy, and the key floor.

:func:`measure_switch` runs every policy with its rebalancing hook and a :class:`WindowProbe`,
and reduces each run to :class:`PolicyStats` (how state of a moved key is sized:
docs/experiments.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import cast

import numpy as np

from skewlab.grouping import make_grouping
from skewlab.grouping.base import GroupingConfig
from skewlab.grouping.partitioner import PartitionerConfig
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.metrics import imb_score, key_floor
from skewlab.rebalance import make_rebalancer
from skewlab.rebalance.base import Decision
from skewlab.sim.base import LoadView, RoutingOverride
from skewlab.sim.engine import SimConfig, simulate
from skewlab.sim.rebalance_hook import RebalanceHook
from skewlab.sim.service import ConstantService
from skewlab.workload.switching import EpsSwitchWorkload
from skewlab.workload.zipf import rank_key

__all__ = [
    "KG_PARTITIONER",
    "POLICIES",
    "KGReference",
    "PolicyRun",
    "PolicyStats",
    "Setup",
    "SwitchMeasure",
    "WindowProbe",
    "floor_series",
    "kg_reference",
    "measure_switch",
    "run_policy",
    "sample_rstd",
]

KG_PARTITIONER = "modulo"
"""DLB's KG: "the engine that will process the incoming tuple using a simple modulo hash
function on the tuple's key" (Sec. 3.3), ``key % |Engines|`` on the key's Zipf rank."""

POLICIES = ("kg", "pkg", "lptf", "dlb-h", "dlb-l")
"""DLB Fig. 3(b)'s policies: the baselines KG, PKG, LPTF and DLB's two."""


@dataclass(frozen=True)
class Setup:
    """One ``dlb-switch`` configuration (times in event seconds, already scaled)."""

    engines: int
    keys: int
    theta: float
    low_s: float
    high_s: float
    run_s: float
    rate: float
    service_s: float
    check_s: float
    window_s: float
    migrate_s_per_tuple: float
    state_tuples: int
    seed: int

    @property
    def events(self) -> int:
        """Events of one run: ``rate * run_s``, at least 1,000."""
        return max(int(self.rate * self.run_s), 1000)

    def workload(self) -> EpsSwitchWorkload:
        """The eps 0.2 <-> 1.5 Zipf switch over ``keys`` keys (DLB Sec. 4), seeded."""
        return EpsSwitchWorkload(
            seed=self.seed, keys=self.keys, low_s=self.low_s, high_s=self.high_s
        )

    def high(self, t_end: np.ndarray, span: float) -> np.ndarray:
        """Whether each window ``[t_end - span, t_end)`` lies in an eps 1.5 phase (by midpoint)."""
        mid = np.asarray(t_end, dtype=np.float64) - span / 2
        return np.mod(mid, self.low_s + self.high_s) >= self.low_s

    def settled(self, t_end: np.ndarray, span: float) -> np.ndarray:
        """Eps 1.5 windows that start at or after the phase's first check on eps 1.5 loads.

        Before that check no policy has seen the phase: those windows measure the
        check interval (reaction delay), not how well the keys are placed.
        """
        start = np.asarray(t_end, dtype=np.float64) - span
        period = self.low_s + self.high_s
        phase = start - np.mod(start, period) + self.low_s
        first = (np.floor(phase / self.check_s + 1e-9) + 1.0) * self.check_s
        return self.high(t_end, span) & (start >= first - 1e-9)


@dataclass
class WindowProbe:
    """A hook that only watches: each window's imbScore and key loads (returns no override)."""

    interval_s: float
    times: list[float] = field(default_factory=list)
    rstd: list[float] = field(default_factory=list)
    counts: list[np.ndarray] = field(default_factory=list)
    vocab: KeyVocab | None = None

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        """Record the window's imbScore (DLB Eq. 2) and true key loads; never pins a key."""
        self.times.append(now)
        self.rstd.append(imb_score(view.worker_loads) if view.total else 0.0)
        self.counts.append(np.array(view.key_counts, dtype=np.int64))
        self.vocab = view.vocab
        return None

    def count_matrix(self) -> np.ndarray:
        """Windows x vocabulary ids: the events of each key in each window."""
        width = max((c.size for c in self.counts), default=0)
        out = np.zeros((len(self.counts), width), dtype=np.int64)
        for i, c in enumerate(self.counts):
            out[i, : c.size] = c
        return out


@dataclass
class PolicyRun:
    """What one policy did: RSTD per window, its decisions, the throughput, moves sized."""

    policy: str
    times: np.ndarray
    rstd: np.ndarray
    decisions: list[Decision]
    throughput: float
    probe: WindowProbe

    @property
    def rebalances(self) -> list[Decision]:
        """The decisions that moved at least one key (DLB's "retransmissions")."""
        return [d for d in self.decisions if d.moves]

    def stored_state(self, setup: Setup, d: Decision) -> tuple[int, int]:
        """``(state tuples of the moved keys, state tuples of all keys)`` at ``d`` (FSD model).

        Each key holds its last ``setup.state_tuples`` tuples (at most its
        tuples so far): FSD compares a tweet with the last ``H`` of its LSH key.
        """
        cum = self._cumulative(d.ts)
        state = np.minimum(cum, setup.state_tuples)
        vocab = self.probe.vocab
        if vocab is None:
            return 0, 0
        ids = [vocab.id_of(m.key) for m in d.moves]
        moved = sum(int(state[i]) for i in ids if i is not None and i < state.size)
        return moved, int(state.sum())

    def _cumulative(self, t: float) -> np.ndarray:
        mat = self.probe.count_matrix()
        upto = np.asarray(self.probe.times) <= t + 1e-9
        return mat[upto].sum(axis=0) if upto.any() else np.zeros(mat.shape[1], np.int64)


def run_policy(setup: Setup, policy: str) -> PolicyRun:
    """One simulated run of ``policy`` (``kg``, ``pkg``, ``lptf``, ``dlb-h``, ``dlb-l``).

    Every policy but PKG starts from KG, ``key % |Engines|`` on the Zipf ranks
    (:data:`KG_PARTITIONER`); the movers pin keys over it and idle keys fall back to it.
    """
    grouping: GroupingConfig
    if policy == "pkg":
        grouping = make_grouping("pkg", setup.engines)
    else:
        grouping = cast(GroupingConfig, PartitionerConfig(setup.engines, KG_PARTITIONER))
    if policy in ("kg", "pkg"):
        rebalancer = make_rebalancer("none", setup.engines).build()
    else:
        rebalancer = make_rebalancer(policy, setup.engines, theta=setup.theta).build()
    hook = RebalanceHook(
        rebalancer, interval_s=setup.check_s, pause_s_per_tuple=setup.migrate_s_per_tuple
    )
    probe = WindowProbe(setup.window_s)
    cfg = SimConfig(
        service=ConstantService(setup.service_s), window_s=setup.window_s, seed=setup.seed
    )
    r = simulate(
        grouping, setup.workload(), setup.events, setup.rate, config=cfg, hooks=[hook, probe]
    )
    return PolicyRun(
        policy=policy,
        times=np.asarray(probe.times, dtype=np.float64),
        rstd=np.asarray(probe.rstd, dtype=np.float64),
        decisions=list(hook.decisions),
        throughput=r.throughput,
        probe=probe,
    )


def floor_series(probe: WindowProbe, engines: int) -> tuple[np.ndarray, np.ndarray]:
    """Per window of ``probe``: ``(lower bound, achievable)`` key floor of imbScore."""
    lower, achievable = [], []
    for c in probe.counts:
        f = key_floor(c[c > 0], engines)
        lower.append(f.lower)
        achievable.append(f.achievable)
    return np.asarray(lower), np.asarray(achievable)


def sample_rstd(population_rstd: float, engines: int) -> float:
    """An imbScore with the sample std (``n - 1``) from one with the population std (``n``).

    The means are the same, so the two differ by ``sqrt(n / (n - 1))`` (1.118 for 5 engines).
    """
    return population_rstd * float(np.sqrt(engines / (engines - 1))) if engines > 1 else 0.0


@dataclass(frozen=True)
class KGReference:
    """KG's imbScore (population std) on the exact Zipf shares: with KG's modulo placement,
    with murmur3 of the key's name, and over random placements."""

    eps: float
    ours: float
    murmur3: float
    random_median: float
    random_p5: float
    random_p95: float
    keys_per_engine: tuple[int, ...]
    with_hottest: tuple[int, ...]
    """Ranks (1-based, among the 10 hottest) that share the hottest key's engine."""


def kg_reference(
    setup: Setup, eps: float, rng: np.random.Generator, draws: int = 2000
) -> KGReference:
    """Where KG's RSTD comes from: the placement of the Zipf(eps) shares (no sampling)."""
    ranks = np.arange(setup.keys)
    p = (1.0 + ranks) ** -float(eps)
    p /= p.sum()
    batch = KeyBatch.from_keys([rank_key(int(r)) for r in ranks])
    router = PartitionerConfig(setup.engines, KG_PARTITIONER).build()
    engines = np.asarray(router.route_batch(batch))
    ours = imb_score(np.bincount(engines, weights=p, minlength=setup.engines))
    hashed = np.asarray(make_grouping("key", setup.engines).build().route_batch(batch))
    murmur3 = imb_score(np.bincount(hashed, weights=p, minlength=setup.engines))
    rand = [
        imb_score(np.bincount(rng.integers(0, setup.engines, setup.keys), p, setup.engines))
        for _ in range(draws)
    ]
    p5, med, p95 = (float(x) for x in np.percentile(rand, [5, 50, 95]))
    hot = engines[0]
    return KGReference(
        eps=float(eps),
        ours=ours,
        murmur3=murmur3,
        random_median=med,
        random_p5=p5,
        random_p95=p95,
        keys_per_engine=tuple(np.bincount(engines, minlength=setup.engines).tolist()),
        with_hottest=tuple(int(r) + 1 for r in np.flatnonzero(engines[:10] == hot).tolist()),
    )


@dataclass(frozen=True)
class PolicyStats:
    """One policy's figures in ``dlb-switch`` (RSTD in %, means over windows / rebalances)."""

    policy: str
    rstd_high: float
    rstd_low: float
    floor_gap_high: float
    floor_gap_settled: float
    rebalances: int
    keys_pct: float
    keys_pct_max: float
    tuples_window: float
    tuples_window_pct: float
    tuples_state: float
    tuples_state_pct: float
    throughput: float


def _mean(xs: Sequence[float] | np.ndarray) -> float:
    return float(np.mean(xs)) if len(xs) else 0.0


def _stats(
    setup: Setup, run: PolicyRun, floor: np.ndarray, high: np.ndarray, settled: np.ndarray
) -> PolicyStats:
    n = min(run.rstd.size, floor.size, high.size)
    rstd, fl, hi, ok = run.rstd[:n], floor[:n], high[:n], settled[:n]
    reb = run.rebalances
    keys = [100.0 * d.keys_moved / max(d.keys_total, 1) for d in reb]
    win_pct = [100.0 * d.load_moved / max(d.load_total, 1) for d in reb]
    state = [run.stored_state(setup, d) for d in reb]
    return PolicyStats(
        policy=run.policy,
        rstd_high=_mean(rstd[hi]),
        rstd_low=_mean(rstd[~hi]),
        floor_gap_high=_mean(rstd[hi] - fl[hi]),
        floor_gap_settled=_mean(rstd[ok] - fl[ok]),
        rebalances=len(reb),
        keys_pct=_mean(keys),
        keys_pct_max=max(keys, default=0.0),
        tuples_window=_mean([d.load_moved for d in reb]),
        tuples_window_pct=_mean(win_pct),
        tuples_state=_mean([m for m, _ in state]),
        tuples_state_pct=_mean([100.0 * m / max(t, 1) for m, t in state]),
        throughput=run.throughput,
    )


@dataclass
class SwitchMeasure:
    """Everything ``dlb-switch`` measured: per-policy runs and stats, the floor per window."""

    setup: Setup
    runs: dict[str, PolicyRun]
    stats: dict[str, PolicyStats]
    times: np.ndarray
    high: np.ndarray
    settled: np.ndarray
    floor_lower: np.ndarray
    floor_achievable: np.ndarray

    @property
    def floor_high(self) -> float:
        """Mean achievable floor over the eps 1.5 windows."""
        return _mean(self.floor_achievable[self.high])

    @property
    def floor_low(self) -> float:
        """Mean achievable floor over the eps 0.2 windows."""
        return _mean(self.floor_achievable[~self.high])

    @property
    def floor_bracket(self) -> float:
        """Largest ``achievable - lower`` over the windows (how tight the floor is)."""
        gap = self.floor_achievable - self.floor_lower
        return float(gap.max()) if gap.size else 0.0


def measure_switch(
    setup: Setup,
    policies: Sequence[str] = POLICIES,
    progress: Callable[[str], None] | None = None,
    floor: tuple[np.ndarray, np.ndarray] | None = None,
) -> SwitchMeasure:
    """Run every policy on ``setup`` and compute the key floor of each reporting window.

    ``floor`` (``(lower, achievable)`` per window) reuses a floor already computed
    for the same stream and reporting window (it does not depend on the policy).
    """
    runs: dict[str, PolicyRun] = {}
    for policy in policies:
        if progress is not None:
            progress(f"{policy} (check every {setup.check_s:g}s)")
        runs[policy] = run_policy(setup, policy)
    first = runs[policies[0]]
    lower, achievable = floor if floor is not None else floor_series(first.probe, setup.engines)
    times = first.times
    high = setup.high(times, setup.window_s)
    settled = setup.settled(times, setup.window_s)
    stats = {p: _stats(setup, r, achievable, high, settled) for p, r in runs.items()}
    return SwitchMeasure(setup, runs, stats, times, high, settled, lower, achievable)
