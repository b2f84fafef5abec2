"""``skewlab advise``: which strategy a user's own stream needs, and the command to run it.

Reads the stream (a trace file, a Kafka topic sample or a Delta table; bad rows
counted and named), characterises it, simulates every grouping and rebalance policy
with a small sweep on the stream itself (:func:`skewlab.advise.advise`), prints one
ranked table with the Pareto set, the recommendation and its reason, and the
``skewlab run`` command that runs it live; logs the table and plots to MLflow.
``--verify`` runs the recommendation and KEY grouping live on the same events and
prints the simulator's figures beside the live ones (:mod:`skewlab.commands._advise_verify`).
Every flag is checked before anything is read. Example and output: docs/advise.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skewlab.advise import Advice, advise
from skewlab.advise.base import Stream
from skewlab.advise.command import run_args, run_command
from skewlab.advise.readers import (
    TRACE_FORMATS,
    count_rows,
    read_trace,
    trace_format,
    write_trace_csv,
)
from skewlab.commands._advise_report import advice_doc, log_mlflow, report, write_files
from skewlab.commands._advise_verify import VerifyResult, verify
from skewlab.commands._args import count, out_dir, positive_float, positive_int
from skewlab.commands._progress import EventProgress
from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.io.run_links import run_link
from skewlab.io.stream_sample import read_delta, sample_topic
from skewlab.io.tracking import Tracker
from skewlab.services.datadir import resolve_home

HELP = "which strategy your own stream needs: characterise it, simulate every strategy on it, rank"

log = logging.getLogger(__name__)

MLFLOW_EXPERIMENT = "skewlab-advise"
"""Default MLflow experiment of ``advise``'s runs."""

DEFAULT_RECORDS = 100_000
"""Records sampled from a Kafka topic or a Delta table unless ``--records`` says."""

DEFAULT_VERIFY_EVENTS = 20_000
"""Events of the stream ``--verify`` replays live (each of the two runs)."""

BOOTSTRAP_ENV = "SKEWLAB_KAFKA_BOOTSTRAP"
"""A Kafka to sample when ``--bootstrap`` is not given (as ``skewlab run``)."""

CLIENTS = ("confluent", "kafka-python")


def fraction(text: str) -> float:
    """A number >= 0 (``0.25``); anything else is an ``ArgumentTypeError`` (one line)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``advise``'s options (allowed values and defaults in --help)."""
    src = parser.add_mutually_exclusive_group()  # one is required: AdviseSettings says so
    src.add_argument(
        "--trace",
        metavar="FILE",
        help="trace file: CSV key[,timestamp][,size][,value] (optional header), JSON lines "
        "with key, timestamp|ts, size, value, or Parquet with those columns",
    )
    src.add_argument("--topic", help="Kafka topic to sample (newest --records records)")
    src.add_argument("--delta", metavar="PATH", help="Delta table with a key column")
    parser.add_argument(
        "--format",
        choices=TRACE_FORMATS,
        default="auto",
        help="trace format (default: auto, by the file's extension)",
    )
    parser.add_argument(
        "--bootstrap",
        metavar="HOST:PORT",
        help=f"Kafka bootstrap servers of --topic (default: ${BOOTSTRAP_ENV})",
    )
    parser.add_argument(
        "--client", choices=CLIENTS, default="confluent", help="Kafka client (default: confluent)"
    )
    parser.add_argument(
        "--records",
        type=count,
        help=f"at most this many records (--topic / --delta default: {DEFAULT_RECORDS:,}; "
        "--trace: the whole file)",
    )
    parser.add_argument("--workers", type=positive_int, help="W, the workers (required)")
    parser.add_argument(
        "--service-us",
        type=positive_float,
        default=1000.0,
        help="per-event service time in microseconds (default: 1000, DKG's processDuration)",
    )
    parser.add_argument(
        "--rate",
        type=positive_float,
        help="arrival rate in events/s (default: from the timestamps, else 80%% of capacity)",
    )
    parser.add_argument(
        "--slack",
        type=fraction,
        default=0.25,
        help="how far above the best p99 a strategy still counts as keeping up (default: 0.25)",
    )
    parser.add_argument("--seed", type=int, default=0, help="service and arrival seed")
    parser.add_argument(
        "--home", default=None, help="data dir (default: $SKEWLAB_HOME, else ./.skewlab)"
    )
    parser.add_argument(
        "--out", type=Path, help="output dir (default: <home>/runs/advise-<UTC time>)"
    )
    parser.add_argument(
        "--experiment", default=MLFLOW_EXPERIMENT, help=f"MLflow experiment ({MLFLOW_EXPERIMENT})"
    )
    parser.add_argument("--json", action="store_true", help="print the advice as JSON")
    parser.add_argument("--no-plots", action="store_true", help="do not draw plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument("--no-mlflow", action="store_true", help="do not log an MLflow run")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="run the recommendation and KEY grouping live on the stream's first "
        "--verify-events events; print simulator vs live per metric",
    )
    parser.add_argument(
        "--verify-events",
        type=count,
        default=DEFAULT_VERIFY_EVENTS,
        help=f"events each live run replays (default: {DEFAULT_VERIFY_EVENTS:,})",
    )
    parser.add_argument(
        "--verify-rate",
        type=positive_float,
        help="events/s of the live runs (default: the advice's rate, at most 1,500); the "
        "service time is scaled to keep the advice's offered load",
    )
    parser.add_argument(
        "--measure-service",
        action="store_true",
        help="with --verify: simulate each live run with the per-event work its workers "
        "were measured to spend (from their flushes), not the given service time",
    )


