"""SMALOPS' dynamic load: the Zipf generator with its keys shifted every minute.

SMALOPS (section III.B) generates "dynamic load" by "shifting the keys through
our zipf based generator every minute", so that a few new streams appear
regularly, a few stop altogether, and the load of the remaining streams
changes. The seed says no more. skewlab reads it as a conveyor: the rank
distribution stays SMALOPS' Zipf, and every ``period`` seconds of event time the
key at each rank is replaced by its neighbour ``shift`` ranks away.

``direction="down"`` (default): ``shift`` brand-new keys enter at the top ranks
(new heavy streams a hot-key detector must catch), every other key moves
``shift`` ranks colder (its rate drops) and the ``shift`` coldest keys leave.
``direction="up"``: new keys enter at the coldest ranks, every key moves
``shift`` ranks hotter and the ``shift`` hottest keys stop abruptly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from skewlab.errors import ConfigError
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
from skewlab.workload.zipf import check_zipf

DIRECTIONS = ("down", "up")


@dataclass(frozen=True, kw_only=True)
class DynamicWorkload:
    """Zipf ranks ``P(r) ~ (v + r)^-s`` whose rank->key map shifts every ``period`` s (SMALOPS).

    Keys are named ``k<c>`` by a creation index ``c``. In shift period
    ``p = floor(ts / period)``, rank ``r`` carries key

    - ``direction="down"``: ``c = p * shift + (keys - 1 - r)`` (period 0: ``k<keys-1>``
      is hottest; each period ``shift`` new keys ``k<keys-1+p*shift ...>`` take the top),
    - ``direction="up"``: ``c = p * shift + r`` (period 0 equals the ``zipf`` workload;
      each period the ``shift`` hottest keys stop and new keys enter at the tail).

    ``shift=0`` makes it the static Zipf workload. Defaults: SMALOPS' ``s=1.1``,
    ``v=2.72``, one shift per minute; ``shift=3`` ("a few" streams) is skewlab's choice.
    """

    name: ClassVar[str] = "dynamic"
    seed: int = 0
    s: float = 1.1
    v: float = 2.72
    keys: int = 10_000
    period: float = 60.0
    shift: int = 3
    direction: str = "down"
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        check_seed(self.seed)
        check_zipf(self.s, self.v, self.keys)
        check_size(self.size)
        check_seconds("dynamic", "period", self.period)
        sh = self.shift
        if not isinstance(sh, int) or isinstance(sh, bool) or not 0 <= sh <= self.keys:
            raise ConfigError(f"dynamic: shift must be an integer in [0, keys], got {sh!r}")
        if self.direction not in DIRECTIONS:
            raise ConfigError(
                f"dynamic: direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}"
            )

    def key_index(self, rank: np.ndarray, ts: np.ndarray) -> np.ndarray:
        """Creation index ``c`` of the key at ``rank`` at event time ``ts`` (see class doc)."""
        p = np.floor_divide(ts, float(self.period)).astype(np.int64)
        if self.direction == "up":
            return p * self.shift + rank
        return p * self.shift + (self.keys - 1 - rank)

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events, ``ts = seq / rate``: a Zipf rank per event, mapped to its key
        by :meth:`key_index` at the event's time. Raises :class:`ConfigError` on bad arguments.
        """
        cdf = zipf_cdf(self.keys, self.s, self.v)

        def sampler(seq: np.ndarray, ts: np.ndarray, u: np.ndarray) -> np.ndarray:
            return self.key_index(sample_cdf(cdf, u), ts)

        return synthetic_events(
            self, n, chunk, rate, salt=5, sampler=sampler, name_of=lambda c: f"k{c}"
        )

    def spec(self) -> str:
        """The full spec (every parameter but a default ``size``); :meth:`from_args` parses it."""
        out = (
            f"dynamic:s={fmt(float(self.s))},v={fmt(float(self.v))},keys={self.keys},"
            f"period={fmt(float(self.period))},shift={self.shift},direction={self.direction}"
        )
        return with_size(out, self.size)

    PARAMS: ClassVar[dict[str, type]] = {
        "s": float,
        "v": float,
        "keys": int,
        "period": float,
        "shift": int,
        "direction": str,
        "size": int,
    }

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> DynamicWorkload:
        """Build from ``s=..,v=..,keys=..,period=..,shift=..,direction=down|up,size=..``."""
        params = keyword_params(cls.name, args, cls.PARAMS)
        if "direction" in params:
            params["direction"] = params["direction"].lower()
        return cls(seed=seed, **params)
