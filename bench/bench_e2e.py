"""Sustained end-to-end events/s of the live pipeline, against the raw broker and Spark.

Targets (issue 31): sustained exact events/s at KEY and DKG >= 0.30x the raw
consume rate measured in the same run, and >= 0.5x Spark's own minimal Kafka ->
Kafka job on the same Spark and broker; p99 end-to-end latency <= 1 s at half the
sustained rate. Baselines, both measured in this run before the live runs:

- raw consume: the default client's consume rate over the same number of events,
  read as columns (``fetch_range``, the path the workers use): the machine's limit;
- Spark passthrough (``_passthrough.py``, a process of its own): ``format("kafka")``
  in, Spark's Kafka sink out with a ``partition`` column, nothing else, run like the
  route query: a stream with the same trigger and batch cap, checkpoint on the local
  disk, offered ``--rate`` for ``--duration`` by the live runs' producer; its sustained
  rate (events / (last output - first sent)) is the peer of the ratio. Beside it, the
  old baseline: one ``availableNow`` batch over the same number of records
  (``--no-batch-baseline`` skips it).

Runs, each a whole live run (embedded broker, Spark route job, W workers,
Delta, exactness check; MLflow off; the producer starts once the route job
has finished its warm-up micro-batch):

1. KEY and DKG offered ``--rate`` (above what the pipeline sustains):
   ``throughput`` is verified events / (last processed - first produced);
2. KEY offered half of the lower sustained rate of 1.: its p50 / p99 (sent -> processed
   by a worker), and the route job's share of it (sent -> the routed record's
   timestamp, set by Spark's Kafka producer, from the run's ``routed`` topic); then the
   passthrough run as a stream at the same rate (``_passthrough.py --rate``): its
   p50 / p99 are the floor any job on this Spark trigger and broker pays. Where the
   latency comes from: the route job's share and the passthrough's per second of send time
   (with how many of the run's slowest 1 % each second holds), the run's end-to-end p50 /
   p99 per window of send time, and the route query's batches and Delta rounds (its logs).
   ``--half-rate R`` runs this step alone, at R offered, after a short run that creates the
   workers' tables and warms the route host, as the whole bench's first two runs do.

Each run starts a route job of its own (a fresh JVM), unless ``--route-host``: then every
run's route query runs on one warm route host, as ``skewlab run`` does on one machine.

    .venv/bin/python bench/bench_e2e.py [--rate 100000] [--duration 10] [--workers 4]
    .venv/bin/python bench/bench_e2e.py --half-rate 16000 --half-duration 10 --route-host
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, raw_consume, row, say, scratch_dir, slice_lines, slices
from _passthrough import STREAM_IN, STREAM_OUT, out_stamps
from cpu_profile import CpuSampler, budget, run_cores, table
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.live.driver.route_host import ROUTE_HOST_ENV, launch_host, stop_host, wait_ready
from skewlab.live.driver.run import run_experiment
from skewlab.runsettings import ExperimentSettings
from skewlab.services import get_service
from skewlab.spec import DEFAULTS

TARGET_RATIO = 0.30
TARGET_PASSTHROUGH = 0.5
TARGET_P99_MS = 1_000.0
CORES = os.cpu_count() or 2  # the budget is for the cores this machine has
WIDTHS = (22, 12, 8, 12, 16, 18)
WARM_S = 4.0
"""``--half-rate``: a KEY run of this many s first (the whole bench's half run is its third)."""
HEAD = ("run", "events/s", "x raw", "x passthru", "p50 / p99 ms", "exact / events")


def raw_consume_rate(bootstrap: str, n: int, partitions: int) -> float:
    c = connect(KafkaSettings(bootstrap))
    topic = f"bench-raw-{int(time.time())}"
    c.create_topic(topic, partitions)
    value = b"x" * 150
    for i in range(n):
        c.produce(topic, value, partition=i % partitions)
    c.flush()
    got, secs = raw_consume(bootstrap, topic)
    c.delete_topic(topic)
    c.close()
    return got / secs


def route_latency(bootstrap: str, home: str, run_id: str, workers: int) -> tuple[Any, Any]:
    """``(send times s, ms)`` of a kept run's routed events: the routed record's timestamp -
    the event's send time (the route job's share of the run's latency); its topics go."""
    with open(os.path.join(home, "runs", run_id, "handle.json")) as f:
        handle = json.load(f)
    c = connect(KafkaSettings(bootstrap))
    try:
        stamps, sent = out_stamps(c, handle["routed_topic"], workers, routed=True)
        for topic in (handle["events_topic"], handle["routed_topic"]):
            c.delete_topic(topic)
    finally:
        c.close()
    return sent, (stamps - sent) * 1000.0


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) (.*)$")
SINK_LINE = re.compile(r"route_sink batch (\d+): routed (\d+).*job ([\d.]+) s")
PROGRESS_LINE = re.compile(r"progress batch (\d+): (\d+) rows, durationMs (\{.*\})")
ROUND_LINE = re.compile(r"writes delta: batches (\d+)-(\d+) \((\d+)\) .* in ([\d.]+) s")


