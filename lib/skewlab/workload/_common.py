"""Shared machinery of the synthetic workloads: seeded blocks, key interning, spec params.

Chunk-size independence (the contract in :mod:`skewlab.workload.base`) comes from
drawing randomness per fixed *block* of :data:`BLOCK` events: the uniforms of
block ``b`` come from a generator seeded by ``(seed, salt, b)`` only, so event
``i`` gets the same uniform however the stream is cut into chunks. A workload
maps (sequence number, event time, uniform) to a key index; an
:class:`Interner` turns key indices into ids of one :class:`KeyVocab` per
stream, in first-occurrence order, so even the ids do not depend on chunking.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from skewlab.errors import ConfigError
from skewlab.keys import KeyBatch, KeyVocab
from skewlab.workload.base import EventChunk

BLOCK = 65_536
"""Events per seeded block; part of a stream's identity (changing it changes streams)."""

DEFAULT_SIZE = 100
"""Default event payload size in bytes (the 100-byte values of ENVIRONMENT.md's benchmarks)."""

Sampler = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
"""``(seq, ts, u) -> key indices (int64 >= 0)`` for consecutive events."""


def check_seed(seed: object) -> None:
    """Raise :class:`ConfigError` unless ``seed`` is an int >= 0 (a bool is not)."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be an integer >= 0, got {seed!r}")


def check_size(size: object) -> None:
    """Raise :class:`ConfigError` unless ``size`` (bytes per event) is an int >= 0."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ConfigError(f"size (bytes per event) must be an integer >= 0, got {size!r}")


def check_seconds(workload: str, name: str, value: object) -> None:
    """Validate a duration parameter: a finite number of seconds > 0."""
    if (
        not isinstance(value, int | float)
        or isinstance(value, bool)
        or not value > 0
        or not math.isfinite(value)
    ):
        raise ConfigError(f"{workload}: {name} must be a number of seconds > 0, got {value!r}")


