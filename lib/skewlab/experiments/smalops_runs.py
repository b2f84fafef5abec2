"""SMALOPS reproductions' setup, one simulated run, and the claims they check.

Shared by :mod:`skewlab.experiments.smalops` (the experiments) and the tests,
so a test computes a claim's value the way the report does. The setup is the
paper's where it speaks (10 s decisions, Eq. 4 off, Zipf s=1.1 v=2.72, 10..50
us per message, 5 minutes) and skewlab's where it does not (see
:class:`SmalopsSetup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from skewlab.experiments.claims import Claim, at_most, near, true
from skewlab.grouping import make_grouping
from skewlab.rebalance import make_rebalancer
from skewlab.rebalance.base import DEFAULT_TUPLE_BYTES, hash_worker
from skewlab.sim import ConstantService, SimConfig, SimResult, simulate
from skewlab.sim.rebalance_hook import RebalanceHook, StateTransfer
from skewlab.workload import Workload
from skewlab.workload._common import zipf_weights

__all__ = [
    "RunOutcome",
    "SmalopsSetup",
    "claim_fig9_drop",
    "claim_fig9_flat",
    "claim_gate",
    "claim_p99_change",
    "run_policy",
]

SEED = "smalops"
S_PARTITIONS, S_KEYS, S_RUN_S, S_UTIL, S_INTERVAL_S = 8, 30, 300.0, 0.9, 10.0
S_STATE = StateTransfer(bytes_per_s=125e6, latency_s=1e-3)
"""Split-state hand-off: 1 ms plus the key's window of 100-byte tuples at 1 Gbit/s."""
SERVICES_US = (10, 20, 30, 40, 50)
PAPER_P99_CHANGE = {20: -57.0, 50: -73.0}
"""SMALOPS Fig. 7/8: p99 queueing delay change vs Kafka's hashing, percent."""
P99_TOLERANCE = 15.0
THRESHOLDS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2)
PAPER_THRESHOLD = 0.1
GATE_THRESHOLD = 0.02
"""The Eq. 4 row's threshold: enough heavy keys that best fit (Eq. 3) has moves to gate."""
SHARP_DROP_PCT = -20.0
"""Fig. 9's "drops sharply", as a rule: p99 at 10 % at least 20 % below the threshold under it."""
FLAT_BAND_PCT = 20.0
"""Fig. 9's "no significant impact" above 10 %: p99 within 20 % of the 10 % one."""


def pct(new: float, old: float) -> float:
    """Percent change from ``old`` to ``new`` (nan when ``old`` is 0)."""
    return 100.0 * (new - old) / old if old > 0 else float("nan")


def us(seconds: float) -> str:
    """Seconds as microseconds, one decimal."""
    return f"{seconds * 1e6:.1f}"


def _hottest_share(keys: int, partitions: int) -> float:
    """Largest share of one hash partition (murmur3 of ``k<rank>``) under SMALOPS' Zipf."""
    p = zipf_weights(keys, 1.1, 2.72)
    p /= p.sum()
    where = [hash_worker(f"k{i}", partitions) for i in range(keys)]
    return float(np.bincount(where, weights=p, minlength=partitions).max())