def log_events(path: str, t_from: float, t_to: float) -> list[tuple[float, str]]:
    """``(epoch s, text)`` of the lines of the log at ``path`` written in ``[t_from, t_to]``."""
    got = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LOG_LINE.match(line)
            if m:
                t = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S"))
                t += int(m.group(2)) / 1000.0
                if t_from <= t <= t_to:
                    got.append((t, m.group(3)))
    return got


def batch_lines(home: str, run_id: str, t0: float, t1: float, host: str | None) -> list[str]:
    """The route query's micro-batches of a run (from its route log: when each batch's
    sink ended, s since ``t0``; its rows, sink job and ``triggerExecution``) and the Delta
    rounds beside them (the host's log, between ``t0`` and ``t1``)."""
    run_log = os.path.join(home, "runs", run_id, "route.log")
    lines = log_events(run_log, t0 - 60, t1 + 60)
    trig = {}
    for _, text in lines:
        if m := PROGRESS_LINE.search(text):
            trig[int(m.group(1))] = json.loads(m.group(3)).get("triggerExecution", 0)
    out = []
    for t, text in lines:
        if m := SINK_LINE.search(text):
            b = int(m.group(1))
            out.append(
                f"batch {b:>3}: sink ended at {t - t0:6.2f} s, {int(m.group(2)):>6,} events, "
                f"job {float(m.group(3)):.2f} s, trigger {trig.get(b, 0) / 1000:.2f} s"
            )
    log_of_rounds = os.path.join(host, "host.log") if host else run_log
    for t, text in log_events(log_of_rounds, t0 - 5, t1 + 5):
        if m := ROUND_LINE.search(text):
            secs = float(m.group(4))
            out.append(
                f"Delta round: batches {m.group(1)}-{m.group(2)}, {secs:.2f} s, "
                f"{t - secs - t0:.2f} -> {t - t0:.2f} s"
            )
    return out


def passthrough(bootstrap: str, partitions: int, workers: int, *mode: str, watch: int = 0) -> dict:
    """What ``_passthrough.py`` prints for Spark's minimal Kafka -> Kafka job in ``mode``:
    ``--records N`` (one batch) or ``--rate R --duration D ...`` (a stream). ``watch``: the
    stream's event count; then also ``t0`` / ``t1``, the wall times its first event reached
    the input topic and its output held them all (polled while it runs: its CPU window)."""
    script = os.path.join(os.path.dirname(__file__), "_passthrough.py")
    argv = [sys.executable, script, bootstrap, "--partitions", str(partitions)]
    argv += ["--workers", str(workers), *mode]
    with tempfile.TemporaryFile("w+") as err:  # Spark's log, shown only if it fails
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True)
        window = stream_window(bootstrap, watch, proc) if watch else {}
        out = proc.communicate()[0]
        if proc.returncode:
            err.seek(0)
            raise subprocess.CalledProcessError(proc.returncode, argv, out, err.read())
    got: dict = json.loads(out.strip().splitlines()[-1])
    return {**got, **window}


