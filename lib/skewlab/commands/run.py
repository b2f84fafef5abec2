"""``skewlab run``: one live experiment on the embedded stack (the main job).

Starts what is not running (the embedded broker, and the route host: one warm Spark session
that runs each run's route query, :func:`~skewlab.commands.services.start_route_host`; both
stay up for the next run until ``skewlab down``), runs produce + the Spark route job + W
workers + aggregate (optionally with the rebalancer loop or the scale-out state manager, or
once per strategy with ``--compare``), prints one summary table and logs one MLflow run per
run. Exit 1 when a run is not exact or its data-quality check failed (:func:`exit_code`).
Example and what each mode adds to the summary: docs/cli.md, "skewlab run".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from typing import TYPE_CHECKING, Any

from skewlab.commands._args import add_flag, flag_values, names
from skewlab.commands.services import find_mlflow_ui, start_route_host
from skewlab.envsettings import env_settings
from skewlab.errors import ConfigError
from skewlab.grouping import GROUPINGS, make_grouping
from skewlab.io.run_links import MLFLOW_UI_DEFAULT, serve_hint
from skewlab.io.tracking import TrackingSettings
from skewlab.live.driver.handle import HandleError, RunHandle
from skewlab.live.driver.lifecycle import Interrupted, failure_reason, signals_as_interrupts
from skewlab.live.driver.preflight import check_run_size
from skewlab.live.driver.route_host import HostDir
from skewlab.registry import normalize, resolve
from skewlab.report.table import format_table
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings
from skewlab.services import get_service
from skewlab.services.datadir import resolve_home
from skewlab.spec import DKG_TIMINGS, SETTINGS

if TYPE_CHECKING:
    from skewlab.services.process import ServiceStatus

HELP = "run a live experiment: Kafka -> Spark route job -> workers -> Delta, exact, in MLflow"

EPILOG = (
    "exit status: 0 when every run is exact and passed its data-quality check (or the check "
    "was skipped); 1 when a run is not exact or its data-quality check failed; "
    "2 on a bad flag."
)


def configure(parser: argparse.ArgumentParser) -> None:
    """Add ``run``'s options to its subparser: one flag per CLI setting of :data:`SETTINGS`."""
    parser.epilog = EPILOG
    for s in SETTINGS:
        add_flag(parser, s)
        if s.name == "strategy":
            parser.add_argument(
                "--compare",
                type=names,
                metavar="A,B,...",
                help="comma-separated groupings to run instead of --strategy, each once",
            )
    parser.add_argument("--json", action="store_true", help="print the summaries as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--allow-large",
        action="store_true",
        help="run even when the planned events need more than 80%% of the data dir's free disk",
    )


def settings_list(args: argparse.Namespace) -> list[Any]:
    """One validated :class:`ExperimentSettings` per strategy (errors name the flag)."""
    strategies = args.compare or (args.strategy,)
    if len(set(strategies)) != len(strategies):
        raise ConfigError(f"a strategy is listed twice in {','.join(strategies)}")
    fields = flag_values(args, SETTINGS)
    for name in strategies:
        check_strategy_params(name, fields["strategy_params"], fields["workers"])
    return [ExperimentSettings(**{**fields, "strategy": name}) for name in strategies]


def check_strategy_params(strategy: str, params: dict[str, Any], workers: int) -> None:
    """Refuse ``--strategy-param`` names grouping ``strategy`` does not take (``workers``
    is ``--workers``'s) and values its config refuses, in one line naming the flag."""
    cls = resolve(GROUPINGS, strategy, "grouping")
    takes = [f.name for f in dataclasses.fields(cls) if f.name != "workers"]
    bad = sorted(set(params) - set(takes))
    flag = "argument --strategy-param"
    if bad:
        what = f"takes {', '.join(takes)}" if takes else "takes no parameters"
        also = "; set the worker count with --workers" if "workers" in bad else ""
        raise ConfigError(
            f"{flag}: grouping {normalize(strategy)} {what}; got {', '.join(bad)}{also}"
        )
    try:
        make_grouping(strategy, workers=workers, **params)
    except ConfigError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


