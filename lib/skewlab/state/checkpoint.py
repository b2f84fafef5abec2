"""Checkpoints ``(theta, tau, beta)`` and restoring them onto ``eta`` instances with replay.

Scale-out seed, "Checkpointing and scale out": ``theta`` is the key/value state, ``tau`` the
timestamp of the last tuple reflected in it, ``beta`` the tuples received but not processed.
:func:`restore` is seed Algorithm 3; its four steps and the no-loss / no-double-count
argument are in docs/state.md, "Checkpoints and restore".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from skewlab.errors import ConfigError, StateError
from skewlab.state.operator_state import KeyHash, OperatorState, decompose, default_hash, owner

__all__ = [
    "Checkpoint",
    "KeyedOperator",
    "Reducer",
    "StreamTuple",
    "changed_share",
    "count_sum",
    "replay_input",
    "restore",
]

NO_TAU = -1
"""``tau`` of an operator that has reflected no tuple yet (real taus are >= 0)."""


@dataclass(frozen=True, slots=True)
class StreamTuple:
    """``t = (tau, kappa, upsilon)``: logical timestamp / offset, key, value."""

    tau: int
    key: str
    value: Any = None

    def __post_init__(self) -> None:
        if isinstance(self.tau, bool) or not isinstance(self.tau, int) or self.tau < 0:
            raise ConfigError(f"tuple tau must be an int >= 0, got {self.tau!r}")
        if not isinstance(self.key, str):
            raise ConfigError(f"tuple key must be str, got {type(self.key).__name__}")


Reducer = Callable[[Any, StreamTuple], Any]
"""``f(old value or None, tuple) -> new value`` of one key: the stateful operator."""


def count_sum(value: Any, t: StreamTuple) -> dict[str, float]:
    """The seed's pattern counter (plus a sum): ``{"count": n, "sum": s}`` per key."""
    old = value or {"count": 0, "sum": 0.0}
    return {"count": old["count"] + 1, "sum": old["sum"] + float(t.value or 0.0)}