@dataclass(frozen=True)
class SmalopsSetup:
    """One run's size: ``rate`` events/s for ``run_s`` s, decisions every ``interval_s`` s.

    :meth:`of` derives it from the scale: the rate keeps the hottest hashed
    partition ``S_UTIL`` busy at 50 us; the run lasts ``300 * scale`` s and the
    decision interval is the paper's 10 s (``run_s / 3`` for runs under 30 s,
    so that even a test sees decisions).
    """

    keys: int
    partitions: int
    rate: float
    run_s: float
    interval_s: float
    hottest_share: float

    @classmethod
    def of(cls, scale: float, keys: int = S_KEYS, partitions: int = S_PARTITIONS) -> SmalopsSetup:
        """The setup at ``scale`` (1 = the paper's 5 min): the rate keeps the hottest hashed
        partition :data:`S_UTIL` busy at 50 us, decisions every 10 s (shorter on tiny runs)."""
        share = _hottest_share(keys, partitions)
        run_s = S_RUN_S * scale
        return cls(
            keys=keys,
            partitions=partitions,
            rate=S_UTIL / (50e-6 * share),
            run_s=run_s,
            interval_s=min(S_INTERVAL_S, run_s / 3.0),
            hottest_share=share,
        )

    @property
    def events(self) -> int:
        """Events of one run: ``rate * run_s``, at least 1,000."""
        return max(int(self.rate * self.run_s), 1000)

    def top_shares(self) -> np.ndarray:
        """Each Zipf rank's share of the events, hottest first."""
        p = zipf_weights(self.keys, 1.1, 2.72)
        return p / p.sum()

    def lines(self, service_us: str) -> str:
        """The setup, stated for the report."""
        p = self.top_shares()
        top = ", ".join(f"{100 * x:.1f} %" for x in p[:3])
        return "\n".join(
            [
                f"{self.partitions} partitions (KEY grouping = Kafka's hash), one FIFO consumer "
                f"each; Zipf s=1.1 v=2.72 over {self.keys} keys (top keys {top}): keys at or above "
                + ", ".join(f"{t:.0%}: {int((p >= t).sum())}" for t in (0.1, 0.05, 0.02))
                + "; the lossy counter can track them all",
                f"Poisson arrivals at {self.rate:,.0f} ev/s for {self.run_s:g} s "
                f"({self.events:,} events): the hottest hashed partition gets "
                f"{100 * self.hottest_share:.1f} % of the events, "
                f"{100 * S_UTIL:.0f} % busy at 50 us, {40 * S_UTIL:.0f} % at 20 us; "
                f"service {service_us} us/message",
                f"SMALOPS decides every {self.interval_s:g} s with the Eq. 4 gate off (the paper's "
                "10 s interval instead of Eq. 4); lossy counting (epsilon 0.001) fed per routed "
                "batch (<= 0.1 s); a key turning heavy is placed at once (two choices) once the "
                "window holds 1,000 events",
                f"moved keys hand off their state: the new consumer holds the key's records until "
                f"the old one served them and the state ({DEFAULT_TUPLE_BYTES} B per tuple of the "
                f"window) arrived, {S_STATE.latency_s * 1e3:g} ms + bytes at "
                f"{S_STATE.bytes_per_s / 1e6:g} MB/s; the Eq. 4 row takes t_SM from the same model",
            ]
        )


@dataclass(frozen=True)
class RunOutcome:
    """One simulated policy: its result and what SMALOPS did."""

    result: SimResult
    hook: RebalanceHook

    @property
    def p99(self) -> float:
        """99th percentile queueing delay (s), the paper's Fig. 7-10 metric."""
        return self.result.queue_delay.p99

    def moves(self, kind: str) -> int:
        """Moves of ``kind`` (``migrate``, ``place``, ``drop``) over the run."""
        return self.hook.moves_of(kind)

    def extra_max(self, name: str) -> float:
        """Largest value of decision extra ``name`` over tick and online decisions (0 if none)."""
        vals = [d.extra.get(name, 0.0) for d in (*self.hook.decisions, *self.hook.online)]
        return float(max(vals, default=0.0))

    def extra_sum(self, name: str) -> float:
        """Sum of decision extra ``name`` over the tick decisions."""
        return float(sum(d.extra.get(name, 0.0) for d in self.hook.decisions))

    def heavy_mean(self) -> float:
        """Mean number of heavy keys per tick decision (0 without decisions)."""
        vals = [d.extra.get("heavy_keys", 0.0) for d in self.hook.decisions]
        return float(np.mean(vals)) if vals else 0.0


