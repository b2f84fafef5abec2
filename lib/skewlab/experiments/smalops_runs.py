"""SMALOPS reproductions' setup, one simulated run, and the claims they check.

Shared by :mod:`skewlab.experiments.smalops` (the experiments) and the tests,
so a test computes a claim's value the way the report does. The setup is the
paper's where it speaks (10 s decisions, Eq. 4 off, Zipf s=1.1 v=2.72, 10..50
us per message, 5 minutes) and skewlab's where it does not (see
:class:`SmalopsSetup`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import numpy as np

from skewlab.experiments.claims import Claim, Rule, at_most, near, true
from skewlab.grouping.base import GroupingConfig
from skewlab.grouping.partitioner import PartitionerConfig
from skewlab.hashing import partitioner
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.rebalance import make_rebalancer
from skewlab.rebalance.base import DEFAULT_TUPLE_BYTES
from skewlab.sim.engine import SimConfig, simulate
from skewlab.sim.rebalance_hook import RebalanceHook, StateTransfer
from skewlab.sim.result import SimResult
from skewlab.sim.service import ConstantService
from skewlab.workload._common import zipf_weights
from skewlab.workload.base import EventChunk, Workload

__all__ = [
    "HASHING",
    "PLACEMENTS",
    "READING",
    "RenamedWorkload",
    "RunOutcome",
    "SmalopsSetup",
    "Spread",
    "claim_fig9_drop",
    "claim_fig9_flat",
    "claim_gate",
    "claim_p99_change",
    "run_policy",
    "spread",
]

SEED = "smalops"
HASHING = "kafka"
"""The "hashing" baseline: Kafka's default partitioner, ``toPositive(murmur2(key)) % N``
(SMALOPS runs "on top of Apache Kafka v3.3.1" and compares with "native Kafka")."""
READING = "cumulative"
"""How a share threshold ``t`` makes keys heavy (:data:`skewlab.rebalance.smalops.READINGS`):
the heaviest keys that together carry ``t`` of the messages ("classify flows that account for
10% or more of the messages received as heavy"; "keeping this threshold as low as possible
allows us to keep the number of keys being tracked lower"). ``share`` is the per-key option."""
PLACEMENTS: tuple[str, ...] = ("", "a/", "b/", "c/", "d/")
"""Key-name prefixes: ``""`` is the workload's own names (``k0`` ..), the others rename every
key, so Kafka's partitioner puts other keys together (the spread over placements)."""
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


def _hottest_share(keys: int, partitions: int, prefix: str = "") -> float:
    """Largest share of one partition under :data:`HASHING` of ``<prefix>k<rank>``, Zipf(1.1)."""
    p = zipf_weights(keys, 1.1, 2.72)
    p /= p.sum()
    home = partitioner(HASHING)
    where = [home(f"{prefix}k{i}", partitions) for i in range(keys)]
    return float(np.bincount(where, weights=p, minlength=partitions).max())


@dataclass(frozen=True)
class RenamedWorkload:
    """``base``'s stream with every key renamed ``prefix + key`` (same events, other names).

    Which keys a hash partitioner puts together depends on their names only; renaming
    draws another placement of the same stream.
    """

    name: ClassVar[str] = "renamed"
    base: Workload
    prefix: str

    @property
    def seed(self) -> int:
        """The base workload's seed."""
        return self.base.seed

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """The base's chunks, their key ids mapped onto a vocabulary of renamed keys."""
        vocab = KeyVocab()
        for ch in self.base.events(n, chunk, rate):
            names = ch.vocab.keys
            if len(vocab) < len(names):
                vocab.encode([self.prefix + k for k in names[len(vocab) :]])
            yield EventChunk(ch.seq0, KeyBatch(ch.keys.ids, vocab), ch.ts, ch.sizes)

    def spec(self) -> str:
        """The base's spec with the prefix."""
        return f"{self.base.spec()} renamed {self.prefix!r}"


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
    def of(
        cls, scale: float, keys: int = S_KEYS, partitions: int = S_PARTITIONS, prefix: str = ""
    ) -> SmalopsSetup:
        """The setup at ``scale`` (1 = the paper's 5 min): the rate keeps the hottest hashed
        partition :data:`S_UTIL` busy at 50 us, decisions every 10 s (shorter on tiny runs).
        ``prefix`` names the keys (:data:`PLACEMENTS`), which sets the hottest partition."""
        share = _hottest_share(keys, partitions, prefix)
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
                f"{self.partitions} partitions, Kafka's default partitioner (murmur2 of the key, "
                "toPositive % N: 'native Kafka'), one FIFO consumer "
                f"each; Zipf s=1.1 v=2.72 over {self.keys} keys (top keys {top}): keys at or above "
                + ", ".join(f"{t:.0%}: {int((p >= t).sum())}" for t in (0.1, 0.05, 0.02))
                + "; the lossy counter can track them all",
                f"Poisson arrivals at {self.rate:,.0f} ev/s for {self.run_s:g} s "
                f"({self.events:,} events): the hottest hashed partition gets "
                f"{100 * self.hottest_share:.1f} % of the events, "
                f"{100 * S_UTIL:.0f} % busy at 50 us, {40 * S_UTIL:.0f} % at 20 us; "
                f"service {service_us} us/message",
                f"SMALOPS decides every {self.interval_s:g} s with the Eq. 4 gate off (the paper's "
                "10 s interval instead of Eq. 4); heavy = the heaviest keys that together carry "
                "the threshold's share of the window's messages; lossy counting (epsilon 0.001) "
                "fed per routed batch (<= 0.1 s); a key turning heavy is placed at once (two "
                "choices) once the window holds 1,000 events",
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
    reading: str = READING,
) -> RunOutcome:
    """One run: Kafka's partitioner alone (``threshold=None``) or with SMALOPS at ``threshold``.

    ``gate=True`` turns SMALOPS' Eq. 4 on with ``t_SM`` from :data:`S_STATE`
    (``latency_s + tuples * tuple_bytes / bytes_per_s`` of the key's window); ``reading``
    says which keys the threshold makes heavy (:data:`READING`).
    """
    W = setup.partitions
    rb: Any
    if threshold is None:
        rb = make_rebalancer("none", W).build()
    else:
        cfg = make_rebalancer(
            "smalops",
            W,
            threshold=threshold,
            t_msg=service_s,
            gate=gate,
            t_sm=S_STATE.latency_s,
            t_sm_per_tuple=S_STATE.per_tuple_s(DEFAULT_TUPLE_BYTES),
            seed=seed,
        )
        rb = cfg.build(partitioner=HASHING, reading=reading)  # type: ignore[call-arg]
    hook = RebalanceHook(rb, interval_s=setup.interval_s, handoff=S_STATE)
    sim = SimConfig(
        service=ConstantService(service_s),
        window_s=setup.interval_s,
        seed=seed,
        arrivals="poisson",
    )
    grouping = cast(GroupingConfig, PartitionerConfig(W, HASHING))
    result = simulate(grouping, workload, setup.events, setup.rate, config=sim, hooks=[hook])
    return RunOutcome(result, hook)


