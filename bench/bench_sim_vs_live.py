"""The simulator's error against live runs, per metric, through ``skewlab advise --verify``.

Issue 36's measurement: three streams (a Zipf trace, DKG's country skew, a trace whose
hot set drifts) at two worker counts. Each cell is one ``skewlab advise --trace ...
--verify`` (the recommendation and KEY grouping, simulated and live on the same events
through Kafka, MLflow runs logged under the bench's data dir). Small live runs: a few
thousand events at a modest rate on a shared machine. Targets: imbalance and DIST_COST
within 15 %, p99 within 30 %. Prints one table (absolute figures, sim/live, relative
error, within target, p99's error before calibration) and writes it as JSON.

    .venv/bin/python bench/bench_sim_vs_live.py [--events 3000] [--rate 400]
        [--service-us 3000] [--workers 2 4] [--streams country:R80] [--json out.json]
    .venv/bin/python bench/bench_sim_vs_live.py --reanalyse out.json  # no live run
(``--reanalyse``: the recorded runs through today's calibration, :func:`calibrate`; they are
in the data dir, which only ``--keep`` leaves in place.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, say, scratch_dir
from skewlab.advise.base import stream_of
from skewlab.advise.candidates import (
    Candidate,
    SimSettings,
    candidates,
    rebalance_interval,
    window_of,
)
from skewlab.advise.readers import read_trace, write_trace_csv
from skewlab.commands._advise_verify import (
    DEFAULT_VERIFY_RATE,
    VerifyResult,
    VerifyRow,
    calibrate,
    model_run,
)
from skewlab.live.driver.settings import produce_settings
from skewlab.report.table import format_table
from skewlab.runsettings import ExperimentSettings
from skewlab.services import get_service
from skewlab.workload.spec import parse_workload

SKEWLAB = str(Path(sys.executable).with_name("skewlab"))


def workload_keys(spec: str, n: int) -> list[str]:
    """The first ``n`` keys of a skewlab workload (seed 1)."""
    keys: list[str] = []
    for chunk in parse_workload(spec, seed=1).events(n):
        keys.extend(map(str, chunk.keys.keys()))
    return keys[:n]


def drifting_keys(n: int, phases: int = 4, keys: int = 200, s: float = 1.2) -> list[str]:
    """Zipf(``s``) over ``keys`` keys whose ranks are reshuffled ``phases`` times: the hot
    set of each quarter of the trace is a different set of keys."""
    rng = np.random.default_rng(7)
    p = 1.0 / np.arange(1, keys + 1) ** s
    ranks = rng.choice(keys, size=n, p=p / p.sum())
    out: list[str] = []
    for phase in range(phases):
        perm = rng.permutation(keys)
        lo, hi = phase * n // phases, (phase + 1) * n // phases
        out.extend(f"d{perm[r]}" for r in ranks[lo:hi])
    return out


STREAMS = {
    "zipf s=1.1": lambda n: workload_keys("zipf:s=1.1,v=2.72,keys=1000", n),
    "country:R80": lambda n: workload_keys("country:R80", n),
    "drifting hot set": drifting_keys,
}


def one(trace: Path, workers: int, a: argparse.Namespace, home: Path, log: Any) -> dict[str, Any]:
    """``skewlab advise --verify`` on ``trace`` at ``workers``; its JSON document."""
    argv = [SKEWLAB, "advise", "--trace", str(trace), "--workers", str(workers),
            "--service-us", str(a.service_us), "--rate", str(a.rate), "--verify",
            "--verify-events", str(a.events), "--json", "--no-progress",
            "--home", str(home), *(["--measure-service"] if a.measure_service else [])]  # fmt: skip
    done = subprocess.run(argv, stdout=subprocess.PIPE, stderr=log, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(
            f"advise failed ({done.returncode}) on {trace} W={workers}; see {log.name}"
        )
    return json.loads(done.stdout)


def rows_of(stream: str, workers: int, doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The bench's table rows of one advise document."""
    v = doc["verify"]
    return [{"stream": stream, "workers": workers, "recommended": doc["recommended"],
             "delay_ms": v["p99_offset_ms"], "trigger_s": v["trigger_s"],
             "runs": v["runs"], **r} for r in v["records"]]  # fmt: skip


