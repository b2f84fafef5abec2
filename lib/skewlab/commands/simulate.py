"""``skewlab simulate``: run groupings over one seeded stream in the simulator.

Every strategy sees the same stream and the same per-event service times; the default rate is
80 % of the workers' aggregate capacity. Prints a table (or ``--json``), writes
``metrics.json`` and plots under ``--out``, and logs one MLflow run per strategy
(:mod:`skewlab.commands._sim_tracking`). Every input is validated before anything is written.
Example, outputs and the order of work: docs/cli.md, "skewlab simulate".
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewlab.commands._args import count, out_dir, positive_float, positive_int, workload
from skewlab.commands._progress import EventProgress
from skewlab.commands._sim_tracking import SimTracking
from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import GROUPING_NAMES, make_grouping
from skewlab.report.plots import plot_latency_cdf, plot_worker_loads
from skewlab.report.table import sim_table
from skewlab.services.datadir import resolve_home
from skewlab.sim.engine import SimConfig, simulate
from skewlab.sim.service import parse_service_us
from skewlab.workload.spec import WORKLOAD_NAMES, parse_workload
from skewlab.workload.trace import TraceWorkload

if TYPE_CHECKING:
    from skewlab.sim.engine import Progress
    from skewlab.workload.spec import AnyWorkload

HELP = "simulate groupings over one seeded stream; print metrics, save plots"

log = logging.getLogger(__name__)

DEFAULT_LOAD = 0.8
"""Default offered load: ``--rate = DEFAULT_LOAD * workers / mean service time``."""

PROGRESS_MIN_EVENTS = 500_000
"""Runs at least this long show progress on stderr (unless ``--no-progress``)."""

MLFLOW_EXPERIMENT = "skewlab-simulate"
"""Default MLflow experiment of ``simulate``'s runs."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``simulate``'s options to its subparser (allowed values and defaults in --help)."""

    strategies = ", ".join(GROUPING_NAMES)
    parser.add_argument(
        "--strategy", default="dkg", help=f"grouping to run: {strategies} (default: dkg)"
    )
    parser.add_argument(
        "--compare",
        metavar="A,B,...",
        help=f"comma-separated groupings to run instead of --strategy, from: {strategies}",
    )
    parser.add_argument("--workers", type=positive_int, default=10, help="W (default: 10)")
    parser.add_argument(
        "--workload",
        type=workload,
        default="country:R80",
        metavar="NAME[:ARGS]",
        help=f"workload spec, NAME one of {', '.join(WORKLOAD_NAMES)}; e.g. zipf:s=1.1,keys=1000, "
        "country:R80, trace:/path/events.csv (a CSV key[,timestamp][,size] or JSON-lines "
        "file) (default: country:R80)",
    )
    parser.add_argument(
        "--events", type=count, default=1_000_000, help="events to simulate (default: 1e6)"
    )
    parser.add_argument(
        "--service-us",
        default="1000",
        metavar="US|LO..HI",
        help="per-event service time in microseconds, constant or uniform range "
        "(default: 1000, DKG's processDuration)",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        help=f"arrival rate in events/s (default: {DEFAULT_LOAD:g} * workers / mean service)",
    )
    parser.add_argument(
        "--splitters", type=positive_int, default=1, help="splitter instances S (default: 1)"
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="workload and service seed (default: 0)"
    )
    parser.add_argument(
        "--window", type=positive_float, default=15.0, help="load window in s (default: 15)"
    )
    parser.add_argument(
        "--home",
        default=None,
        help="data dir: run dirs and the MLflow store (default: $SKEWLAB_HOME, else ./.skewlab)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        help="output directory for plots and metrics.json (default: <home>/runs/sim-<UTC time>)",
    )
    parser.add_argument(
        "--experiment",
        default=MLFLOW_EXPERIMENT,
        help=f"MLflow experiment of the runs (default: {MLFLOW_EXPERIMENT})",
    )
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--no-plots", action="store_true", help="do not draw plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log MLflow runs")


@dataclass(frozen=True, slots=True)
class SimulateSettings:
    """The validated settings of one ``simulate`` invocation (STYLE rule 6)."""

    strategies: tuple[str, ...]
    workers: int
    workload: str
    events: int
    service_us: str
    rate: float | None
    splitters: int
    seed: int
    window_s: float
    out: Path | None
    as_json: bool
    plots: bool
    progress: bool
    home: Path
    mlflow: bool = True
    experiment: str = MLFLOW_EXPERIMENT

    def __post_init__(self) -> None:
        if not self.strategies:
            raise ConfigError("no strategy given; use --strategy NAME or --compare A,B")
        if len(set(self.strategies)) != len(self.strategies):
            raise ConfigError(f"strategy listed twice in {','.join(self.strategies)}")
        if not self.experiment.strip():
            raise ConfigError("--experiment must be a non-empty MLflow experiment name")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimulateSettings:
        """The settings of parsed flags; the data dir resolved (``--home``, ``$SKEWLAB_HOME``)."""

        if args.compare is not None:
            names = tuple(s.strip() for s in args.compare.split(",") if s.strip())
        else:
            names = (args.strategy.strip(),)
        return cls(
            strategies=names,
            workers=args.workers,
            workload=args.workload,
            events=args.events,
            service_us=args.service_us,
            rate=args.rate,
            splitters=args.splitters,
            seed=args.seed,
            window_s=args.window,
            out=args.out,
            as_json=args.json,
            plots=not args.no_plots,
            progress=not args.no_progress,
            home=resolve_home(getattr(args, "home", None)),
            mlflow=not getattr(args, "no_mlflow", False),
            experiment=getattr(args, "experiment", MLFLOW_EXPERIMENT),
        )

    def params(self, workload_spec: str, rate: float) -> dict[str, Any]:
        """The simulation settings as MLflow params (no paths, no output switches)."""
        return {
            "workers": self.workers,
            "workload": workload_spec,
            "events": self.events,
            "service_us": self.service_us,
            "rate": rate,
            "splitters": self.splitters,
            "seed": self.seed,
            "window_s": self.window_s,
        }


def check_trace(workload: AnyWorkload, events: int) -> None:
    """Read a trace workload's first ``events`` rows now, so a malformed file fails before
    anything starts (:class:`ConfigError` naming ``file:line``); also an empty trace, or
    one shorter than ``events`` that does not loop. Other workloads pass unchanged."""

    if not isinstance(workload, TraceWorkload):
        return
    rows = 0
    for _ in workload.rows():
        rows += 1
        if rows >= events:
            return
    if rows == 0:
        raise ConfigError(f"{workload.path}: trace is empty")
    if not workload.loop:
        raise ConfigError(
            f"{workload.path}: trace has {rows} events but --events is {events}; "
            "ask for fewer or add loop=true (trace:path=FILE,loop=true)"
        )


def run(args: argparse.Namespace) -> int:
    """Validate everything, simulate each strategy, then report (stdout) and save files."""

    # 1. validate: nothing is written before every input has passed
    settings = SimulateSettings.from_args(args)
    service = parse_service_us(settings.service_us)
    workload = parse_workload(settings.workload, seed=settings.seed)
    groupings = [make_grouping(name, workers=settings.workers) for name in settings.strategies]
    config = SimConfig(
        service=service,
        splitters=settings.splitters,
        window_s=settings.window_s,
        seed=settings.seed,
    )
    check_trace(workload, settings.events)
    rate = settings.rate or DEFAULT_LOAD * settings.workers / service.mean
    show = settings.progress and settings.events >= PROGRESS_MIN_EVENTS

    # 2. the run dir and the MLflow runs
    out = out_dir(settings.out, settings.home, "sim")
    tracking = None
    if settings.mlflow:
        tracking = SimTracking.open(
            settings.home,
            settings.experiment,
            settings.params(workload.spec(), rate),
            settings.strategies,
            out,
        )

    # 3. simulate
    results = []
    try:
        for name, grouping in zip(settings.strategies, groupings):
            shown = EventProgress(f"simulate {name}", sys.stderr) if show else None
            progress: Progress | None = shown
            if tracking is not None:
                tracking.started(name)
                progress = _both(shown, tracking.progress(name))
            result = simulate(
                grouping, workload, settings.events, rate, config=config, progress=progress
            )
            log.info("%s: %d events in %.2fs wall", name, result.events, result.wall_s)
            results.append(result)
    except BaseException:
        if tracking is not None:
            tracking.failed()
        raise

    # 4. files, then the MLflow runs
    files: dict[str, str] = {}
    if settings.plots:
        files.update(_plots(results, out))
    doc: dict[str, Any] = {
        "command": "simulate",
        "settings": {
            "strategies": list(settings.strategies),
            "workers": settings.workers,
            "workload": workload.spec(),
            "events": settings.events,
            "service_us": settings.service_us,
            "service_mean_s": service.mean,
            "rate": rate,
            "splitters": settings.splitters,
            "seed": settings.seed,
            "window_s": settings.window_s,
        },
    }
    metrics_path = out / "metrics.json"
    files["metrics"] = str(metrics_path)
    full = {**doc, "results": [r.to_dict() for r in results], "files": files}
    metrics_path.write_text(json.dumps(full, indent=1))
    links: list[str] = []
    if tracking is not None:
        doc["mlflow"] = tracking.finish(results, files)
        links = tracking.links()

    if settings.as_json:
        brief = {**doc, "results": [r.summary() for r in results], "files": files}
        print(json.dumps(brief, indent=1))
    else:
        print(sim_table(results))
        print()
        for what, path in files.items():
            print(f"{what}: {path}")
        for line in links:
            print(line)
    return 0


def _both(*callbacks: Progress | None) -> Progress:
    """One progress callback calling every given one."""
    live = [c for c in callbacks if c is not None]

    def progress(done: int, total: int) -> None:
        for c in live:
            c(done, total)

    return progress


def _plots(results: list[Any], out: Path) -> dict[str, str]:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - matplotlib is an optional extra
        raise SkewlabError(f"cannot plot ({exc}); install matplotlib or pass --no-plots") from None
    return {
        "loads_plot": str(plot_worker_loads(results, out / "worker_loads.png")),
        "latency_plot": str(plot_latency_cdf(results, out / "latency_cdf.png")),
    }
