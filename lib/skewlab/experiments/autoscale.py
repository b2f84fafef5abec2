"""Reproduce Landau et al.'s offline evaluation (``skewlab experiment autoscale-*``).

* ``autoscale-offline`` -- Sec. VI-E, Fig. 9-12: the twelve algorithms on the
  six delta streams (200 partitions, 500 measurements) for each of the four
  start conditions, every algorithm on the same seeded stream. CBS (Eq. 28)
  and average Rscore (Eq. 29) per delta, the Pareto front of (CBS, average
  Rscore) per delta, and the paper's findings beside ours.
* ``autoscale-latency`` -- Sec. VI-C, Fig. 5-8: MWF against Kafka's range
  assignor over 1..32 consumers, 32 partitions, 100 measurements, delta 5,
  per-byte latency from the fixed / rebalanced queue model.

Units: speeds are in % of the bin capacity (``C = 100``); the consumer's real
capacity is ``C_bar = 6/5 C = 120`` (the 5/6 rule). ``args.scale`` shrinks
the number of partitions (offline only) and of measurements; the numbers are
whatever the run gives, printed beside the paper's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skewlab.autoscale import (
    ALGORITHM_NAMES,
    DELTAS,
    START_CONDITIONS,
    Capacity,
    LatencyModel,
    MeasurementStream,
    average_rscore,
    cbs,
    pareto_front,
    run_stream,
)
from skewlab.experiments import Experiment, ExperimentArgs, ExperimentReport
from skewlab.report import format_table

log = logging.getLogger(__name__)

C = 100.0
"""Bin capacity in stream units (speeds are % of C)."""

MODIFIED = ("mwf", "mbf", "mwfp", "mbfp")


def _start_label(start: str | float) -> str:
    return start if isinstance(start, str) else f"{start:.0f}%C"


def _stream_seed(seed: int, delta: int, start_index: int) -> int:
    return seed * 1000 + delta * 10 + start_index


def _say(args: ExperimentArgs, msg: str) -> None:
    log.info(msg)
    if args.progress is not None:
        args.progress(msg)


def _pct(new: float, ref: float) -> float:
    return float("nan") if ref == 0 else 100.0 * (new - ref) / ref


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_lines(
    path: Path, title: str, ylabel: str, series: Mapping[str, Sequence[float]], xs: Sequence[int]
) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", label=name.upper())
    ax.set_xlabel("delta (% of C)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(ncol=3, fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def _plot_pareto(path: Path, panels: dict[int, tuple[np.ndarray, np.ndarray, list[int]]]) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    for ax, (delta, (xs, ys, front)) in zip(axes[0], panels.items()):
        ax.scatter(xs, ys, color="grey")
        for i, name in enumerate(ALGORITHM_NAMES):
            ax.annotate(name.upper(), (xs[i], ys[i]), fontsize=7)
        order = sorted(front, key=lambda i: xs[i])
        ax.plot(xs[order], ys[order], color="red", marker="o")
        ax.set_xlabel("CBS")
        ax.set_ylabel("average Rscore")
        ax.set_title(f"Pareto front, delta = {delta}")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def offline(args: ExperimentArgs) -> ExperimentReport:
    """The twelve algorithms on every (start condition, delta) stream; Fig. 9-12 and findings."""
    parts = max(10, round(200 * args.scale))
    meas = max(10, round(500 * args.scale))
    rows: list[dict[str, Any]] = []
    res: dict[tuple[str, int], dict[str, np.ndarray]] = {}
    for si, start in enumerate(START_CONDITIONS):
        label = _start_label(start)
        for delta in DELTAS:
            stream = MeasurementStream(
                partitions=parts,
                measurements=meas,
                delta=float(delta),
                start=start,
                capacity=C,
                seed=_stream_seed(args.seed, delta, si),
            ).generate()
            runs = [run_stream(a, stream, C) for a in ALGORITHM_NAMES]
            z = np.array([r.consumers for r in runs])
            score = cbs(z)
            avg = average_rscore(np.array([r.rscores for r in runs]))
            front = pareto_front(np.column_stack([score, avg]))
            res[(label, delta)] = {"cbs": score, "rscore": avg, "mean": z.mean(axis=1)}
            res[(label, delta)]["front"] = np.isin(np.arange(len(runs)), front)
            for i, a in enumerate(ALGORITHM_NAMES):
                rows.append(
                    {
                        "start": label,
                        "delta": delta,
                        "algorithm": a,
                        "cbs": float(score[i]),
                        "avg_rscore": float(avg[i]),
                        "mean_consumers": float(z[i].mean()),
                        "pareto": bool(i in front),
                    }
                )
            _say(args, f"start {label} delta {delta}: done ({parts} partitions x {meas})")
    main = _start_label(START_CONDITIONS[0])
    headers = ["algorithm", *(f"d={d}" for d in DELTAS)]

    def matrix(key: str, fmt: str) -> str:
        body = [
            [a.upper(), *(format(res[(main, d)][key][i], fmt) for d in DELTAS)]
            for i, a in enumerate(ALGORITHM_NAMES)
        ]
        return format_table(headers, body)

    fronts = [
        [
            f"{_start_label(s)} d={d}",
            " ".join(
                ALGORITHM_NAMES[i].upper()
                for i in np.flatnonzero(res[(_start_label(s), d)]["front"])
            ),
        ]
        for s in START_CONDITIONS
        for d in DELTAS
    ]
    findings, metrics = _offline_findings(res, main)
    table = "\n\n".join(
        [
            f"CBS (Eq. 28), start {main}, {parts} partitions x {meas} measurements",
            matrix("cbs", ".4f"),
            f"average Rscore (Eq. 29), start {main}",
            matrix("rscore", ".3f"),
            "Pareto front of (CBS, average Rscore) per start and delta",
            format_table(["stream", "front"], fronts),
            "paper vs ours (start " + main + "; 'all starts' counts every start condition)",
            format_table(["finding", "paper", "ours"], findings),
        ]
    )
    for i, a in enumerate(ALGORITHM_NAMES):
        for d in DELTAS:
            metrics[f"cbs_{a}_d{d}"] = float(res[(main, d)]["cbs"][i])
            metrics[f"rscore_{a}_d{d}"] = float(res[(main, d)]["rscore"][i])
    plots: list[Path] = []

    def series(key: str) -> dict[str, list[float]]:
        return {
            a: [float(res[(main, d)][key][i]) for d in DELTAS]
            for i, a in enumerate(ALGORITHM_NAMES)
        }

    fronts_main = {
        d: (
            res[(main, d)]["cbs"],
            res[(main, d)]["rscore"],
            [int(i) for i in np.flatnonzero(res[(main, d)]["front"])],
        )
        for d in (5, 25)
    }
    try:
        out = args.out
        plots.append(
            _plot_lines(out / "autoscale_cbs.png", "CBS (Fig. 9)", "CBS", series("cbs"), DELTAS)
        )
        plots.append(
            _plot_lines(
                out / "autoscale_rscore.png",
                "Average Rscore (Fig. 11)",
                "average Rscore",
                series("rscore"),
                DELTAS,
            )
        )
        plots.append(_plot_pareto(out / "autoscale_pareto.png", fronts_main))
    except ImportError:  # matplotlib is optional for the library
        log.warning("matplotlib not installed: no plots")
    return ExperimentReport(
        title="autoscale-offline: bin packing on delta streams (Landau et al. Sec. VI-E)",
        table=table,
        plots=plots,
        params={"partitions": parts, "measurements": meas, "capacity": C, "deltas": list(DELTAS)},
        metrics=metrics,
        rows=rows,
    )


def _offline_findings(
    res: dict[tuple[str, int], dict[str, np.ndarray]], main: str
) -> tuple[list[list[str]], dict[str, float]]:
    names = list(ALGORITHM_NAMES)
    varying = [d for d in DELTAS if d > 0]
    starts = [_start_label(s) for s in START_CONDITIONS]
    idx = {a: i for i, a in enumerate(names)}

    def lowest(key: str, d: int, start: str = main) -> list[str]:
        v = res[(start, d)][key]
        return [names[i].upper() for i in np.flatnonzero(np.isclose(v, v.min()))]

    bfd_best = sum("BFD" in lowest("cbs", d, s) for s in starts for d in varying)

    def best_modified(start: str, d: int) -> str:
        scores = res[(start, d)]["rscore"]
        return min(MODIFIED, key=lambda a: float(scores[idx[a]]))

    mwf_best_mod = sum(best_modified(s, d) == "mwf" for s in starts for d in varying)
    total = len(starts) * len(varying)
    on_front = {
        a: sum(bool(res[(s, d)]["front"][idx[a]]) for s in starts for d in varying)
        for a in MODIFIED
    }
    findings = [
        [
            "lowest CBS, start " + main,
            "BFD",
            "; ".join(f"d={d}: {'/'.join(lowest('cbs', d))}" for d in varying),
        ],
        ["BFD lowest (or tied) CBS, all starts", "BFD every delta", f"{bfd_best}/{total} streams"],
        [
            "lowest average Rscore, start " + main,
            "MWF (best modified)",
            "; ".join(f"d={d}: {'/'.join(lowest('rscore', d))}" for d in varying),
        ],
        ["MWF lowest Rscore of the modified, all starts", "yes", f"{mwf_best_mod}/{total} streams"],
        [
            "on the Pareto front, all starts (d>0)",
            "MWF MBF MBFP yes, MWFP no",
            " ".join(f"{a.upper()} {on_front[a]}/{total}" for a in MODIFIED),
        ],
    ]
    metrics: dict[str, float] = {"bfd_lowest_cbs_share": bfd_best / total}
    for d, paper in ((25, "-23% Rscore, +8.8% consumers"), (5, "-55% Rscore, +11.8% consumers")):
        r = res[(main, d)]
        dr = _pct(r["rscore"][idx["mwf"]], r["rscore"][idx["bfd"]])
        dz = _pct(r["mean"][idx["mwf"]], r["mean"][idx["bfd"]])
        findings.append(
            [f"MWF vs BFD at delta {d}", paper, f"{dr:+.1f}% Rscore, {dz:+.1f}% consumers"]
        )
        metrics[f"mwf_vs_bfd_rscore_pct_d{d}"] = dr
        metrics[f"mwf_vs_bfd_consumers_pct_d{d}"] = dz
    return findings, metrics


def latency(args: ExperimentArgs) -> ExperimentReport:
    """MWF vs Kafka's assignor over 1..32 consumers: per-byte latency percentiles (Fig. 5-8)."""
    parts, delta = 32, 5
    meas = max(5, round(100 * args.scale))
    cap = Capacity.from_bin(C)
    model = LatencyModel(consumer_capacity=cap.consumer)
    stream = MeasurementStream(
        partitions=parts, measurements=meas, delta=float(delta), capacity=C, seed=args.seed
    ).generate()
    specs = ["mwf", *(f"kafka:{n}" for n in range(1, parts + 1))]
    rows: list[dict[str, Any]] = []
    for spec in specs:
        run = run_stream(spec, stream, cap.c)
        st = model.segments(run.assignments, stream).stats()
        s = st.summary
        rows.append(
            {
                "algorithm": spec,
                "mean_consumers": float(run.consumers.mean()),
                "p50_s": s.p50,
                "p90_s": s.p90,
                "p99_s": s.p99,
                "max_s": s.max,
                "mean_s": s.mean,
                "positive_share": st.positive_share,
                "p90_positive_s": st.positive_p90,
            }
        )
    _say(args, f"latency: {len(specs)} configurations over {meas} x 30 s iterations")
    body = [
        [
            r["algorithm"].upper(),
            f"{r['mean_consumers']:.2f}",
            f"{r['p50_s']:.2f}",
            f"{r['p90_s']:.2f}",
            f"{r['p99_s']:.2f}",
            f"{r['max_s']:.2f}",
            f"{100 * r['positive_share']:.1f}",
            f"{r['p90_positive_s']:.2f}",
        ]
        for r in rows
    ]
    by = {r["algorithm"]: r for r in rows}
    mwf = by["mwf"]
    same = by[f"kafka:{max(1, min(parts, round(mwf['mean_consumers'])))}"]
    better = [r for r in rows[1:] if r["p90_s"] <= mwf["p90_s"]]
    first = better[0] if better else None
    better_pos = [r for r in rows[1:] if r["p90_positive_s"] <= mwf["p90_positive_s"]]
    findings = [
        ["MWF p90 latency, all bytes", "4.52 s", f"{mwf['p90_s']:.2f} s"],
        ["MWF p90 latency, bytes > 0 (Fig. 8)", "4.52 s", f"{mwf['p90_positive_s']:.2f} s"],
        ["MWF average consumers", "~15", f"{mwf['mean_consumers']:.2f}"],
        [
            "Kafka p90 with 15 consumers (all / > 0)",
            "217 s",
            f"{by['kafka:15']['p90_s']:.2f} s / {by['kafka:15']['p90_positive_s']:.2f} s",
        ],
        [
            f"Kafka p90 with MWF's {same['algorithm'].split(':')[1]} consumers",
            "48x MWF's",
            f"{same['p90_s']:.2f} s"
            + (f" ({same['p90_s'] / mwf['p90_s']:.1f}x MWF's)" if mwf["p90_s"] > 0 else ""),
        ],
        [
            "fewest Kafka consumers with p90 <= MWF's (all bytes)",
            "24 (+60% consumers)",
            _fewest(first, mwf),
        ],
        [
            "fewest Kafka consumers with p90 <= MWF's (bytes > 0)",
            "24 (+60% consumers)",
            _fewest(better_pos[0] if better_pos else None, mwf),
        ],
    ]
    table = "\n\n".join(
        [
            f"per-byte latency, {parts} partitions, {meas} measurements, delta {delta}, "
            f"C = {cap.c:g}, C_bar = {cap.consumer:g}",
            format_table(
                [
                    "algorithm",
                    "consumers",
                    "p50 s",
                    "p90 s",
                    "p99 s",
                    "max s",
                    "% bytes > 0",
                    "p90 of >0 s",
                ],
                body,
            ),
            "paper vs ours",
            format_table(["finding", "paper", "ours"], findings),
        ]
    )
    metrics = {
        "mwf_p90_s": mwf["p90_s"],
        "mwf_mean_consumers": mwf["mean_consumers"],
        "kafka15_p90_s": by["kafka:15"]["p90_s"],
        "mwf_p90_positive_s": mwf["p90_positive_s"],
        "kafka15_p90_positive_s": by["kafka:15"]["p90_positive_s"],
    }
    plots: list[Path] = []
    try:
        plots.append(_plot_p90(args.out / "autoscale_latency_p90.png", rows))
    except ImportError:
        log.warning("matplotlib not installed: no plots")
    return ExperimentReport(
        title="autoscale-latency: MWF vs Kafka's assignor (Landau et al. Sec. VI-C)",
        table=table,
        plots=plots,
        params={"partitions": parts, "measurements": meas, "delta": delta, "capacity": C},
        metrics=metrics,
        rows=rows,
    )


def _fewest(row: dict[str, Any] | None, mwf: dict[str, Any]) -> str:
    if row is None:
        return "none"
    extra = _pct(row["mean_consumers"], mwf["mean_consumers"])
    return f"{row['algorithm'].split(':')[1]} ({extra:+.0f}% consumers)"


def _plot_p90(path: Path, rows: list[dict[str, Any]]) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    labels = [r["algorithm"].replace("kafka:", "kd_").upper() for r in rows]
    ax.bar(labels, [max(r["p90_s"], 1e-3) for r in rows], color="grey")
    ax.set_yscale("log")
    ax.set_ylabel("p90 latency (s)")
    ax.set_title("p90 per-byte latency: MWF vs Kafka's assignor with N consumers")
    ax.tick_params(axis="x", labelrotation=90, labelsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


EXPERIMENTS: dict[str, Experiment] = {
    "autoscale-offline": offline,
    "autoscale-latency": latency,
}
"""The seed's offline experiments by name."""
