"""DKG's country-skew workloads: ``COUNTRY_SKEW_R0..R100`` and ``COUNTRY_HALF_SKEW_R80``.

The DKG seed names these datasets (``R0`` = uniform, ``R100`` = fully skewed
to one key). What its reference producer does (facts read from
github.com/odalabasmaz/DynamicKeyGrouping, not code): each event is the hot
country (``"Turkey"``) with probability ``R%`` and otherwise a country drawn
uniformly from the whole list (the hot one included); it writes 10,000,000
events per dataset. The half-skew dataset writes its first 5,000,000 events at
ratio 80 and the last 5,000,000 at ratio 0, i.e. skewed for the first half of
the stream and uniform for the second half. skewlab does the same, with its
own list of country names (:data:`COUNTRIES`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from skewlab.errors import ConfigError
from skewlab.workload._common import (
    DEFAULT_SIZE,
    check_seed,
    check_size,
    parse_params,
    synthetic_events,
    with_size,
)
from skewlab.workload.base import EventChunk

COUNTRIES: tuple[str, ...] = (
    "Afghanistan", "Albania", "Algeria", "Andorra", "Angola", "Antigua and Barbuda",
    "Argentina", "Armenia", "Australia", "Austria", "Azerbaijan", "Bahamas", "Bahrain",
    "Bangladesh", "Barbados", "Belarus", "Belgium", "Belize", "Benin", "Bhutan", "Bolivia",
    "Bosnia and Herzegovina", "Botswana", "Brazil", "Brunei", "Bulgaria", "Burkina Faso",
    "Burundi", "Cambodia", "Cameroon", "Canada", "Cape Verde", "Central African Republic",
    "Chad", "Chile", "China", "Colombia", "Comoros", "Costa Rica", "Croatia", "Cuba",
    "Cyprus", "Czech Republic", "Democratic Republic of the Congo", "Denmark", "Djibouti",
    "Dominica", "Dominican Republic", "East Timor", "Ecuador", "Egypt", "El Salvador",
    "Equatorial Guinea", "Eritrea", "Estonia", "Eswatini", "Ethiopia", "Fiji", "Finland",
    "France", "Gabon", "Gambia", "Georgia", "Germany", "Ghana", "Greece", "Grenada",
    "Guatemala", "Guinea", "Guinea-Bissau", "Guyana", "Haiti", "Honduras", "Hungary",
    "Iceland", "India", "Indonesia", "Iran", "Iraq", "Ireland", "Israel", "Italy",
    "Ivory Coast", "Jamaica", "Japan", "Jordan", "Kazakhstan", "Kenya", "Kiribati", "Kosovo",
    "Kuwait", "Kyrgyzstan", "Laos", "Latvia", "Lebanon", "Lesotho", "Liberia", "Libya",
    "Liechtenstein", "Lithuania", "Luxembourg", "Madagascar", "Malawi", "Malaysia",
    "Maldives", "Mali", "Malta", "Marshall Islands", "Mauritania", "Mauritius", "Mexico",
    "Micronesia", "Moldova", "Monaco", "Mongolia", "Montenegro", "Morocco", "Mozambique",
    "Myanmar", "Namibia", "Nauru", "Nepal", "Netherlands", "New Zealand", "Nicaragua",
    "Niger", "Nigeria", "North Korea", "North Macedonia", "Norway", "Oman", "Pakistan",
    "Palau", "Palestine", "Panama", "Papua New Guinea", "Paraguay", "Peru", "Philippines",
    "Poland", "Portugal", "Qatar", "Republic of the Congo", "Romania", "Russia", "Rwanda",
    "Saint Kitts and Nevis", "Saint Lucia", "Saint Vincent and the Grenadines", "Samoa",
    "San Marino", "Sao Tome and Principe", "Saudi Arabia", "Senegal", "Serbia", "Seychelles",
    "Sierra Leone", "Singapore", "Slovakia", "Slovenia", "Solomon Islands", "Somalia",
    "South Africa", "South Korea", "South Sudan", "Spain", "Sri Lanka", "Sudan", "Suriname",
    "Sweden", "Switzerland", "Syria", "Taiwan", "Tajikistan", "Tanzania", "Thailand", "Togo",
    "Tonga", "Trinidad and Tobago", "Tunisia", "Turkey", "Turkmenistan", "Tuvalu", "Uganda",
    "Ukraine", "United Arab Emirates", "United Kingdom", "United States", "Uruguay",
    "Uzbekistan", "Vanuatu", "Vatican City", "Venezuela", "Vietnam", "Yemen", "Zambia",
    "Zimbabwe",
)  # fmt: skip
"""English country names, sorted; the key universe of the country workloads."""

DEFAULT_HOT = "Turkey"
"""The hot key of DKG's reference producer."""