@dataclass(frozen=True)
class Spread:
    """One result over the placements: its value on the workload's own names, median, range."""

    own: float
    median: float
    low: float
    high: float
    n: int

    def text(self, fmt: str = "+.0f", unit: str = " %") -> str:
        """``own (median m, range lo..hi over n placements)``."""
        return (
            f"{self.own:{fmt}}{unit} (median {self.median:{fmt}}, range {self.low:{fmt}}.."
            f"{self.high:{fmt}} over {self.n} placements)"
        )


def spread(
    measure: Callable[[str], Mapping[str, float]], prefixes: Sequence[str] = PLACEMENTS
) -> dict[str, Spread]:
    """``measure(prefix)`` for every placement, each result's :class:`Spread` by name."""
    got = [measure(p) for p in prefixes]
    out = {}
    for name in got[0]:
        vals = np.array([g[name] for g in got], dtype=np.float64)
        out[name] = Spread(
            float(vals[0]),
            float(np.median(vals)),
            float(vals.min()),
            float(vals.max()),
            len(vals),
        )
    return out


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


def _reading(reading: str) -> str:
    return "heaviest keys carrying t" if reading == "cumulative" else "per-key share t"


def claim_fig9_drop(
    p99_by_threshold: dict[float, float], why: str = "", reading: str = READING
) -> Claim:
    """Fig. 9: p99 drops sharply at the 10 % threshold (vs the threshold just below it)."""
    below = max(t for t in p99_by_threshold if t < PAPER_THRESHOLD)
    change = pct(p99_by_threshold[PAPER_THRESHOLD], p99_by_threshold[below])
    return Claim(
        seed=SEED,
        claim=f"p99 drops at the 10 % threshold (change from {below:.0%} to 10 %; "
        f"{_reading(reading)})",
        paper="drops sharply",
        value=change,
        rule=at_most(SHARP_DROP_PCT, " %"),
        ours=f"{change:+.0f} %",
        figure="Fig. 9",
        why=why,
    )


def claim_fig9_flat(
    p99_by_threshold: dict[float, float], why: str = "", reading: str = READING
) -> Claim:
    """Fig. 9: raising the threshold above 10 % has no significant impact."""
    base = p99_by_threshold[PAPER_THRESHOLD]
    above = {t: pct(v, base) for t, v in p99_by_threshold.items() if t > PAPER_THRESHOLD}
    worst = max(above.values(), key=abs)
    return Claim(
        seed=SEED,
        claim=f"p99 above the 10 % threshold vs at 10 % (largest change; {_reading(reading)})",
        paper="no significant impact",
        value=abs(worst),
        rule=at_most(FLAT_BAND_PCT, " % (abs)"),
        ours=", ".join(f"{t:.0%}: {c:+.0f} %" for t, c in sorted(above.items())),
        figure="Fig. 9",
        why=why,
    )


def claim_keys_tracked(
    heavy_by_threshold: Mapping[float, float], why: str = "", reading: str = READING
) -> Claim:
    """Fig. 9 / Sec. II: a lower threshold keeps fewer keys tracked (the heavy map's size)."""

    def check(v: Mapping[float, float]) -> bool:
        seq = [v[t] for t in sorted(v)]
        return all(b >= a - 1e-9 for a, b in itertools.pairwise(seq)) and seq[0] < seq[-1]

    return Claim(
        seed=SEED,
        claim=f"keys tracked per window rise with the threshold ({_reading(reading)})",
        paper="keeping this threshold as low as possible keeps the keys tracked lower",
        value=dict(heavy_by_threshold),
        rule=Rule("non-decreasing in the threshold, and rising", check),
        ours=", ".join(f"{t:.1%}: {n:.1f}" for t, n in sorted(heavy_by_threshold.items())),
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
