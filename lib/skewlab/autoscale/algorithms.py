"""The registry of assignment algorithms (:data:`ALGORITHMS`) and the autoscaler that runs one.

:func:`make_algorithm` resolves ``"mwf"``, ``"kafka:15"``...; :class:`AutoscalerConfig` builds
an :class:`Autoscaler` stepping through measurements; :func:`run_stream` replays a stream.
The ``order`` option and the online heuristics' shuffle: docs/autoscale.md.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from skewlab.autoscale.base import Assignment, BinPacker, Capacity, check_speeds
from skewlab.autoscale.binpack import AnyFit
from skewlab.autoscale.kafka_assignor import KafkaAssignor
from skewlab.autoscale.metrics import moved_partitions, rscore
from skewlab.autoscale.modified import ModifiedAnyFit
from skewlab.errors import ConfigError, StateError
from skewlab.registry import normalize, resolve

__all__ = [
    "ALGORITHMS",
    "ALGORITHM_NAMES",
    "ORDERS",
    "Autoscaler",
    "AutoscalerConfig",
    "AutoscalerSnapshot",
    "Order",
    "Reassignment",
    "StreamRun",
    "make_algorithm",
    "run_stream",
]

ALGORITHMS: dict[str, BinPacker] = {
    "nf": AnyFit("next"),
    "nfd": AnyFit("next", decreasing=True),
    "ff": AnyFit("first"),
    "ffd": AnyFit("first", decreasing=True),
    "bf": AnyFit("best"),
    "bfd": AnyFit("best", decreasing=True),
    "wf": AnyFit("worst"),
    "wfd": AnyFit("worst", decreasing=True),
    "mwf": ModifiedAnyFit("worst", "cumulative"),
    "mbf": ModifiedAnyFit("best", "cumulative"),
    "mwfp": ModifiedAnyFit("worst", "max-partition"),
    "mbfp": ModifiedAnyFit("best", "max-partition"),
    "kafka": KafkaAssignor("range"),
    "kafka-rr": KafkaAssignor("round-robin"),
}
"""Algorithms by name; Kafka's entries take the group size after a colon (``kafka:15``)."""

ALGORITHM_NAMES: tuple[str, ...] = (
    "nf", "nfd", "ff", "ffd", "bf", "bfd", "wf", "wfd", "mwf", "mbf", "mwfp", "mbfp",
)  # fmt: skip
"""The twelve bin-packing algorithms the seed compares, in its order."""


Order = Literal["random", "index"]
ORDERS: tuple[Order, ...] = ("random", "index")
"""How the online any-fit heuristics take the partitions each iteration."""


def _check_order(order: str) -> None:
    if order not in ORDERS:
        raise ConfigError(f"order must be one of {', '.join(ORDERS)}, got {order!r}")


def make_algorithm(spec: str | BinPacker) -> BinPacker:
    """Resolve ``"mwf"``, ``"kafka:15"``...; an unknown name lists the valid ones."""
    if not isinstance(spec, str):
        return spec
    name, sep, arg = spec.partition(":")
    algo = resolve(ALGORITHMS, name, "autoscale algorithm")
    if isinstance(algo, KafkaAssignor):
        if not sep:
            raise ConfigError(f"{normalize(name)} needs a group size, e.g. '{normalize(name)}:15'")
        try:
            n = int(arg)
        except ValueError:
            raise ConfigError(f"group size in {spec!r} must be an int >= 1") from None
        return dataclasses.replace(algo, consumers=n)
    if sep:
        raise ConfigError(f"{normalize(name)} takes no parameter, got {spec!r}")
    return algo


@dataclass(frozen=True)
class Reassignment:
    """One iteration's decision: ``X(t_k)`` and what changed from ``X(t_{k-1})``."""

    iteration: int
    previous: Assignment | None
    assignment: Assignment
    moved: tuple[int, ...]
    rscore: float
    consumers: int
    overloaded: tuple[int, ...]
    """Consumers whose load exceeds ``C`` (only a partition larger than ``C``, or Kafka)."""


@dataclass(frozen=True)
class AutoscalerSnapshot:
    """Immutable, picklable state of an :class:`Autoscaler`."""

    iteration: int
    assignment: Assignment | None
    rng_state: dict[str, Any] | None = None
    """The order generator's ``bit_generator.state`` (``order="random"``), else None."""