_INDEX = {c: i for i, c in enumerate(COUNTRIES)}
_RATIO = re.compile(r"^r(\d+)$", re.IGNORECASE)


def _check_ratio(ratio: object) -> None:
    if not isinstance(ratio, int) or isinstance(ratio, bool) or not 0 <= ratio <= 100:
        raise ConfigError(f"country skew ratio R must be an integer percent 0..100, got {ratio!r}")


def _check_hot(hot: object) -> None:
    if hot not in _INDEX:
        raise ConfigError(
            f"hot country {hot!r} is not in skewlab.workload.country.COUNTRIES "
            f"({len(COUNTRIES)} English names such as {DEFAULT_HOT!r})"
        )


def _country_sampler(ratio: int, hot: int, u: np.ndarray) -> np.ndarray:
    """DKG producer step: hot with probability ``ratio%``, else uniform over all countries.

    One uniform decides both: ``u < r`` picks the hot key; otherwise
    ``(u - r) / (1 - r)`` is again uniform on [0, 1) and picks a country.
    """
    r = ratio / 100.0
    if r >= 1.0:
        return np.full(len(u), hot, dtype=np.int64)
    rest = np.floor((u - r) / (1.0 - r) * len(COUNTRIES)).astype(np.int64)
    np.clip(rest, 0, len(COUNTRIES) - 1, out=rest)
    return np.where(u < r, hot, rest)


def _country_params(workload: str, args: list[str], types: dict[str, type]) -> dict[str, Any]:
    """Spec args ``R<percent>`` (or ``r=<percent>``) plus ``name=value`` params, as fields.

    The skew R is required: it is the point of choosing a country workload, so a spec
    without it (``country``, ``country-half:size=50``) is refused in one line rather
    than run at a default the user never chose."""
    positional, params = parse_params(workload, args, types)
    for tok in positional:
        m = _RATIO.match(tok)
        if m is None or "r" in params:
            raise ConfigError(f"{workload}: expected R<percent> such as R80, got {tok!r}")
        params["r"] = int(m.group(1))
    if "r" not in params:
        raise ConfigError(
            f"{workload} needs its skew R (the percent of events on the hot key): "
            f"{workload}:R<percent>, e.g. {workload}:R80 (R0 uniform .. R100 one key)"
        )
    params["ratio"] = params.pop("r")
    return params


