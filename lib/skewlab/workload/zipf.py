"""SMALOPS' Zipf workload: ``P(k) ~ (v + k)^-s`` over ``keys`` ranks.

SMALOPS (section III.A) draws every request's key from a Zipf distribution
defined as ``k in [0, num_keys]: P(k) ~ (v + k)^-s`` with ``s = 1.1`` and
``v = 2.72``. The seed does not give ``num_keys`` for its figures; skewlab's
default is 10,000 keys (the top key then carries about 6.3% of the events,
the top 10 about 27%, the top 100 about 56%).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError
from skewlab.workload._common import (
    DEFAULT_SIZE,
    check_seed,
    check_size,
    fmt,
    keyword_params,
    sample_cdf,
    synthetic_events,
    with_size,
    zipf_cdf,
    zipf_weights,
)
from skewlab.workload.base import EventChunk


def rank_key(rank: int) -> str:
    """Key name of a Zipf rank (``k0`` is the most frequent)."""
    return f"k{rank}"


def check_zipf(s: object, v: object, keys: object) -> None:
    """Shared validation of Zipf parameters (exponent, offset, number of keys)."""
    if not isinstance(s, int | float) or isinstance(s, bool) or not 0 < s < 100:
        raise ConfigError(f"zipf exponent s must be a number in (0, 100), got {s!r}")
    if not isinstance(v, int | float) or isinstance(v, bool) or not 0 < v < 1e12:
        raise ConfigError(f"zipf offset v must be a number > 0, got {v!r}")
    if not isinstance(keys, int) or isinstance(keys, bool) or not 1 <= keys <= 100_000_000:
        raise ConfigError(f"keys must be an integer in [1, 100000000], got {keys!r}")


@dataclass(frozen=True, kw_only=True)
class ZipfWorkload:
    """Keys ``k<rank>`` with ``P(rank) ~ (v + rank)^-s``, ``rank = 0 .. keys-1`` (SMALOPS III.A).

    Sampling is inverse-CDF: the normalized cumulative weights are computed
    once per ``events`` call (``8 * keys`` bytes) and each event's uniform is
    located with ``searchsorted``. ``s`` may be below 1 (the key set is finite);
    SMALOPS uses ``s = 1.1, v = 2.72``. Every event is ``size`` bytes.
    """

    name: ClassVar[str] = "zipf"
    seed: int = 0
    s: float = 1.1
    v: float = 2.72
    keys: int = 10_000
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_zipf(self.s, self.v, self.keys)
        check_size(self.size)

    def probabilities(self) -> np.ndarray:
        """Exact probability of each rank (for tests and reports)."""
        w = zipf_weights(self.keys, float(self.s), float(self.v))
        return w / w.sum()

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events, ``ts = seq / rate``, keys drawn i.i.d. from the Zipf law."""
        cdf = zipf_cdf(self.keys, self.s, self.v)

        def sampler(seq: np.ndarray, ts: np.ndarray, u: np.ndarray) -> np.ndarray:
            return sample_cdf(cdf, u)

        return synthetic_events(self, n, chunk, rate, salt=1, sampler=sampler, name_of=rank_key)

    def spec(self) -> str:
        """``zipf:s=..,v=..,keys=..[,size=..]``; :meth:`from_args` parses it back."""
        out = f"zipf:s={fmt(float(self.s))},v={fmt(float(self.v))},keys={self.keys}"
        return with_size(out, self.size)

    PARAMS: ClassVar[dict[str, type]] = {"s": float, "v": float, "keys": int, "size": int}

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> ZipfWorkload:
        """Build from spec args ``s=..,v=..,keys=..,size=..`` (all optional)."""
        params = keyword_params(cls.name, args, cls.PARAMS)
        return cls(seed=seed, **params)
