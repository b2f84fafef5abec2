"""``skewlab simulate``: run groupings over one seeded stream in the simulator.

Example (DKG's country-skew dataset at 80 % skew, SMALOPS' 50 us consumers)::

    skewlab simulate --workers 10 --workload country:R80 --events 5e6 \\
        --service-us 50 --compare key,shuffle,pkg,dkg

Every strategy sees the same stream (same workload seed) and the same
per-event service times (same ``--seed``). The default ``--rate`` is 80 % of
the workers' aggregate capacity, ``0.8 * W / mean_service``: a perfectly
balanced grouping keeps up, a skewed one overloads its hot workers.

Output: a table (or ``--json``) on stdout; progress and logs on stderr; the
metrics as ``metrics.json`` and two plots (per-worker load over time,
queueing-delay CDF) under ``--out`` (default
``./.skewlab/runs/sim-<UTC timestamp>``), whose paths are printed.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from skewlab.commands._args import count, positive_float, positive_int
from skewlab.errors import ConfigError, SkewlabError
from skewlab.grouping import make_grouping
from skewlab.report.plots import plot_latency_cdf, plot_worker_loads
from skewlab.report.table import sim_table
from skewlab.sim import SimConfig, simulate
from skewlab.sim.service import parse_service_us
from skewlab.workload import parse_workload

HELP = "simulate groupings over one seeded stream; print metrics, save plots"

log = logging.getLogger(__name__)

DEFAULT_LOAD = 0.8
"""Default offered load: ``--rate = DEFAULT_LOAD * workers / mean service time``."""

PROGRESS_MIN_EVENTS = 500_000
"""Runs at least this long show progress on stderr (unless ``--no-progress``)."""


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``simulate``'s options to its subparser."""
    parser.add_argument("--strategy", default="dkg", help="grouping to run (default: dkg)")
    parser.add_argument(
        "--compare", metavar="A,B,...", help="comma-separated groupings to run instead"
    )
    parser.add_argument("--workers", type=positive_int, default=10, help="W (default: 10)")
    parser.add_argument(
        "--workload", default="country:R80", help="workload spec (default: country:R80)"
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
    parser.add_argument("--seed", type=int, default=0, help="workload and service seed")
    parser.add_argument(
        "--window", type=positive_float, default=15.0, help="load window in s (default: 15)"
    )
    parser.add_argument("--out", type=Path, help="output directory for plots and metrics.json")
    parser.add_argument("--json", action="store_true", help="print the metrics as JSON")
    parser.add_argument("--no-plots", action="store_true", help="do not draw plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")


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

    def __post_init__(self) -> None:
        if not self.strategies:
            raise ConfigError("no strategy given; use --strategy NAME or --compare A,B")
        if len(set(self.strategies)) != len(self.strategies):
            raise ConfigError(f"strategy listed twice in {','.join(self.strategies)}")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimulateSettings:
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
        )


class _Progress:
    """Events done / total on stderr: one updating line on a terminal, else quarter steps."""

    def __init__(self, label: str, stream: TextIO) -> None:
        self.label = label
        self.stream = stream
        self.tty = stream.isatty()
        self.shown = -1

    def __call__(self, done: int, total: int) -> None:
        pct = 100 * done // total
        step = pct if self.tty else pct // 25 * 25
        if step == self.shown:
            return
        self.shown = step
        end = "\n" if (done == total or not self.tty) else ""
        prefix = "\r" if self.tty else ""
        self.stream.write(f"{prefix}{self.label}: {pct:3d}% ({done:,}/{total:,} events){end}")
        self.stream.flush()


def _out_dir(out: Path | None) -> Path:
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        return out
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    path = Path(".skewlab") / "runs" / f"sim-{stamp}"
    path.mkdir(parents=True, exist_ok=False)
    return path


def run(args: argparse.Namespace) -> int:
    """Validate everything, simulate each strategy, then report (stdout) and save files."""

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
    rate = settings.rate or DEFAULT_LOAD * settings.workers / service.mean
    show = settings.progress and settings.events >= PROGRESS_MIN_EVENTS

    results = []
    for name, grouping in zip(settings.strategies, groupings):
        progress = _Progress(f"simulate {name}", sys.stderr) if show else None
        result = simulate(
            grouping, workload, settings.events, rate, config=config, progress=progress
        )
        log.info("%s: %d events in %.2fs wall", name, result.events, result.wall_s)
        results.append(result)

    out = _out_dir(settings.out)
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

    if settings.as_json:
        brief = {**doc, "results": [r.summary() for r in results], "files": files}
        print(json.dumps(brief, indent=1))
    else:
        print(sim_table(results))
        print()
        for what, path in files.items():
            print(f"{what}: {path}")
    return 0


def _plots(results: list[Any], out: Path) -> dict[str, str]:
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:  # pragma: no cover - matplotlib is an optional extra
        raise SkewlabError(f"cannot plot ({exc}); install matplotlib or pass --no-plots") from None
    return {
        "loads_plot": str(plot_worker_loads(results, out / "worker_loads.png")),
        "latency_plot": str(plot_latency_cdf(results, out / "latency_cdf.png")),
    }