def run_policy(
    setup: SmalopsSetup,
    workload: Workload,
    service_s: float,
    threshold: float | None,
    *,
    seed: int,
    gate: bool = False,
) -> RunOutcome:
    """One run: KEY grouping alone (``threshold=None``) or with SMALOPS at ``threshold``.

    ``gate=True`` turns SMALOPS' Eq. 4 on with ``t_SM`` from :data:`S_STATE`
    (``latency_s + tuples * tuple_bytes / bytes_per_s`` of the key's window).
    """
    W = setup.partitions
    if threshold is None:
        rb = make_rebalancer("none", W).build()
    else:
        rb = make_rebalancer(
            "smalops",
            W,
            threshold=threshold,
            t_msg=service_s,
            gate=gate,
            t_sm=S_STATE.latency_s,
            t_sm_per_tuple=S_STATE.per_tuple_s(DEFAULT_TUPLE_BYTES),
            seed=seed,
        ).build()
    hook = RebalanceHook(rb, interval_s=setup.interval_s, handoff=S_STATE)
    cfg = SimConfig(
        service=ConstantService(service_s),
        window_s=setup.interval_s,
        seed=seed,
        arrivals="poisson",
    )
    result = simulate(
        make_grouping("key", W), workload, setup.events, setup.rate, config=cfg, hooks=[hook]
    )
    return RunOutcome(result, hook)


def claim_p99_change(service_us: int, change_pct: float, why: str = "") -> Claim:
    """Fig. 7/8: SMALOPS' p99 change vs hashing within 15 points of the paper's."""
    target = PAPER_P99_CHANGE[service_us]
    fig = "Fig. 7(a)/8" if service_us == 20 else "Fig. 7(b)/8"
    return Claim(
        seed=SEED,
        claim=f"p99 queueing delay vs hashing at {service_us} us",
        paper=f"{target:+.0f} %",
        value=change_pct,
        rule=near(target, P99_TOLERANCE, unit=" %"),
        ours=f"{change_pct:+.0f} %",
        figure=fig,
        why=why,
    )


def claim_fig9_drop(p99_by_threshold: dict[float, float], why: str = "") -> Claim:
    """Fig. 9: p99 drops sharply at the 10 % threshold (vs the threshold just below it)."""
    below = max(t for t in p99_by_threshold if t < PAPER_THRESHOLD)
    change = pct(p99_by_threshold[PAPER_THRESHOLD], p99_by_threshold[below])
    return Claim(
        seed=SEED,
        claim=f"p99 drops at the 10 % threshold (change from {below:.0%} to 10 %)",
        paper="drops sharply",
        value=change,
        rule=at_most(SHARP_DROP_PCT, " %"),
        ours=f"{change:+.0f} %",
        figure="Fig. 9",
        why=why,
    )


def claim_fig9_flat(p99_by_threshold: dict[float, float], why: str = "") -> Claim:
    """Fig. 9: raising the threshold above 10 % has no significant impact."""
    base = p99_by_threshold[PAPER_THRESHOLD]
    above = {t: pct(v, base) for t, v in p99_by_threshold.items() if t > PAPER_THRESHOLD}
    worst = max(above.values(), key=abs)
    return Claim(
        seed=SEED,
        claim="p99 above the 10 % threshold vs at 10 % (largest change)",
        paper="no significant impact",
        value=abs(worst),
        rule=at_most(FLAT_BAND_PCT, " % (abs)"),
        ours=", ".join(f"{t:.0%}: {c:+.0f} %" for t, c in sorted(above.items())),
        figure="Fig. 9",
        why=why,
    )


def claim_gate(off: dict[str, Any], on: dict[str, Any]) -> Claim:
    """Eq. 4 with ``t_SM`` from the state size: it must hold back best-fit moves."""
    return Claim(
        seed=SEED,
        claim=f"Eq. 4 gate, t_SM from the state size, at {GATE_THRESHOLD:.0%} (migrate moves)",
        paper="move only when the queueing gain exceeds t_SM",
        value=on["migrate_moves"] < off["migrate_moves"],
        rule=true("fewer best-fit moves with the gate than without"),
        ours=(
            f"{off['migrate_moves']} -> {on['migrate_moves']} ({on['gated_eq4']:.0f} gated); "
            f"p99 {us(off['p99_s'])} -> {us(on['p99_s'])} us"
        ),
        figure="Eq. 4",
        why="best fit found no move for the gate to judge" if not off["migrate_moves"] else "",
    )