COLUMNS = (
    ("strategy", lambda r: r.strategy),
    ("events", lambda r: f"{r.events:,}"),
    ("throughput/s", lambda r: f"{r.throughput:,.0f}"),
    ("STD_DEV%", lambda r: f"{r.std_dev:.2f}"),
    ("DIST_COST", lambda r: f"{r.dist_cost:.2f}"),
    ("imbScore%", lambda r: f"{r.imb_score:.1f}"),
    ("p50 ms", lambda r: f"{r.p50_ms:.1f}"),
    ("p99 ms", lambda r: f"{r.p99_ms:.1f}"),
    ("quarantined", lambda r: f"{r.quarantined:,}"),
    ("exact", lambda r: "yes" if r.exact else "NO"),
)


def run(args: argparse.Namespace) -> int:
    """Validate all settings first, then run each experiment and report."""
    from skewlab.live.driver.run import run_experiment
    from skewlab.live.report.watch import ProgressLine

    todo = settings_list(args)
    for s in todo:  # before any service starts
        for warning in check_run_size(s, allow_large=args.allow_large):
            print(f"skewlab run: warning: {warning}", file=sys.stderr)
    broker_before = _embedded_broker(todo[0])
    host = start_route_host(todo[0].home)  # warms up while the broker starts
    summaries = []
    try:
        for s in todo:
            prog = None if args.no_progress else ProgressLine(s.strategy, sys.stderr)
            try:
                with signals_as_interrupts():
                    say = None if prog is None else prog.say
                    summaries.append(run_experiment(s, progress=prog, say=say))
            except Interrupted as exc:
                print(f"skewlab run: {failure_reason(exc)}; run {s.strategy} recorded as failed",
                      file=sys.stderr)  # fmt: skip
                return 128 + exc.signum
            finally:
                if prog is not None:
                    prog.close()
    finally:  # also when a run failed: the broker it started outlives it
        if broker_before is not None:
            note = still_running_note(todo[0].home, broker_before, _embedded_broker(todo[0]))
            if note:
                print(note, file=sys.stderr)
        if host is not None and host[1] and host[0].alive():
            print(host_note(todo[0].home, host[0]), file=sys.stderr)
    report(summaries, todo[0].home, as_json=args.json)
    return exit_code(summaries)


def report(summaries: list[Any], home: str, as_json: bool = False) -> None:
    """Print the summaries: one table row per run, then each run's verdict, start-up,
    data quality, strategy notes, plots and MLflow run (or all of it as JSON)."""
    if as_json:
        print(json.dumps([r.row() for r in summaries], indent=2, default=str))
    else:
        print(
            format_table([c for c, _ in COLUMNS], [[f(r) for _, f in COLUMNS] for r in summaries])
        )
        for r in summaries:
            print(f"{r.run_id}: {r.exactness}")
            for hang in r.hangs:
                print(f"  hung: {hang}")
            line = _startup(home, r.run_id)
            if line:
                print(f"  {line}")
            print(f"  data quality: {r.quality}")
            if r.data_docs:
                print(f"  data docs: {r.data_docs}")
            if r.strategy in ("dkg", "dynamic-key"):
                timing = (
                    "the seed's timings"
                    if r.time_scale == 1.0
                    else f"timings scaled x{r.time_scale:.3g} to the run ("
                    + ", ".join(f"{k} {v * r.time_scale:.3g} s" for k, v in DKG_TIMINGS.items())
                    + ")"
                )
                print(f"  dkg: {r.keys_over_2} keys held pools above 2 workers; {timing}")
            for line in r.quality_failures:
                print(f"    {line}")
            if r.rebalance:
                print(
                    f"  rebalance {r.rebalance}: {r.rebalances} rebalances, {r.keys_moved} keys "
                    f"moved, {r.handoffs} hand-offs ({r.tuples_migrated:,} tuples, "
                    f"{r.bytes_migrated:,} bytes); imbScore {r.imb_after:.1f}% after vs KEY "
                    f"{r.imb_key_after:.1f}% (whole run {r.imb_score:.1f}% vs {r.imb_key:.1f}%); "
                    f"order violations {r.order_violations}; key state "
                    f"{'exact' if r.state_exact else 'NOT EXACT'}"
                )
            if r.scale_out:
                print(
                    f"  scale-out {r.scale_out}: {r.scale_events} events, up to {r.max_running} "
                    f"instances, {r.instance_seconds:.0f} instance-s, fairness {r.fairness:.2f}, "
                    f"pause {r.pause_s:.2f} s (old instance drained {r.drain_s:.1f} s), "
                    f"extra p99 {r.extra_p99_ms:.0f} ms, "
                    f"{r.checkpoints} checkpoints, {r.keys_moved} keys moved; key state "
                    f"{'exact' if r.state_exact else 'NOT EXACT'}"
                )
                for e in r.scale_log:
                    print(
                        f"    t+{e.get('t_rel', 0):.0f}s worker {e['group']}: {e['from']} -> "
                        f"{e['to']}, pause {e.get('pause_s', float('nan')):.2f} s, processed "
                        f"{e.get('throughput_before', float('nan')):.0f}/s before the alarm, "
                        f"{e.get('throughput_during', float('nan')):.0f}/s during"
                    )
            for p in r.plots:
                print(f"  plot: {p}")
            if r.mlflow_run_id:
                url, hint = mlflow_link(home, r.mlflow_url)
                where = f" ({url})" if url else ""
                print(f"  mlflow run: {r.mlflow_run_id}{where}")
                if hint:
                    print(f"    {hint}")