def table(rows: list[dict[str, Any]], before: bool = False) -> str:
    """The printed table (``before``: also the figure and error of the model the bench ran
    with)."""

    def pct(x: float) -> str:
        return "inf" if x == float("inf") else f"{100 * x:.0f} %"

    cells = []
    for r in rows:
        within = "-" if r["target"] == float("inf") else ("yes" if r["within"] else "NO")
        uncal = pct(r["rel_error_uncalibrated"]) if r["metric"] == "p99_ms" else ""
        extra = [f"{r['sim_before']:.3g} ({pct(r['rel_error_before'])})"] if before else []
        cells.append([r["stream"], r["workers"], r["strategy"], r["metric"], f"{r['sim']:.3g}",
                      f"{r['live']:.3g}", f"{r['ratio']:.2f}", pct(r["rel_error"]), within,
                      uncal, *extra])  # fmt: skip
    head = ("stream", "W", "strategy", "metric", "sim", "live", "sim/live", "rel. error",
            "within target", "p99 error uncalibrated",
            *(["sim as run (error)"] if before else []))  # fmt: skip
    return format_table(head, cells)


def recorded_run(home: Path, run_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recorded live run's settings and summary (its MLflow ``summary.json``)."""
    run_dir = home / "runs" / run_id
    settings = json.loads((run_dir / "settings.json").read_text())
    mlflow_id = json.loads((run_dir / "mlflow.json").read_text())["mlflow_run_id"]
    found = sorted(home.glob(f"mlartifacts/*/{mlflow_id}/artifacts/summary.json"))
    return settings, json.loads(found[0].read_text())


def reanalyse(saved: dict[str, Any], home: Path, measure: bool = False) -> list[dict[str, Any]]:
    """The saved cells' live figures against the simulator as ``--verify`` models them today
    (:func:`model_run`, :func:`calibrate`: the producer's bursts, each run's own route-job
    batches, KEY's fixed delay; ``measure``: each run's measured service time); the saved
    rows' errors become ``rel_error_before``."""
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in saved["rows"]:
        cells.setdefault((r["stream"], r["workers"]), []).append(r)
    dirs = sorted(d for d in (home / "runs").glob("advise-*") if (d / "verify.csv").exists())
    out = []
    for ((_, w), recs), d in zip(cells.items(), dirs, strict=False):
        st = json.loads((d / "advice.json").read_text())["settings"]
        rate = min(st["rate"], DEFAULT_VERIFY_RATE)
        prefix = read_trace(str(d / "verify.csv"))
        span = len(prefix) / rate
        sim = SimSettings(w, st["service_us"] * 1e-6 * st["rate"] / rate, window_of(span),
                          rebalance_interval(span), seed=st["seed"])  # fmt: skip
        known = {c.label: c for c in candidates(w)} | {"key": Candidate("key")}
        labels = list(dict.fromkeys(r["strategy"] for r in recs))
        before = {(r["strategy"], r["metric"]): r for r in recs}
        rows, modelled, trigger_s = [], [], 0.5
        for x in labels:
            mine = [r for r in recs if r["strategy"] == x]
            settings, summary = recorded_run(home, mine[0]["run_id"])
            trigger_s = settings["trigger_s"]
            chunk = produce_settings(ExperimentSettings(**settings).spec, "bench").burst
            m = model_run(known[x], prefix, rate, chunk, sim, home / "runs" / mine[0]["run_id"],
                          summary["t_first_s"], measure)  # fmt: skip
            live = {r["metric"]: r["live"] for r in mine} | {"p50_ms": summary["p50_ms"]}
            rows.append(VerifyRow(x, m.outcome.figures(), live, mine[0]["run_id"], True,
                                  sim_uncalibrated_p99_ms=m.outcome.sojourn_p99_ms,
                                  service_us=(m.service_s or math.nan) * 1e6))  # fmt: skip
            modelled.append(m)
        cal = calibrate(rows, modelled, trigger_s)
        result = VerifyResult(len(prefix), rate, cal.delay_ms, rows, sim.service_s * 1e6,
                              cal.trigger_s, cal.fitted_on)  # fmt: skip
        for r in result.records():
            b = before[(r["strategy"], r["metric"])]
            service = {x.label: x.service_us for x in rows}[r["strategy"]]
            out.append({**b, **r, "delay_ms": cal.delay_ms, "trigger_s": cal.trigger_s,
                        "service_us_measured": service,
                        "rel_error_before": b["rel_error"], "sim_before": b["sim"],
                        "within_before": b["within"]})  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=3000)
    ap.add_argument("--rate", type=float, default=400.0)
    ap.add_argument("--service-us", type=float, default=3000.0)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument(
        "--streams",
        nargs="+",
        choices=list(STREAMS),
        default=list(STREAMS),
        help="only these streams (e.g. to rerun the cells that missed)",
    )
    ap.add_argument(
        "--measure-service",
        action="store_true",
        help="simulate each run with its workers' measured per-event work",
    )
    ap.add_argument("--json", type=Path, help="also write the rows here")
    ap.add_argument("--reanalyse", type=Path, help="a --json file of an earlier --keep run")
    keep_flag(ap)
    a = ap.parse_args()
    if a.reanalyse:
        saved = json.loads(a.reanalyse.read_text())
        if not Path(saved["home"]).is_dir():
            ap.error(f"{saved['home']} is gone: --reanalyse needs a run made with --keep")
        redone = reanalyse(saved, Path(saved["home"]), a.measure_service)
        say(f"{saved['started']}; load then {saved['load']}; recalibrated")
        say(table(redone, before=True))
        n = [r for r in redone if r["target"] != float("inf")]
        say(f"\nwithin target: {sum(r['within'] for r in n)} / {len(n)} (calibrated), "
            f"{sum(r['within_before'] for r in n)} / {len(n)} (as run), "
            f"{sum(r['within_uncalibrated'] for r in n)} / {len(n)} (uncalibrated)")  # fmt: skip
        for (stream, w), d in {(r["stream"], r["workers"]): r for r in redone}.items():
            services = sorted(
                {
                    f"{x['strategy']} {x['service_us_measured']:,.0f} us"
                    for x in redone
                    if (x["stream"], x["workers"]) == (stream, w)
                }
            )
            say(f"  {stream} W={w}: micro-batch {d['trigger_s']:.2f} s, "
                f"delay {d['delay_ms']:,.0f} ms; service: {', '.join(services)}")  # fmt: skip
        a.reanalyse.with_suffix(".recalibrated.json").write_text(
            json.dumps({**saved, "rows": redone}, indent=1, default=str)
        )
        return
    home = Path(scratch_dir("skewlab-bench-simlive-"))
    load0 = Path("/proc/loadavg").read_text().strip()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    say(f"{started}; load {load0}; data dir {home}")
    say(f"{a.events:,} events per live run at {a.rate:,.0f}/s, {a.service_us:,.0f} us per event")
    bootstrap = get_service("broker", str(home)).start().url
    os.environ["SKEWLAB_KAFKA_BOOTSTRAP"] = bootstrap
    rows: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        with open(home / "advise.log", "w") as log:
            for name, make in ((x, STREAMS[x]) for x in a.streams):
                keys = make(a.events)
                trace = write_trace_csv(
                    stream_of(name, ((k, None, None) for k in keys)),
                    home / f"{name.split()[0].replace(':', '_')}.csv",
                    len(keys),
                )
                for w in a.workers:
                    doc = one(trace, w, a, home, log)
                    rows.extend(rows_of(name, w, doc))
                    if a.json:  # after every cell: a cut-short bench keeps what it measured
                        doc_out = {
                            "started": started,
                            "load": load0,
                            "home": str(home),
                            "rows": rows,
                        }
                        a.json.write_text(json.dumps(doc_out, indent=1, default=str))
                    v = doc["verify"]
                    load = Path("/proc/loadavg").read_text().split()[:3]
                    say(f"  {name} W={w}: recommended {doc['recommended']}; calibration: "
                        f"{v['trigger_s']:g} s micro-batches + {v['p99_offset_ms']:,.0f} ms; "
                        f"runs {v['runs']}; load {' '.join(load)}")  # fmt: skip
    finally:
        get_service("broker", str(home)).stop()
        drop_scratch(str(home), a.keep)
    say("")
    say(table(rows))
    n = [r for r in rows if r["target"] != float("inf")]
    say(f"\nwithin target: {sum(r['within'] for r in n)} / {len(n)} (calibrated), "
        f"{sum(r['within_uncalibrated'] for r in n)} / {len(n)} (uncalibrated); "
        f"{time.perf_counter() - t0:,.0f} s; load at the end "
        f"{Path('/proc/loadavg').read_text().strip()}")  # fmt: skip
    if a.json:
        doc_out = {"started": started, "load": load0, "home": str(home), "rows": rows}
        a.json.write_text(json.dumps(doc_out, indent=1, default=str))


if __name__ == "__main__":
    main()