@dataclass(frozen=True)
class AdviseSettings:
    """The validated settings of one ``advise`` invocation (STYLE rule 6)."""

    workers: int
    service_us: float
    trace: str | None = None
    format: str = "auto"
    topic: str | None = None
    bootstrap: str | None = None
    client: str = "confluent"
    delta: str | None = None
    records: int | None = None
    rate: float | None = None
    slack: float = 0.25
    seed: int = 0
    home: Path = Path(".skewlab")
    out: Path | None = None
    experiment: str = MLFLOW_EXPERIMENT
    as_json: bool = False
    plots: bool = True
    progress: bool = True
    mlflow: bool = True
    verify: bool = False
    verify_events: int = DEFAULT_VERIFY_EVENTS
    verify_rate: float | None = None
    measure_service: bool = False

    def __post_init__(self) -> None:
        if self.workers is None:
            raise ConfigError("--workers W is required (an integer >= 1)")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ConfigError(f"--workers must be an integer >= 1, got {self.workers!r}")
        given = [n for n in ("trace", "topic", "delta") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ConfigError("give exactly one input: --trace FILE, --topic NAME or --delta PATH")
        if self.format != "auto" and self.trace is None:
            raise ConfigError("--format applies to --trace only")
        if self.format not in TRACE_FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(TRACE_FORMATS)}")
        if self.trace is not None and not os.path.isfile(self.trace):
            raise ConfigError(f"--trace: no such file: {self.trace}")
        if self.topic is not None and not self.bootstrap:
            raise ConfigError(
                f"--topic needs --bootstrap HOST:PORT (or ${BOOTSTRAP_ENV}) to find the broker"
            )
        if self.bootstrap is not None and self.topic is None:
            raise ConfigError("--bootstrap applies to --topic only")
        if self.bootstrap and ":" not in self.bootstrap:
            raise ConfigError(f"--bootstrap must be HOST:PORT[,HOST:PORT], got {self.bootstrap!r}")
        if self.client not in CLIENTS:
            raise ConfigError(f"--client must be one of {', '.join(CLIENTS)}")
        if self.delta is not None and not os.path.isdir(self.delta):
            raise ConfigError(f"--delta: no such directory: {self.delta}")
        if self.verify_rate is not None and not self.verify:
            raise ConfigError("--verify-rate applies with --verify only")
        if self.measure_service and not self.verify:
            raise ConfigError("--measure-service applies with --verify only")
        if not self.experiment.strip():
            raise ConfigError("--experiment must be a non-empty MLflow experiment name")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AdviseSettings:
        """The settings of parsed flags (``--bootstrap`` else ``$SKEWLAB_KAFKA_BOOTSTRAP``
        for a topic; the data dir resolved)."""
        bootstrap = args.bootstrap
        if args.topic is not None and bootstrap is None:
            bootstrap = env_settings().kafka_bootstrap
        return cls(
            workers=args.workers,
            service_us=args.service_us,
            trace=args.trace,
            format=args.format,
            topic=args.topic,
            bootstrap=bootstrap,
            client=args.client,
            delta=args.delta,
            records=args.records,
            rate=args.rate,
            slack=args.slack,
            seed=args.seed,
            home=resolve_home(args.home),
            out=args.out,
            experiment=args.experiment,
            as_json=args.json,
            plots=not args.no_plots,
            progress=not args.no_progress,
            mlflow=not args.no_mlflow,
            verify=args.verify,
            verify_events=args.verify_events,
            verify_rate=args.verify_rate,
            measure_service=args.measure_service,
        )

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> AdviseSettings:
        """The settings of the ``skewlab_advise`` DAG's form (:data:`PARAMS`; an empty field
        is unset); no progress bar, no terminal output, the data dir from ``$SKEWLAB_HOME``."""

        def given(name: str) -> Any:
            v = params.get(name)
            return None if v in (None, "") else v

        unknown = sorted(set(params) - set(PARAMS))
        if unknown:
            raise ConfigError(
                f"unknown param(s) {', '.join(unknown)}; allowed: {', '.join(PARAMS)}"
            )
        records = given("records")
        rate = given("rate")
        verify = params.get("verify", False)
        if not isinstance(verify, bool):
            raise ConfigError(f"verify must be true or false, got {verify!r}")
        verify_events = params.get("verify_events", DEFAULT_VERIFY_EVENTS)
        if type(verify_events) is not int or verify_events < 1:  # a bool is no count
            raise ConfigError(f"verify_events must be an integer >= 1, got {verify_events!r}")
        return cls(
            workers=int(params["workers"]),
            service_us=float(params.get("service_us") or 1000.0),
            trace=given("trace"),
            format=given("format") or "auto",
            topic=given("topic"),
            bootstrap=given("bootstrap"),
            delta=given("delta"),
            records=None if records is None else int(records),
            rate=None if rate is None else float(rate),
            slack=float(params.get("slack", 0.25)),
            seed=int(params.get("seed", 0)),
            home=resolve_home(None),
            progress=False,
            verify=verify,
            verify_events=verify_events,
        )

    @property
    def source(self) -> str:
        """Where the stream comes from, as the user named it."""
        if self.trace is not None:
            return self.trace
        if self.topic is not None:
            return f"kafka:{self.topic}@{self.bootstrap}"
        return f"delta:{self.delta}"

    def params(self) -> dict[str, Any]:
        """The settings as MLflow params (no output switches)."""
        return {
            "source": self.source,
            "workers": self.workers,
            "service_us": self.service_us,
            "rate": self.rate if self.rate is not None else "from the stream",
            "records": self.records if self.records is not None else "all",
            "slack": self.slack,
            "seed": self.seed,
        }


