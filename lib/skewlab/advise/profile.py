"""What a reader of the seeds looks at to choose a grouping, measured on the user's stream.

* the key distribution: events, distinct keys, the share of the top 1 / 2 / 5 / 10 keys,
  how many keys carry half the load, and the hottest key against a worker's fair share
  ``1 / W`` (DKG's ``idealLoad``: a key above it overloads its worker under KEY grouping);
* a Zipf fit of the rank-frequency curve (SMALOPS and DLB describe their streams by the
  exponent): the maximum-likelihood exponent ``s`` of ``p(r) ~ r^-s`` over the observed
  ranks, with its goodness as the Kolmogorov-Smirnov distance between the fitted and
  the observed rank CDFs (0: a perfect fit);
* drift of the hot set over time windows (DLB's epsilon switching, SMALOPS' dynamic
  load): the hot keys of each window against the previous window's, as the Jaccard
  overlap, and the share of a window's load its predecessor's hot set still carries.

Details: docs/advise.md, "Characterisation".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from skewlab.advise.base import Stream

__all__ = ["DriftWindow", "StreamProfile", "ZipfFit", "fit_zipf", "hot_set_drift", "profile"]

TOP_K = (1, 2, 5, 10)
"""Top-k shares reported."""

HOT_SET = 10
"""Keys in a window's hot set at most."""

HOT_SHARE = 0.01
"""A key is in a window's hot set only with at least this share of the window's events
(the heaviest key always is): a uniform tail's top ten are noise, not a hot set."""

DRIFT_WINDOWS = 10
"""Windows the drift is measured over (fewer for short streams)."""

_MIN_WINDOW_EVENTS = 200


@dataclass(frozen=True)
class ZipfFit:
    """``p(r) = r^-s / H(N, s)`` over ranks ``1..N`` fitted by maximum likelihood.

    ``ks`` is the largest gap between the fitted and observed rank CDFs (0..1);
    below about 0.05 the curve is Zipf-like, above 0.2 it is not.
    """

    s: float
    keys: int
    ks: float

    @property
    def good(self) -> bool:
        """Whether the fit describes the stream (``ks < 0.1``)."""
        return self.ks < 0.1


@dataclass(frozen=True)
class DriftWindow:
    """One window: its start (s or event index), events, the overlap of its hot set with
    the previous window's (Jaccard, 0..1) and the share of its load that the previous
    window's hot set carries."""

    start: float
    events: int
    jaccard: float
    carried: float


@dataclass(frozen=True)
class StreamProfile:
    """The characterisation of one stream for ``workers`` workers (see the module doc).

    ``top_shares[k]`` is the fraction of events carried by the ``k`` heaviest keys;
    ``keys_half`` the fewest keys carrying half of them; ``hot_keys`` the keys above a
    worker's fair share ``1 / workers``; ``drift`` is ``1 - mean Jaccard`` over the
    windows (0: the hot set never changes); ``offered_load`` is
    ``rate * service_s / workers`` (above 1 every strategy falls behind).
    """

    events: int
    keys: int
    workers: int
    top_keys: tuple[tuple[str, float], ...]
    top_shares: dict[int, float]
    keys_half: int
    hot_keys: int
    zipf: ZipfFit
    windows: tuple[DriftWindow, ...]
    rate: float
    rate_from: str
    service_s: float

    @property
    def max_share(self) -> float:
        """The hottest key's share of the events."""
        return self.top_shares[1]

    @property
    def fair_share(self) -> float:
        """A worker's fair share of the load, ``1 / W``."""
        return 1.0 / self.workers

    @property
    def drift(self) -> float:
        """``1 -`` the mean hot-set Jaccard overlap between consecutive windows."""
        later = [w.jaccard for w in self.windows[1:]]
        return 1.0 - float(np.mean(later)) if later else 0.0

    @property
    def offered_load(self) -> float:
        """Utilisation of the workers at the stream's rate."""
        return self.rate * self.service_s / self.workers

    def to_dict(self) -> dict[str, object]:
        """Plain JSON types."""
        return {
            "events": self.events,
            "keys": self.keys,
            "workers": self.workers,
            "top_keys": [list(t) for t in self.top_keys],
            "top_shares": {str(k): v for k, v in self.top_shares.items()},
            "keys_half": self.keys_half,
            "hot_keys": self.hot_keys,
            "zipf_s": self.zipf.s,
            "zipf_ks": self.zipf.ks,
            "drift": self.drift,
            "windows": [w.__dict__ for w in self.windows],
            "rate": self.rate,
            "rate_from": self.rate_from,
            "service_s": self.service_s,
            "offered_load": self.offered_load,
        }