@dataclass(frozen=True)
class AutoscalerConfig:
    """Which algorithm and capacities; ``build()`` returns the working :class:`Autoscaler`.

    ``consumer_capacity`` is ``C_bar`` (bytes/s a consumer reads at most);
    ``capacity`` the bin capacity ``C``, by default ``5/6 C_bar``. ``order``
    (:data:`ORDERS`) is how NF / FF / BF / WF take the partitions: a fresh
    permutation per iteration from a generator seeded with ``seed``
    (``"random"``, the authors' controller) or index order (``"index"``).
    """

    algorithm: str = "mwf"
    consumer_capacity: float = 1.0
    capacity: float | None = None
    order: Order = "random"
    seed: int = 0

    def __post_init__(self) -> None:
        make_algorithm(self.algorithm)
        _check_order(self.order)
        self.capacities  # noqa: B018 -- validates C and C_bar

    @property
    def capacities(self) -> Capacity:
        """``C_bar`` and ``C`` (default ``5/6 C_bar``, Sec. VI-C) as a :class:`Capacity`."""
        return Capacity(consumer=self.consumer_capacity, bin=self.capacity)

    def build(self, state: AutoscalerSnapshot | None = None) -> Autoscaler:
        """The autoscaler at iteration 0, or continuing from ``state`` (StateError otherwise)."""
        if state is not None and not isinstance(state, AutoscalerSnapshot):
            raise StateError(f"expected an AutoscalerSnapshot, got {type(state).__name__}")
        return Autoscaler(self, state)


class Autoscaler:
    """Runs one algorithm iteration after iteration, remembering ``X(t_{k-1})``."""

    def __init__(self, config: AutoscalerConfig, state: AutoscalerSnapshot | None = None) -> None:
        self.config = config
        self.algorithm = make_algorithm(config.algorithm)
        self.capacity = config.capacities.c
        self.iteration = state.iteration if state else 0
        self.assignment: Assignment | None = state.assignment if state else None
        self.rng: np.random.Generator | None = None
        if config.order == "random":
            self.rng = np.random.default_rng(config.seed)
            if state is not None and state.rng_state is not None:
                self.rng.bit_generator.state = state.rng_state

    def step(self, speeds: ArrayLike) -> Reassignment:
        """Iteration ``k + 1``: the next assignment ``X(t_{k+1})`` for the measured ``speeds``.

        The algorithm packs to ``C`` from the remembered ``X(t_k)`` (resized when partitions
        were added or removed); the :class:`Reassignment` carries the moved partitions
        (Eq. 9), the Rscore (Eq. 11), the consumer count (Eq. 3) and any consumer above ``C``.
        Raises :class:`~skewlab.errors.ConfigError` for speeds that are not finite and >= 0.
        """
        s = check_speeds(speeds)
        prev = self.assignment
        if prev is not None and prev.partitions != len(s):
            prev = _resized(prev, len(s))
        nxt = self.algorithm.assign(s, prev, self.capacity, self.rng)
        self.iteration += 1
        self.assignment = nxt
        loads = nxt.loads(s)
        lim = self.capacity * (1 + 1e-9)
        return Reassignment(
            iteration=self.iteration,
            previous=prev,
            assignment=nxt,
            moved=tuple(moved_partitions(prev, nxt).tolist()),
            rscore=rscore(prev, nxt, s, self.capacity),
            consumers=nxt.consumers,
            overloaded=tuple(c for c, load in loads.items() if load > lim),
        )

    def snapshot(self) -> AutoscalerSnapshot:
        """Iteration, ``X(t_k)`` and the generator state (immutable)."""
        rng_state = dict(self.rng.bit_generator.state) if self.rng is not None else None
        return AutoscalerSnapshot(self.iteration, self.assignment, rng_state)


def _resized(a: Assignment, partitions: int) -> Assignment:
    """Partitions added (unassigned) or removed (dropped) since ``a``."""
    owner = a.owner[:partitions] + (-1,) * max(0, partitions - a.partitions)
    return Assignment(owner)


@dataclass(frozen=True)
class StreamRun:
    """One algorithm over one stream: per iteration consumers, Rscore and assignment."""

    algorithm: str
    consumers: np.ndarray
    rscores: np.ndarray
    assignments: tuple[Assignment, ...]


def run_stream(
    algorithm: str | BinPacker,
    stream: ArrayLike,
    capacity: float,
    initial: Assignment | None = None,
    *,
    order: Order = "random",
    seed: int = 0,
) -> StreamRun:
    """Replay ``stream`` (``(N, P)`` speeds) through ``algorithm`` with bin capacity ``C``.

    ``order`` / ``seed`` as in :class:`AutoscalerConfig`: the same seed gives
    the same run.
    """
    _check_order(order)
    algo = make_algorithm(algorithm)
    rng = np.random.default_rng(seed) if order == "random" else None
    speeds = np.asarray(stream, dtype=np.float64)
    if speeds.ndim != 2:
        raise ConfigError(f"stream must be (measurements, partitions), got shape {speeds.shape}")
    prev = initial
    bins = np.zeros(len(speeds), dtype=np.int64)
    scores = np.zeros(len(speeds))
    out: list[Assignment] = []
    for k, s in enumerate(speeds):
        nxt = algo.assign(s, prev, capacity, rng)
        bins[k] = nxt.consumers
        scores[k] = rscore(prev, nxt, s, capacity)
        out.append(nxt)
        prev = nxt
    return StreamRun(algo.name, bins, scores, tuple(out))