PARAMS: dict[str, dict[str, Any]] = {
    "trace": {"default": "", "type": "string",
              "description": "trace file (CSV / JSON lines / Parquet) on the Airflow worker"},
    "format": {"default": "auto", "type": "string", "enum": list(TRACE_FORMATS),
               "description": "trace format"},
    "topic": {"default": "", "type": "string", "description": "or: a Kafka topic to sample"},
    "bootstrap": {"default": "", "type": "string", "description": "the topic's HOST:PORT"},
    "delta": {"default": "", "type": "string", "description": "or: a Delta table's path"},
    "records": {"default": None, "type": ["null", "integer"], "minimum": 1,
                "description": "at most this many records (topic / Delta: 100,000)"},
    "workers": {"default": 8, "type": "integer", "minimum": 1, "maximum": 1024,
                "description": "W, the workers"},
    "service_us": {"default": 1000.0, "type": "number", "exclusiveMinimum": 0,
                   "description": "per-event service time, microseconds"},
    "rate": {"default": None, "type": ["null", "number"], "exclusiveMinimum": 0,
             "description": "events/s (empty: the timestamps, else 80 % of capacity)"},
    "slack": {"default": 0.25, "type": "number", "minimum": 0,
              "description": "how far above the best p99 still counts as keeping up"},
    "seed": {"default": 0, "type": "integer", "description": "service and arrival seed"},
    "verify": {"default": False, "type": "boolean",
               "description": "also run the recommendation and KEY grouping live (a broker: "
                              "$SKEWLAB_KAFKA_BOOTSTRAP, else an embedded one) and compare"},
    "verify_events": {"default": DEFAULT_VERIFY_EVENTS, "type": "integer", "minimum": 1,
                      "description": "events each live run replays (with verify)"},
}  # fmt: skip
"""The ``skewlab_advise`` DAG's form: each field's JSON schema (``airflow.sdk.Param`` kwargs),
the flags of ``skewlab advise`` without the output switches."""


def read_stream(s: AdviseSettings) -> Stream:
    """The stream of ``s``'s input (the trace file, the topic sample or the Delta table);
    reading a trace shows progress on stderr unless ``--no-progress``."""
    if s.trace is not None:
        if not s.progress:
            return read_trace(s.trace, s.format, s.records)
        total = max(count_rows(s.trace, s.format), 1)
        if s.records is not None:
            total = min(total, s.records)
        shown = EventProgress("read", sys.stderr)
        try:
            return read_trace(
                s.trace, s.format, s.records, progress=lambda n: shown(min(n, total), total)
            )
        finally:
            shown.close()
    records = s.records or DEFAULT_RECORDS
    if s.topic is not None:
        assert s.bootstrap is not None
        return sample_topic(s.bootstrap, s.topic, records, s.client)
    assert s.delta is not None
    return read_delta(s.delta, records)