def fit_zipf(counts: np.ndarray) -> ZipfFit:
    """Fit ``s`` by maximum likelihood to the rank-frequency ``counts`` (any order).

    The log-likelihood ``-s * sum(c_r ln r) - n ln H(N, s)`` is concave in ``s``;
    golden-section search over ``s`` in ``[0, 6]`` finds its maximum.
    """
    c = np.sort(np.asarray(counts, dtype=np.float64)[counts > 0])[::-1]
    n_keys = int(c.size)
    if n_keys <= 1:
        return ZipfFit(s=0.0, keys=n_keys, ks=0.0)
    log_r = np.log(np.arange(1, n_keys + 1, dtype=np.float64))
    total = float(c.sum())
    weighted = float((c * log_r).sum())

    def ll(s: float) -> float:
        return -s * weighted - total * math.log(float(np.exp(-s * log_r).sum()))

    lo, hi = 0.0, 6.0
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = ll(a), ll(b)
    for _ in range(60):
        if fa < fb:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = ll(b)
        else:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = ll(a)
    s = (lo + hi) / 2
    model = np.exp(-s * log_r)
    model_cdf = np.cumsum(model) / model.sum()
    seen_cdf = np.cumsum(c) / total
    return ZipfFit(s=float(s), keys=n_keys, ks=float(np.abs(model_cdf - seen_cdf).max()))


def hot_set_drift(
    ids: np.ndarray,
    times: np.ndarray | None,
    windows: int = DRIFT_WINDOWS,
    hot: int = HOT_SET,
) -> tuple[DriftWindow, ...]:
    """Cut the stream into ``windows`` windows (equal time spans when ``times`` is given,
    else equal event counts; fewer when a window would hold under 200 events) and compare
    each window's hot set (its ``hot`` heaviest keys holding at least :data:`HOT_SHARE` of
    the window's events; the heaviest always) with the previous window's. The first has
    Jaccard 1 and carried 1 (nothing to compare with)."""
    n = ids.size
    k = max(1, min(windows, n // _MIN_WINDOW_EVENTS))
    if times is not None and times.size == n and times[-1] > times[0]:
        edges_t = np.linspace(times[0], times[-1], k + 1)
        cuts = np.searchsorted(times, edges_t[1:-1], side="left")
        starts = [float(t) for t in edges_t[:-1]]
    else:
        cuts = np.linspace(0, n, k + 1).astype(np.int64)[1:-1]
        starts = [float(x) for x in np.linspace(0, n, k + 1)[:-1]]
    bounds = [0, *[int(x) for x in cuts], n]
    out: list[DriftWindow] = []
    prev: set[int] | None = None
    for i in range(k):
        part = ids[bounds[i] : bounds[i + 1]]
        if part.size == 0:
            continue
        uniq, cnt = np.unique(part, return_counts=True)
        order = np.argsort(-cnt, kind="stable")[:hot]
        keep = cnt[order] >= HOT_SHARE * part.size
        keep[0] = True
        top = uniq[order[keep]]
        now = {int(x) for x in top}
        if prev is None:
            jac, carried = 1.0, 1.0
        else:
            jac = len(now & prev) / len(now | prev)
            carried = float(cnt[np.isin(uniq, list(prev))].sum()) / part.size
        out.append(
            DriftWindow(start=starts[i], events=int(part.size), jaccard=jac, carried=carried)
        )
        prev = now
    return tuple(out)


def profile(
    stream: Stream,
    workers: int,
    rate: float,
    rate_from: str,
    service_s: float,
    times: np.ndarray | None = None,
) -> StreamProfile:
    """The :class:`StreamProfile` of ``stream`` for ``workers`` workers at ``rate`` events/s
    (``rate_from`` says where the rate came from: ``timestamps``, ``--rate``, ...)."""
    counts = stream.counts()
    order = np.argsort(-counts, kind="stable")
    total = float(counts.sum())
    shares = counts[order] / total
    cum = np.cumsum(shares)
    names = stream.vocab.keys
    top_keys = tuple((names[int(i)], float(counts[i] / total)) for i in order[: max(TOP_K)])
    return StreamProfile(
        events=len(stream),
        keys=stream.keys,
        workers=workers,
        top_keys=top_keys,
        top_shares={k: float(cum[min(k, cum.size) - 1]) for k in TOP_K},
        keys_half=int(np.searchsorted(cum, 0.5 - 1e-12) + 1),
        hot_keys=int((shares > 1.0 / workers).sum()),
        zipf=fit_zipf(counts),
        windows=hot_set_drift(stream.ids, times if times is not None else stream.ts),
        rate=rate,
        rate_from=rate_from,
        service_s=service_s,
    )