@dataclass(frozen=True)
class Checkpoint:
    """One saved state of one operator instance: ``(theta, tau, beta)``.

    Invariants: every tuple of ``beta`` has ``tau`` greater than the
    checkpoint's ``tau``, and ``beta`` is in increasing ``tau`` order.
    """

    checkpoint: int
    theta: OperatorState
    tau: int
    beta: tuple[StreamTuple, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.checkpoint < 0:
            raise ConfigError(f"checkpoint id must be >= 0, got {self.checkpoint}")
        if not isinstance(self.theta, OperatorState):
            object.__setattr__(self, "theta", OperatorState(self.theta))
        last = self.tau
        for t in self.beta:
            if t.tau <= last:
                raise StateError(
                    f"checkpoint {self.checkpoint}: buffered tuple tau {t.tau} is not after "
                    f"{last} (beta must follow tau in increasing order)"
                )
            last = t.tau

    @property
    def resume_after(self) -> int:
        """The last ``tau`` this checkpoint accounts for (in ``theta`` or in ``beta``)."""
        return self.beta[-1].tau if self.beta else self.tau


class KeyedOperator:
    """One running instance of a key/value stateful operator (the seed's ``f(I, tau, theta)``).

    Tuples are first *received* into the buffer ``beta`` and then *processed*
    in order; processing a tuple updates its key with the reducer and moves
    ``tau`` to the tuple's. Invariant: received taus strictly increase, so a
    replayed tuple that was already received is refused, not counted twice.
    """

    def __init__(
        self,
        reducer: Reducer = count_sum,
        theta: Mapping[str, Any] | None = None,
        tau: int = NO_TAU,
    ) -> None:
        self.reducer = reducer
        self._theta: dict[str, Any] = dict(theta or {})
        self._tau = tau
        self._last_received = tau
        self._buffer: deque[StreamTuple] = deque()

    @property
    def tau(self) -> int:
        """``tau`` of the last processed tuple (``NO_TAU`` = -1 before the first)."""
        return self._tau

    @property
    def buffered(self) -> int:
        """Number of tuples received into ``beta`` and not processed yet."""
        return len(self._buffer)

    def read(self, key: str) -> Any:
        """The value of ``key`` in ``theta`` (``None`` for a key never processed)."""
        return self._theta.get(key)

    def state(self) -> OperatorState:
        """An immutable copy of ``theta``."""
        return OperatorState(self._theta)

    def receive(self, t: StreamTuple) -> None:
        """Append ``t`` to ``beta``; its ``tau`` must follow every tuple received before."""
        if t.tau <= self._last_received:
            raise StateError(
                f"tuple tau {t.tau} is not after the last received {self._last_received}"
            )
        self._buffer.append(t)
        self._last_received = t.tau

    def process(self, limit: int | None = None) -> list[tuple[str, Any]]:
        """Process up to ``limit`` buffered tuples (all if ``None``); returns the outputs.

        The output of a tuple is ``(key, new value)``: the stream a downstream
        operator sees, and what "outputs agree" compares during a take-over.
        """
        out: list[tuple[str, Any]] = []
        n = len(self._buffer) if limit is None else min(limit, len(self._buffer))
        for _ in range(n):
            t = self._buffer.popleft()
            value = self.reducer(self._theta.get(t.key), t)
            self._theta[t.key] = value
            self._tau = t.tau
            out.append((t.key, value))
        return out

    def checkpoint(self, checkpoint: int) -> Checkpoint:
        """``(theta, tau, beta)`` now, as an immutable :class:`Checkpoint`."""
        return Checkpoint(checkpoint, OperatorState(self._theta), self._tau, tuple(self._buffer))

    @classmethod
    def from_checkpoint(cls, cp: Checkpoint, reducer: Reducer = count_sum) -> KeyedOperator:
        """An instance exactly where ``cp`` left off: ``theta``, ``tau`` and ``beta`` buffered."""
        op = cls(reducer, cp.theta, cp.tau)
        for t in cp.beta:
            op.receive(t)
        return op


def changed_share(previous: Mapping[str, Any], current: Mapping[str, Any]) -> float:
    """The share of keys whose value differs between two states (0..1), e.g. two checkpoints.

    A key counts as changed when it was added, removed or its value differs;
    the share is over the keys of either state (0.0 when both are empty).
    This is what the checkpointing policy's ``change_fraction`` is compared
    with (seed: a checkpoint "after a user-defined event, for example, when the
    state has changed significantly"); feed it to the scale-out policy's
    ``on_state_changed`` (:mod:`skewlab.state.policies`).
    """
    keys = previous.keys() | current.keys()
    if not keys:
        return 0.0
    missing = object()
    changed = sum(1 for k in keys if previous.get(k, missing) != current.get(k, missing))
    return changed / len(keys)


def replay_input(cp: Checkpoint, log: Iterable[StreamTuple]) -> list[StreamTuple]:
    """What a restore must replay: ``beta`` then every ``log`` tuple past ``cp.resume_after``.

    ``log`` is the operator's input in ``tau`` order (an upstream buffer or a
    Kafka topic read from the checkpoint's offset); tuples at or before the
    resume point are already in ``theta`` or ``beta`` and are skipped.
    """
    after = cp.resume_after
    return [*cp.beta, *(t for t in log if t.tau > after)]


def restore(
    cp: Checkpoint,
    eta: int,
    log: Iterable[StreamTuple] = (),
    *,
    reducer: Reducer = count_sum,
    hash: KeyHash = default_hash,
) -> list[KeyedOperator]:
    """Seed Algorithm 3 (steps 1-3, docs/state.md): ``eta`` instances ready to process.

    Each instance holds its hash part of ``theta`` at ``tau`` and has received,
    in order, the tuples of ``beta`` and of ``log`` (past the checkpoint) whose
    keys it owns. Call :meth:`KeyedOperator.process` to run step 4.
    """
    parts = decompose(cp.theta, eta, hash)
    instances = [KeyedOperator(reducer, part, cp.tau) for part in parts]
    for t in replay_input(cp, log):
        instances[owner(t.key, eta, hash)].receive(t)
    return instances