def live_args(
    advice: Advice, s: AdviseSettings, workload: str, events: int, rate: float
) -> list[str]:
    """``skewlab run``'s arguments for the recommendation on ``workload``."""
    st = advice.settings
    return run_args(
        advice.best,
        workers=s.workers,
        workload=workload,
        events=events,
        rate=rate,
        service_us=s.service_us,
        window_s=st.window_s,
        interval_s=st.interval_s,
    )


def run(args: argparse.Namespace) -> int:
    """Validate, read the stream, advise, report; ``--verify`` then runs it live."""
    # 1. validate: nothing is read or written before every flag passed
    s = AdviseSettings.from_args(args)
    shown = EventProgress("advise", sys.stderr) if s.progress else None
    try:
        done = execute(s, progress=shown, warn=lambda line: print(line, file=sys.stderr))
    finally:
        if shown is not None:
            shown.close()
    try:
        _report(done, s)
    except BaseException:
        done.end("FAILED")
        raise
    done.end("FINISHED")
    return 0


@dataclass
class Done:
    """What :func:`execute` produced: the advice, its stream, the JSON document, the files,
    the run dir and the MLflow run (left open for ``--verify``; :meth:`end` ends it)."""

    advice: Advice
    stream: Stream
    doc: dict[str, Any]
    files: dict[str, Path]
    out: Path
    tracker: Tracker | None = None
    run_id: str | None = None

    def end(self, status: str) -> None:
        """End the MLflow run (if any) with ``status``."""
        if self.tracker is not None and self.run_id is not None:
            self.tracker.end_run(self.run_id, status)


def execute(
    s: AdviseSettings,
    progress: Callable[[int, int], None] | None = None,
    warn: Callable[[str], None] = log.warning,
) -> Done:
    """Steps 2-4 of :func:`run` for validated settings (the command and the DAG):
    read the stream (``warn`` gets the bad-row line), advise, write the files and
    open the MLflow run."""
    # 2. the stream, its bad rows named
    stream = read_stream(s)
    if stream.bad_rows:
        warn(f"skewlab advise: {stream.describe_bad()}")

    # 3. advise (progress over every candidate's events)
    advice = advise(
        stream,
        s.workers,
        s.service_us * 1e-6,
        s.rate,
        slack=s.slack,
        seed=s.seed,
        progress=progress,
    )

    # 4. files and the MLflow run
    out = out_dir(s.out, s.home, "advise")
    workload = _live_workload(stream, s, out)
    command = run_command(live_args(advice, s, workload, len(stream), advice.workload.arrival_rate))
    doc = advice_doc(advice, stream, s, command)
    files = write_files(advice, stream, s, out, doc)
    done = Done(advice, stream, doc, files, out)
    if s.mlflow:
        done.tracker, done.run_id = log_mlflow(advice, s, doc, files)
    return done


def _report(done: Done, s: AdviseSettings) -> None:
    """Steps 5 and 6 of :func:`run`: print the advice, then ``--verify``."""
    advice, doc, files = done.advice, done.doc, done.files
    tracker, run_id = done.tracker, done.run_id
    # 5. report
    if s.as_json and not s.verify:
        print(json.dumps({**doc, "files": {k: str(v) for k, v in files.items()}}, indent=1))
    elif not s.as_json:
        print(report(advice, done.stream, doc["run"]))
        print()
        for what, path in files.items():
            print(f"{what}: {path}")
        if tracker is not None and run_id is not None:
            print(f"mlflow run {run_id}: {run_link(tracker, run_id)}")

    # 6. --verify
    if s.verify:
        result = run_verify(done, s)
        if s.as_json:
            print(json.dumps({**doc, "verify": result.to_dict()}, indent=1, default=str))
        else:
            print()
            print(result.table())


def run_verify(done: Done, s: AdviseSettings) -> VerifyResult:
    """``--verify`` for :func:`execute`'s result (the command and the DAG): the live runs,
    the simulator-vs-live table logged to the MLflow run (``verify.csv``, errors)."""
    result = verify(done.advice, done.stream, s, done.out)
    if done.tracker is not None and done.run_id is not None:
        done.tracker.log_table(done.run_id, result.records(), "verify.csv")
        done.tracker.log_metrics(done.run_id, result.metrics())
    return result


def _live_workload(stream: Stream, s: AdviseSettings, out: Path) -> str:
    """The ``trace:`` spec a live run replays: the user's CSV / JSON-lines file itself
    when it has no bad row, else the valid events written to ``<out>/stream.csv``."""
    plain = s.trace is not None and not stream.bad_rows and s.records is None
    if plain and s.trace is not None and trace_format(s.trace, s.format) in ("csv", "jsonl"):
        return f"trace:{os.path.abspath(s.trace)}"
    return f"trace:{write_trace_csv(stream, out / 'stream.csv', len(stream))}"