def stream_window(bootstrap: str, n: int, proc: subprocess.Popen) -> dict:
    """``{"t0", "t1"}`` of :func:`passthrough`'s ``watch``: its input topic past the probe,
    its output topic at ``n`` events and the probe (empty if ``proc`` ends first)."""
    c = connect(KafkaSettings(bootstrap))
    try:
        src = out = ""
        while not src and proc.poll() is None:
            time.sleep(0.05)
            for topic in c.list_topics():
                if topic.startswith(STREAM_IN):
                    src, out = topic, STREAM_OUT + topic[len(STREAM_IN) :]
        while proc.poll() is None and sum(c.end_offsets(src).values()) <= 1:
            time.sleep(0.02)
        t0 = time.time()
        while proc.poll() is None and sum(c.end_offsets(out).values()) < n + 1:
            time.sleep(0.05)
        return {"t0": t0, "t1": time.time()} if proc.poll() is None else {}
    finally:
        c.close()


PER_SECOND = {
    "route JVM": "route JVM",
    "route py": "route py workers",
    "workers": "workers (all)",
    "broker": "broker (Kafka)",
    "producer": "driver (producer, control)",
    "others": "not this run",
}
"""The columns of :func:`cpu_per_second` and the ``cpu_profile`` class each shows."""


def cpu_per_second(sampler: CpuSampler, t0: float, t1: float) -> list[str]:
    """Cores each process class used per second of a run (``t0`` its first send)."""
    widths = (10,) + (10,) * (len(PER_SECOND) + 1)
    lines = [row("cores at s", *PER_SECOND, "run, all", widths=widths)]
    for i in range(int(np.ceil(t1 - t0))):
        cpu = sampler.window(t0 + i, t0 + i + 1)
        run = run_cores(cpu)
        cpu["workers (all)"] = sum(v for k, v in cpu.items() if k.startswith("worker "))
        cells = (f"{cpu.get(cls, 0.0):.2f}" for cls in PER_SECOND.values())
        lines.append(row(f"{i}", *cells, f"{run:.2f}", widths=widths))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=float, default=100_000)
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--half-duration", type=float, default=20)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--trigger", type=float, default=None, help="trigger_s (default: spec)")
    ap.add_argument("--max-events-per-trigger", type=int, default=None)
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="CPU seconds per process class over each run's sustained phase (cpu_profile.py)",
    )
    ap.add_argument("--pyspy", default=None, help="with --cpu: py-spy stacks of workers here")
    ap.add_argument(
        "--no-batch-baseline",
        dest="batch_baseline",
        action="store_false",
        help="skip the one-batch (availableNow) passthrough over the same records",
    )
    ap.add_argument("--only", default=None, help="one run only: key or dkg at --rate")
    ap.add_argument(
        "--half-rate",
        type=float,
        default=None,
        help="only the half-rate run (and the passthrough stream) at this offered rate",
    )
    ap.add_argument(
        "--steady-after",
        type=float,
        default=2.0,
        help="also the route job's share over events sent after this many s (beside)",
    )
    ap.add_argument(
        "--route-host",
        action="store_true",
        help="every run's route query on one warm route host (as `skewlab run`)",
    )
    keep_flag(ap)
    args = ap.parse_args()
    home = scratch_dir("skewlab-bench-")
    bootstrap = get_service("broker", home).start().url
    port = bootstrap.rsplit(":", 1)[-1]
    sampler = CpuSampler(port, pyspy_dir=args.pyspy).start() if args.cpu else None
    host = os.path.join(home, "route-host") if args.route_host else None
    extra = {}
    if args.trigger is not None:
        extra["trigger_s"] = args.trigger
    if args.max_events_per_trigger is not None:
        extra["max_events_per_trigger"] = args.max_events_per_trigger

    raw = 0.0  # the raw consume rate, measured before the runs
    peer = 0.0  # Spark's passthrough rate, measured before the runs

    def run(strategy: str, rate: float, duration: float, keep_topics: bool = False):
        s = ExperimentSettings(
            strategy=strategy,
            workers=args.workers,
            partitions=args.partitions,
            workload="zipf:s=1.1,v=2.72",
            rate=rate,
            duration_s=duration,
            home=home,
            bootstrap=bootstrap,
            mlflow=False,
            quality=False,
            keep_topics=keep_topics,
            **extra,
        )
        r = run_experiment(s)
        if sampler is not None:  # the sustained phase: first produced -> last processed
            t0 = r.t_first_s
            secs = r.events / max(r.throughput, 1e-9)
            say(f"CPU of {strategy} @ {rate:,.0f}/s over {secs:.1f} s, {r.events:,} events:")
            cpu = sampler.window(t0, t0 + secs)
            for line in table(cpu, r.events, secs):
                say("  " + line)
            if rate == args.rate:  # a sustained run: the budget the target leaves it
                for line in budget(cpu, r.events, raw, TARGET_RATIO, CORES):
                    say("  " + line)
                for text in batch_lines(home, r.run_id, t0, t0 + secs, host):
                    say("    " + text)
                for text in cpu_per_second(sampler, t0, t0 + secs):
                    say("    " + text)
        return r

    pt = functools.partial(passthrough, bootstrap, args.partitions, args.workers)
    stream = ["--trigger", str(extra.get("trigger_s", DEFAULTS["trigger_s"]))]
    if args.max_events_per_trigger is not None:
        stream += ["--max-offsets-per-trigger", str(args.max_events_per_trigger)]

    def start_host() -> None:
        if host is not None:  # started after the baselines: its JVM is not theirs
            d = launch_host(host)
            wait_ready(d)
            os.environ[ROUTE_HOST_ENV] = host
            rec = d.host_record()
            if sampler is not None and rec is not None:
                sampler.hosts.add(rec.pid)
            say(f"route host warm in {host}")
        say(f"live runs: {args.workers} workers, {args.partitions} partitions, data dir {home}")
        say(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores)")

    def line(label: str, r) -> str:
        return row(
            label,
            f"{r.throughput:,.0f}",
            f"{r.throughput / raw:.3f}" if raw else "",
            f"{r.throughput / peer:.3f}" if peer else "",
            f"{r.p50_ms:,.0f} / {r.p99_ms:,.0f}",
            f"{r.exact} / {r.events:,}",
            widths=WIDTHS,
        )

    def half_run(half: float) -> tuple[Any, float, dict]:
        """The half-rate run and the passthrough stream at its rate, where their latency
        comes from (per second of send time; the route query's batches and Delta rounds)."""
        r = run("key", half, args.half_duration, keep_topics=True)
        say(line(f"key @ {half:,.0f}/s", r))
        sent, ms = route_latency(bootstrap, home, r.run_id, args.workers)
        rp50, rp99 = (float(v) for v in np.percentile(ms, [50, 99]))
        say(row("  route job's share", "", "", "", f"{rp50:,.0f} / {rp99:,.0f}", widths=WIDTHS))
        later = ms[sent >= sent.min() + args.steady_after]
        if later.size:
            sp50, sp99 = np.percentile(later, [50, 99])
            label = f"  ditto, sent after {args.steady_after:g} s"
            cells = ("", "", "", f"{sp50:,.0f} / {sp99:,.0f}", "(first s excluded)")
            say(row(label, *cells, widths=WIDTHS))
        say("  end to end per window of send time (the workers' latency table):")
        for w, lat, loads in zip(r.window_starts_ms, r.window_latency_ms, r.window_loads):
            at = w / 1000.0 - r.t_first_s  # windows of event time, on multiples of window_s
            span = f"[{at:5.1f}, {at + r.window_s:5.1f}) s"
            p50, p99 = lat
            say(f"    {span}: {sum(loads):>7,} events, p50 / p99 {p50:,.0f} / {p99:,.0f} ms")
        say("  the route job's share per second of send time:")
        for text in slice_lines(slices(sent, ms, rp99)):
            say("    " + text)
        t_end = r.t_first_s + r.events / max(r.throughput, 1e-9)
        for text in batch_lines(home, r.run_id, r.t_first_s, t_end, host):
            say("    " + text)
        if sampler is not None:
            for text in cpu_per_second(sampler, r.t_first_s, t_end):
                say("    " + text)
        low = pt("--rate", str(half), "--duration", str(args.half_duration), *stream)
        p50, p99 = low["p50_ms"], low["p99_ms"]
        say(row(f"passthru @ {half:,.0f}/s", "", "", "", f"{p50:,.0f} / {p99:,.0f}", widths=WIDTHS))
        say("  the passthrough's per second of send time:")
        for text in slice_lines(low["slices"]):
            say("    " + text)
        return r, rp99, low

    def half_lines(r, rp99: float, low: dict) -> None:
        say(f"p99 at half the sustained rate: {r.p99_ms:,.0f} ms (target <= {TARGET_P99_MS:,.0f})")
        say(f"the route job's share of it (sent -> routed record): p99 {rp99:,.0f} ms")
        say(
            f"Spark passthrough's p99 at that rate (the floor of a micro-batch job): "
            f"{low['p99_ms']:,.0f} ms"
        )

    try:
        if args.half_rate is not None:  # the half-rate run alone, at the rate given
            start_host()
            warm = run("key", args.half_rate, WARM_S)  # as in the whole bench: tables there,
            say(f"warm-up run: {warm.events:,} events, p99 {warm.p99_ms:,.0f} ms")  # JVM warm
            say(row(*HEAD, widths=WIDTHS))
            half_lines(*half_run(args.half_rate))
            say(f"load average at end: {os.getloadavg()[0]:.1f}")
            return
        n = int(args.rate * args.duration)
        raw = raw_consume_rate(bootstrap, min(n, 1_000_000), args.partitions)
        offered = ["--rate", str(args.rate), "--duration", str(args.duration)]
        peer_run = pt(*offered, *stream, watch=n if sampler is not None else 0)
        peer = peer_run["records"] / peer_run["seconds"]  # like the route runs: same stream, load
        if sampler is not None and "t1" in peer_run:  # Spark's JVM counts as "route JVM"
            secs = peer_run["t1"] - peer_run["t0"]
            say(f"CPU of passthru @ {args.rate:,.0f}/s over {secs:.1f} s, {n:,} events:")
            for text in table(sampler.window(peer_run["t0"], peer_run["t1"]), n, secs):
                say("  " + text)
        once = pt("--records", str(min(n, 1_000_000))) if args.batch_baseline else None
        start_host()
        say(row(*HEAD, widths=WIDTHS))
        say(row("raw consume", f"{raw:,.0f}", "1.000", "", widths=WIDTHS))
        say(
            row(
                f"passthru @ {args.rate:,.0f}/s",
                f"{peer:,.0f}",
                f"{peer / raw:.3f}",
                "1.000",
                f"{peer_run['p50_ms']:,.0f} / {peer_run['p99_ms']:,.0f}",
                f"- / {peer_run['records']:,}",
                widths=WIDTHS,
            )
        )
        if once is not None:
            v = once["records"] / once["seconds"]
            head = "passthru 1 batch"
            say(row(head, f"{v:,.0f}", f"{v / raw:.3f}", f"{v / peer:.3f}", "", widths=WIDTHS))

        sustained = {}
        for name in (args.only,) if args.only else ("key", "dkg"):
            r = run(name, args.rate, args.duration)
            sustained[name] = r.throughput
            say(line(f"{name} @ {args.rate:,.0f}/s", r))
        if args.only:
            return
        r, rp99, low = half_run(0.5 * min(sustained.values()))
        for name, v in sustained.items():
            say(f"{name}: sustained {v / raw:.3f}x raw (target >= {TARGET_RATIO:.2f}x)")
            say(
                f"{name}: sustained {v / peer:.3f}x Spark passthrough "
                f"(target >= {TARGET_PASSTHROUGH:.2f}x)"
            )
            if once is not None:
                one = v / (once["records"] / once["seconds"])
                say(f"{name}: sustained {one:.3f}x the one-batch passthrough (the old baseline)")
        half_lines(r, rp99, low)
        say(f"Spark passthrough's p99 at {args.rate:,.0f}/s: {peer_run['p99_ms']:,.0f} ms")
        say(f"load average at end: {os.getloadavg()[0]:.1f}")
    finally:
        if sampler is not None:
            sampler.stop()
        if host is not None:
            stop_host(host)
        get_service("broker", home).stop()
        drop_scratch(home, args.keep)


if __name__ == "__main__":
    main()