@dataclass(frozen=True, kw_only=True)
class CountryWorkload:
    """``COUNTRY_SKEW_R<ratio>``: ``ratio``% of events to ``hot``, the rest uniform (DKG).

    The uniform part covers every name of :data:`COUNTRIES` including the hot
    one, as in DKG's producer, so the hot key's share is
    ``r + (1 - r) / len(COUNTRIES)`` with ``r = ratio / 100``. ``R0`` is uniform,
    ``R100`` a single key. Every event is ``size`` bytes.
    """

    name: ClassVar[str] = "country"
    seed: int = 0
    ratio: int = 80
    hot: str = DEFAULT_HOT
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        check_seed(self.seed)
        _check_ratio(self.ratio)
        _check_hot(self.hot)
        check_size(self.size)

    def hot_share(self) -> float:
        """Expected fraction of events carrying the hot key."""
        r = self.ratio / 100.0
        return r + (1.0 - r) / len(COUNTRIES)

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events at ``rate``/s in chunks of at most ``chunk`` (``Workload``).

        Event ``i`` is the hot country if its uniform is below ``ratio / 100``, else a country
        drawn uniformly from :data:`COUNTRIES` (DKG's producer step); the stream depends on
        ``seed`` only, not on ``chunk``. Raises :class:`ConfigError` on a bad ``n``, ``chunk``
        or ``rate``.
        """
        hot = _INDEX[self.hot]
        ratio = self.ratio

        def sampler(seq: np.ndarray, ts: np.ndarray, u: np.ndarray) -> np.ndarray:
            return _country_sampler(ratio, hot, u)

        return synthetic_events(
            self, n, chunk, rate, salt=2, sampler=sampler, name_of=COUNTRIES.__getitem__
        )

    def _extras(self) -> str:
        out = "" if self.hot == DEFAULT_HOT else f",hot={self.hot}"
        return with_size(out, self.size)

    def spec(self) -> str:
        """``country:R<ratio>[,hot=..][,size=..]``; :meth:`from_args` parses it back."""
        return f"country:R{self.ratio}{self._extras()}"

    PARAMS: ClassVar[dict[str, type]] = {"r": int, "hot": str, "size": int}

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> CountryWorkload:
        """Build from ``R80[,hot=Turkey][,size=100]`` (or ``r=80``)."""
        return cls(seed=seed, **_country_params(cls.name, args, cls.PARAMS))


@dataclass(frozen=True, kw_only=True)
class CountryHalfWorkload:
    """``COUNTRY_HALF_SKEW_R<ratio>``: skewed at ``ratio``% first, then uniform (DKG).

    Events with sequence number below ``at`` follow ``COUNTRY_SKEW_R<ratio>``,
    the rest ``COUNTRY_SKEW_R0``. ``at=None`` (default) switches at half of the
    stream requested from ``events(n)`` (``n // 2``), as DKG's 10M-event
    half-skew file does; give ``at`` explicitly to make streams of different
    lengths share a prefix.
    """

    name: ClassVar[str] = "country-half"
    seed: int = 0
    ratio: int = 80
    hot: str = DEFAULT_HOT
    at: int | None = None
    size: int = DEFAULT_SIZE

    def __post_init__(self) -> None:
        check_seed(self.seed)
        _check_ratio(self.ratio)
        _check_hot(self.hot)
        check_size(self.size)
        if self.at is not None and (
            not isinstance(self.at, int) or isinstance(self.at, bool) or self.at < 0
        ):
            raise ConfigError(
                f"country-half: at (switch event) must be an integer >= 0, got {self.at!r}"
            )

    def events(self, n: int, chunk: int = 65_536, rate: float = 10_000.0) -> Iterator[EventChunk]:
        """Exactly ``n`` events at ``rate``/s in chunks of at most ``chunk`` (``Workload``).

        Events before ``at`` (``n // 2`` if ``at`` is None) are drawn as
        :class:`CountryWorkload` at ``ratio``, the rest uniformly over :data:`COUNTRIES`.
        Raises :class:`ConfigError` on bad ``n``/``chunk``/``rate``.
        """
        hot = _INDEX[self.hot]
        ratio = self.ratio
        at = self.at if self.at is not None else (n // 2 if isinstance(n, int) else 0)

        def sampler(seq: np.ndarray, ts: np.ndarray, u: np.ndarray) -> np.ndarray:
            skewed = _country_sampler(ratio, hot, u)
            return np.where(seq < at, skewed, _country_sampler(0, hot, u))

        return synthetic_events(
            self, n, chunk, rate, salt=3, sampler=sampler, name_of=COUNTRIES.__getitem__
        )

    def spec(self) -> str:
        """``country-half:R<ratio>[,hot=..][,at=..][,size=..]``; :meth:`from_args` parses it."""
        out = f"country-half:R{self.ratio}"
        if self.hot != DEFAULT_HOT:
            out += f",hot={self.hot}"
        if self.at is not None:
            out += f",at={self.at}"
        return with_size(out, self.size)

    PARAMS: ClassVar[dict[str, type]] = {"r": int, "hot": str, "at": int, "size": int}

    @classmethod
    def from_args(cls, args: list[str], seed: int) -> CountryHalfWorkload:
        """Build from ``R80[,hot=..][,at=..][,size=..]``."""
        return cls(seed=seed, **_country_params(cls.name, args, cls.PARAMS))
