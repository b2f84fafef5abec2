"""DLB's periodic Zipf-exponent switching ("eps-switch").

DLB (section 5) samples each tweet's key from a Zipf distribution whose
exponent epsilon changes periodically: it starts at ``epsilon = 0.2`` (a rather
balanced stream), after five minutes switches to ``epsilon = 1.5`` (highly
skewed, ~80% RSTD under key grouping) for ten minutes, then repeats from 0.2.
The switch happens by *event time* (``ts = seq / rate``), so the same stream
replayed at another rate switches after a different number of events.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.workload._common import (
    DEFAULT_SIZE,
    check_seconds,
    check_seed,
    check_size,
    fmt,
    keyword_params,
    sample_cdf,
    synthetic_events,
    with_size,
    zipf_cdf,
)
from skewlab.workload.base import EventChunk
from skewlab.workload.zipf import check_zipf, rank_key


@dataclass(frozen=True, kw_only=True)
class EpsSwitchWorkload:
    """Zipf over ``keys`` ranks whose exponent alternates ``low`` / ``high`` by event time (DLB).

    ``P(rank) ~ (v + rank)^-eps`` with ``v = 1`` by default (the classic Zipf
    ``rank'^-eps`` over ranks ``1..keys``); ``eps = low`` for ``low_s`` seconds,
    then ``eps = high`` for ``high_s`` seconds, repeating: with the DLB
    defaults the high phases are 300-900 s, 1200-1800 s, ... Both phases share
    the key names ``k<rank>``, so the hottest key stays ``k0`` and only the
    skew changes. DLB does not give its number of keys; default 10,000.
    """

    name: ClassVar[str] = "eps-switch"
    seed: int = 0
    low: float = 0.2
    high: float = 1.5
    low_s: float = 300.0
    high_s: float = 600.0
    keys: int = 10_000
    v: float = 1.0
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_zipf(self.low, self.v, self.keys)
        check_zipf(self.high, self.v, self.keys)
        check_seconds(self.name, "low_s", self.low_s)
        check_seconds(self.name, "high_s", self.high_s)
        check_size(self.size)

    def exponent_at(self, ts: np.ndarray) -> np.ndarray:
        """The Zipf exponent in force at each event time."""
        high = np.mod(ts, self.low_s + self.high_s) >= self.low_s
        return np.where(high, float(self.high), float(self.low))

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events, ``ts = seq / rate``, each key drawn from the Zipf law with the
        exponent in force at its ``ts`` (:meth:`exponent_at`). Raises :class:`ConfigError` on
        bad arguments.
        """
        low_cdf = zipf_cdf(self.keys, self.low, self.v)
        high_cdf = zipf_cdf(self.keys, self.high, self.v)
        period = float(self.low_s + self.high_s)
        low_s = float(self.low_s)

        def sampler(seq: np.ndarray, ts: np.ndarray, u: np.ndarray) -> np.ndarray:
            high = np.mod(ts, period) >= low_s
            out = sample_cdf(low_cdf, u)
            if high.any():
                out[high] = sample_cdf(high_cdf, u[high])
            return out

        return synthetic_events(self, n, chunk, rate, salt=4, sampler=sampler, name_of=rank_key)

    def spec(self) -> str:
        """The full spec (``v`` and ``size`` only when not default); :meth:`from_args` parses it."""
        out = (
            f"eps-switch:low={fmt(float(self.low))},high={fmt(float(self.high))},"
            f"low_s={fmt(float(self.low_s))},high_s={fmt(float(self.high_s))},keys={self.keys}"
        )
        if self.v != 1.0:
            out += f",v={fmt(float(self.v))}"
        return with_size(out, self.size)

    PARAMS: ClassVar[dict[str, type]] = {
        "low": float,
        "high": float,
        "low_s": float,
        "high_s": float,
        "keys": int,
        "v": float,
        "size": int,
    }

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> EpsSwitchWorkload:
        """Build from ``low=..,high=..,low_s=..,high_s=..,keys=..,v=..,size=..`` (optional)."""
        params = keyword_params(cls.name, args, cls.PARAMS)
        return cls(seed=seed, **params)