def check_stream_args(n: object, chunk: object, rate: object) -> None:
    """Validate the arguments of ``Workload.events``."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ConfigError(f"n (events) must be an integer >= 0, got {n!r}")
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 1:
        raise ConfigError(f"chunk must be an integer >= 1, got {chunk!r}")
    if not isinstance(rate, int | float) or isinstance(rate, bool) or not rate > 0:
        raise ConfigError(f"rate (events/s) must be a number > 0, got {rate!r}")
    if not math.isfinite(rate):
        raise ConfigError(f"rate (events/s) must be finite, got {rate!r}")


class BlockUniforms:
    """Uniforms in [0, 1) for event ``i`` drawn from block ``i // BLOCK``'s own generator.

    The generator of block ``b`` is ``default_rng(SeedSequence([seed, salt, b]))``;
    the last block drawn is cached, so sequential reads draw each block once.
    """

    def __init__(self, seed: int, salt: int) -> None:
        self._seed = seed
        self._salt = salt
        self._block = -1
        self._values = np.empty(0)

    def _load(self, block: int) -> np.ndarray:
        if block != self._block:
            rng = np.random.default_rng(np.random.SeedSequence([self._seed, self._salt, block]))
            self._values = rng.random(BLOCK)
            self._block = block
        return self._values

    def take(self, start: int, stop: int) -> np.ndarray:
        """Uniforms of events ``start .. stop-1``."""
        parts = []
        pos = start
        while pos < stop:
            block, offset = divmod(pos, BLOCK)
            end = min(stop, (block + 1) * BLOCK)
            parts.append(self._load(block)[offset : offset + (end - pos)])
            pos = end
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0)


class Interner:
    """Maps non-negative key indices to ids of one :class:`KeyVocab`, naming keys lazily.

    Only keys that occur are added to the vocabulary, in order of first
    occurrence in the stream (ties within a chunk broken by position), so ids
    are the same for every chunk size. The index table grows by doubling up to
    the largest index seen.
    """

    def __init__(self, name_of: Callable[[int], str], vocab: KeyVocab | None = None) -> None:
        self.vocab = vocab if vocab is not None else KeyVocab()
        self._name_of = name_of
        self._table = np.full(1024, -1, dtype=np.int64)

    def ids(self, idx: np.ndarray) -> np.ndarray:
        """Vocabulary ids (int64) of the key indices ``idx``, adding unseen keys to ``vocab``.

        New keys are named by ``name_of(index)`` and added in order of first occurrence.
        """
        if len(idx) == 0:
            return np.empty(0, dtype=np.int64)
        top = int(idx.max())
        if top >= len(self._table):
            size = len(self._table)
            while size <= top:
                size *= 2
            grown = np.full(size, -1, dtype=np.int64)
            grown[: len(self._table)] = self._table
            self._table = grown
        ids = self._table[idx]
        missing = ids < 0
        if missing.any():
            fresh, first = np.unique(idx[missing], return_index=True)
            add, name_of, table = self.vocab.add, self._name_of, self._table
            for i in fresh[np.argsort(first, kind="stable")].tolist():
                table[i] = add(name_of(i))
            ids = table[idx]
        return ids


class Synthetic(Protocol):
    """What :func:`synthetic_events` reads from a synthetic workload config."""

    @property
    def seed(self) -> int:
        """The seed of the block uniforms (with the workload's salt)."""
        ...

    @property
    def size(self) -> int:
        """Bytes per event."""
        ...


def synthetic_events(
    workload: Synthetic,
    n: int,
    chunk: int,
    rate: float,
    *,
    salt: int,
    sampler: Sampler,
    name_of: Callable[[int], str],
) -> Iterator[EventChunk]:
    """Drive a sampler over ``n`` events in chunks (the body of every synthetic ``events``).

    Event ``i`` has time ``ts = i / rate``, key index ``sampler(i, ts, u_i)``
    with ``u_i`` from :class:`BlockUniforms` seeded by ``(workload.seed, salt)``,
    and ``workload.size`` bytes; at most one chunk (plus one cached block of
    uniforms) is held at a time.
    """
    check_stream_args(n, chunk, rate)
    size = workload.size
    uniforms = BlockUniforms(workload.seed, salt)
    interner = Interner(name_of)
    pos = 0
    while pos < n:
        stop = min(n, pos + chunk)
        seq = np.arange(pos, stop, dtype=np.int64)
        ts = seq / float(rate)
        idx = sampler(seq, ts, uniforms.take(pos, stop))
        ids = interner.ids(idx)
        sizes = np.full(stop - pos, size, dtype=np.int64)
        yield EventChunk(pos, KeyBatch(ids, interner.vocab), ts, sizes)
        pos = stop


def inverse_cdf(weights: np.ndarray) -> np.ndarray:
    """Normalized cumulative distribution of nonnegative ``weights`` (last entry exactly 1)."""
    cdf = np.cumsum(weights, dtype=np.float64)
    cdf /= cdf[-1]
    cdf[-1] = 1.0
    return cdf


def sample_cdf(cdf: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Index ``k`` with ``cdf[k-1] <= u < cdf[k]`` for each uniform (inverse-CDF sampling)."""
    idx = np.searchsorted(cdf, u, side="right").astype(np.int64)
    np.minimum(idx, len(cdf) - 1, out=idx)
    return idx


def zipf_weights(keys: int, s: float, v: float) -> np.ndarray:
    """SMALOPS' Zipf: ``P(k) ~ (v + k)^-s`` for ``k = 0 .. keys-1`` (unnormalized)."""
    return np.power(np.arange(keys, dtype=np.float64) + v, -s)


def zipf_cdf(keys: int, s: float, v: float) -> np.ndarray:
    """:func:`inverse_cdf` of :func:`zipf_weights` (the table Zipf sampling searches)."""
    return inverse_cdf(zipf_weights(keys, float(s), float(v)))


# ---------------------------------------------------------------- spec params


def with_size(spec: str, size: int) -> str:
    """``spec`` with ``,size=<size>`` appended unless ``size`` is :data:`DEFAULT_SIZE`."""
    return spec if size == DEFAULT_SIZE else f"{spec},size={size}"


def fmt(value: object) -> str:
    """A parameter value as it appears in a spec string (round-trips through :func:`convert`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def convert(workload: str, name: str, raw: str, kind: type) -> Any:
    """Parse one spec parameter value to ``kind`` (int, float, bool or str)."""
    text = raw.strip()
    try:
        if kind is bool:
            low = text.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if kind is int:
            return int(text)
        if kind is float:
            return float(text)
    except ValueError:
        raise ConfigError(
            f"{workload}: parameter {name} must be {kind.__name__}, got {raw!r}"
        ) from None
    return text


def parse_params(
    workload: str, args: list[str], types: Mapping[str, type]
) -> tuple[list[str], dict[str, Any]]:
    """Split spec args into positional tokens and typed ``name=value`` params.

    Unknown names raise :class:`ConfigError` listing the allowed ones.
    """
    positional: list[str] = []
    params: dict[str, Any] = {}
    for arg in args:
        if "=" not in arg:
            if arg.strip():
                positional.append(arg.strip())
            continue
        name, _, raw = arg.partition("=")
        name = name.strip().lower()
        if name not in types:
            raise ConfigError(
                f"{workload}: unknown parameter {name!r}; allowed: {', '.join(types)}"
            )
        if name in params:
            raise ConfigError(f"{workload}: parameter {name!r} given twice")
        params[name] = convert(workload, name, raw, types[name])
    return positional, params


def no_positional(workload: str, positional: list[str], types: Mapping[str, type]) -> None:
    """Raise :class:`ConfigError` naming the allowed params if any positional token was given."""
    if positional:
        raise ConfigError(
            f"{workload}: unexpected {positional[0]!r}; use name=value with names "
            f"{', '.join(types)}"
        )


def keyword_params(workload: str, args: list[str], types: Mapping[str, type]) -> dict[str, Any]:
    """The typed ``name=value`` params of spec args that take no positional token."""
    positional, params = parse_params(workload, args, types)
    no_positional(workload, positional, types)
    return params
