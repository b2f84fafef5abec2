"""The DLB paper's ``dlb-switch`` claims (section 4, Fig. 3(b) / 4(b)), judged on a measure.

:func:`switch_claims` takes what :func:`skewlab.experiments._dlb_runs.measure_switch`
measured and returns one :class:`~skewlab.experiments.claims.Claim` per claim; nothing
here runs a simulation, so a test can judge a measure it built itself.
"""

from __future__ import annotations

import numpy as np

from skewlab.experiments._dlb_runs import PolicyRun, SwitchMeasure, kg_reference, sample_rstd
from skewlab.experiments.claims import Claim, at_most, band, ordered

__all__ = ["SEED", "switch_claims"]

SEED = "dlb"


def switch_claims(m: SwitchMeasure, kg6: PolicyRun | None = None) -> list[Claim]:
    """The paper's ``dlb-switch`` claims judged on ``m`` (DLB section 4, Fig. 3(b) / 4(b)).

    KG's RSTD is judged with the sample std (``n - 1``; the paper does not say which, and
    the sample std on the exact Zipf shares gives its "approximately 77 %"); the DLB
    claims against the key floor use the population std, as the rebalancers' theta does.
    ``kg6`` is KG on six engines on the same stream (Fig. 4: "KG uses 5 and 6 engines").
    """
    st = m.stats
    out: list[Claim] = []
    if "kg" in st:
        kg = st["kg"]
        n = m.setup.engines
        rng = np.random.default_rng(m.setup.seed)
        hi_ref = kg_reference(m.setup, 1.5, rng)
        lo_ref = kg_reference(m.setup, 0.2, rng)
        kg_hi, kg_lo = sample_rstd(kg.rstd_high, n), sample_rstd(kg.rstd_low, n)
        out += [
            Claim(
                SEED,
                "KG RSTD at eps 1.5 (mean of the eps 1.5 windows, sample std)",
                "~77 % (text), up to 80 % (Fig. 4b)",
                kg_hi,
                band(74.0, 83.0, " %"),
                ours=f"{kg_hi:.1f} % (population std: {kg.rstd_high:.1f} %)",
                figure="Fig. 3b/4b",
                why=(
                    f"on the exact eps 1.5 shares key % {n} gives "
                    f"{sample_rstd(hi_ref.ours, n):.1f} % (sample std); each window adds "
                    "its sampling noise"
                ),
            ),
            Claim(
                SEED,
                "KG RSTD at eps 0.2 (mean of the eps 0.2 windows, sample std)",
                "~3 %",
                kg_lo,
                band(0.0, 6.0, " %"),
                ours=f"{kg_lo:.1f} % (population std: {kg.rstd_low:.1f} %)",
                figure="Fig. 3b",
                why=(
                    f"key % {n} spreads the exact eps 0.2 shares to "
                    f"{sample_rstd(lo_ref.ours, n):.1f} %; the rest is each window's sampling "
                    "noise"
                ),
            ),
        ]
    if kg6 is not None and {"kg", "dlb-h", "pkg"} <= set(st):
        tp = {
            "kg-5": st["kg"].throughput,
            "kg-6": kg6.throughput,
            "dlb-h": st["dlb-h"].throughput,
            "pkg": st["pkg"].throughput,
        }
        out.append(
            Claim(
                SEED,
                "tuples processed: KG on 5 engines < KG on 6 < DLB-H < PKG (throughput)",
                "2,586,169 < 2,653,789 < 2,795,336 < 2,831,477 tweets in 40 min",
                tp,
                ordered(list(tp)),
                ours=" < ".join(f"{v:,.0f}" for v in tp.values()) + " ev/s",
                figure="Fig. 4b, Sec. 4",
            )
        )
    for p in ("dlb-h", "dlb-l"):
        if p in st:
            out.append(
                Claim(
                    SEED,
                    f"{p.upper()} RSTD within 10 points of the key floor at eps 1.5 "
                    "(windows after the phase's first check)",
                    "DLB-H ~40 % (Fig. 4b), DLB-L ~20 % (Fig. 4a)",
                    st[p].floor_gap_settled,
                    at_most(10.0, " pts"),
                    ours=(
                        f"+{st[p].floor_gap_settled:.1f} pts over the floor "
                        f"({m.floor_high:.1f} %); all eps 1.5 windows: "
                        f"{st[p].rstd_high:.1f} % (+{st[p].floor_gap_high:.1f} pts)"
                    ),
                    why=(
                        "the first check of a phase comes one interval into it; until then "
                        "the policy runs on the previous phase's placement"
                    ),
                    figure="Fig. 3b/4b",
                )
            )
    if "dlb-h" in st:
        h = st["dlb-h"]
        out.append(
            Claim(
                SEED,
                "DLB-H moves few keys per rebalance (% of the interval's keys, mean)",
                "5 % (Zipf), at most 10 % (default order)",
                h.keys_pct,
                at_most(10.0, " %"),
                ours=f"{h.keys_pct:.1f} % (max {h.keys_pct_max:.1f} %)",
                figure="Sec. 4",
            )
        )
    if "lptf" in st:
        lp = st["lptf"]
        out.append(
            Claim(
                SEED,
                "LPTF moves most keys per rebalance (% of the interval's keys, mean)",
                "~76 %",
                lp.keys_pct,
                band(71.0, 81.0, " %"),
                ours=f"{lp.keys_pct:.1f} %",
                figure="Sec. 4",
            )
        )
    if "dlb-h" in st and "dlb-l" in st:
        h, lo = st["dlb-h"], st["dlb-l"]
        out.append(
            Claim(
                SEED,
                "DLB-H moves fewer tuples per rebalance than DLB-L (FSD state: last H per key)",
                "57,750 < 294,881",
                {"dlb-h": h.tuples_state, "dlb-l": lo.tuples_state},
                ordered(["dlb-h", "dlb-l"]),
                ours=f"{h.tuples_state:,.0f} < {lo.tuples_state:,.0f}",
                figure="Sec. 4",
                why=(
                    "in tuples of the check window (state proportional to load) DLB-H moves "
                    f"{h.tuples_window:,.0f} vs DLB-L {lo.tuples_window:,.0f}: "
                    "heavy keys carry more of them"
                ),
            )
        )
    for p, paper in (("lptf", "12"), ("dlb-h", "10"), ("dlb-l", "10")):
        if p in st:
            ts = np.asarray([d.ts for d in m.runs[p].rebalances], dtype=np.float64)
            n_hi = int(m.setup.high(ts, m.setup.check_s).sum())
            out.append(
                Claim(
                    SEED,
                    f"{p.upper()} rebalances in 40 min",
                    f"{paper} (Zipf); 7-12 over both streams",
                    st[p].rebalances,
                    band(7, 12),
                    ours=str(st[p].rebalances),
                    figure="Sec. 4",
                    why=(
                        f"{n_hi} of {st[p].rebalances} follow checks on eps 1.5 windows, where "
                        f"the key floor ({m.floor_high:.0f} %) is above theta so every check "
                        "rebalances (their "
                        "number is set by the check interval, see the setup); the rest re-balance "
                        "the eps 1.5 placement after eps drops to 0.2"
                    ),
                )
            )
    return out