def mlflow_link(home: str, url: str | None) -> tuple[str | None, str | None]:
    """The run's MLflow page as a user can open it now, and how to start the UI when none
    serves the run's store: an ``mlflow ui`` already running on the store (any port) gives
    its own address; a tracking server needs nothing."""
    settings = TrackingSettings.for_runs(home)
    hint = serve_hint(settings.tracking_uri)
    store = settings.sqlite_path
    if url is None or hint is None or store is None:
        return url, hint
    running = find_mlflow_ui(store)
    if running:
        return url.replace(MLFLOW_UI_DEFAULT, running[0].url.rstrip("/"), 1), None
    return url, hint


def _startup(home: str, run_id: str) -> str | None:
    """The run's ``start-up:`` line from its handle (None if it has no record)."""
    from skewlab.live.driver.startup import startup_line

    try:
        h = RunHandle.load(RunDir.at(resolve_home(home), run_id).path)
    except HandleError:
        return None
    restarts = ", ".join(f"{k} x{v}" for k, v in sorted(h.restarts.items()) if v)
    line = startup_line(h.startup, h.spark_ui)
    if restarts:
        line = f"{line or 'start-up: -'}\n  restarts: {restarts}"
    return line


def _embedded_broker(s: Any) -> ServiceStatus | None:
    """The embedded broker's status under the run's data dir; None when the run uses
    another Kafka (``--bootstrap`` or ``$SKEWLAB_KAFKA_BOOTSTRAP``)."""
    if s.bootstrap or env_settings().kafka_bootstrap:
        return None
    return get_service("broker", s.home).status()


def still_running_note(home: str, before: ServiceStatus, after: ServiceStatus | None) -> str | None:
    """One line saying the embedded broker this command started is still running (the
    next run reuses it) and how to stop it; None when it was already running before the
    run (the user's) or is not running now."""
    if before.running or after is None or not after.running or after.state is None:
        return None
    st = after.state
    return (
        f"skewlab run: the embedded broker started for this run is still running "
        f"(pid {st.pid}, {st.url}); the next run reuses it; stop it with: "
        f"skewlab down{_home_flag(home)}"
    )


def host_note(home: str, d: HostDir) -> str:
    """One line saying the route host this command started is still running, and how to
    stop it (the next run's route query starts on its warm session)."""
    rec = d.host_record()
    pid = f"pid {rec.pid}, " if rec is not None else ""
    return (
        f"skewlab run: the route host started for this run is still running ({pid}{d.path}); "
        f"the next run's route query starts on it; stop it with: skewlab down{_home_flag(home)}"
    )


def _home_flag(home: str) -> str:
    """`` --home DIR`` when ``home`` is not the default data dir, else empty."""
    root = resolve_home(home)
    return f" --home {shlex.quote(str(root))}" if root != resolve_home(None) else ""


def exit_code(summaries: list[Any]) -> int:
    """0 when every run is exact (events and key state) and its data-quality check did not
    fail (``passed`` or ``skipped``); else 1 (see :data:`EPILOG`)."""
    ok = all(r.exact and r.state_exact and r.quality != "failed" for r in summaries)
    return 0 if ok else 1
