"""Events/s through the route job alone (no workers), against the raw consume rate.

Starts the embedded broker (or uses ``--bootstrap``), starts the route job as
its own process (``python -m skewlab.live.mains.route_job``, as a live run does),
waits for ``route.ready``, produces ``--events`` events of a Zipf workload as
fast as the client can, and times until every event is in ``routed``. The
raw consume rate of the same events topic is measured in the same run.
``--profile DIR`` records the route job (and its Spark Python workers) with
py-spy into ``DIR/route.txt`` (collapsed stacks), if py-spy is installed.

    .venv/bin/python bench/bench_route.py [--events 200000] [--strategy key] [--profile DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _common import drop_scratch, keep_flag, raw_consume, row, say, scratch_dir
from skewlab.io.kafka import KafkaSettings, connect
from skewlab.live.driver.producer import ProduceSettings, produce
from skewlab.rundir import RunDir
from skewlab.services import get_service
from skewlab.spark.route import RouteSettings
from skewlab.workload.spec import parse_workload


def route_latency_ms(client: object, topic: str) -> list[float]:
    """p50 / p90 / p99 of (routed record's Kafka timestamp - the event's ts), in ms."""
    lat = []
    for p, end in client.end_offsets(topic).items():  # type: ignore[attr-defined]
        for r in client.fetch(topic, p, 0, end):  # type: ignore[attr-defined]
            lat.append(r.timestamp_ms - 1000 * json.loads(r.value)["ts"])
    return [float(x) for x in np.percentile(lat, [50, 90, 99])] if lat else [float("nan")] * 3


def routed_count(client: object, topic: str) -> int:
    return sum(client.end_offsets(topic).values())  # type: ignore[attr-defined]


def _role(cmd: list[str]) -> str:
    """A process of the route job's tree by what it runs."""
    text = " ".join(cmd)
    for needle, role in (
        ("java", "JVM (Spark)"),
        ("pyspark.worker", "Python workers (decode, splitters, records for the sink)"),
        ("python_streaming_source_runner", "source planner (latestOffset)"),
        ("plan_data_source_read", "source planner (partitions)"),
        ("route_job", "driver (foreachBatch sink: produce, Delta)"),
    ):
        if needle in text:
            return role
    return "other Python (data source look-up)"


def tree_cpu(pid: int) -> dict[str, float]:
    """CPU seconds (user + system) of process ``pid`` and every live descendant by role
    (:func:`_role`): the JVM, its Python workers and planners. Load-independent, unlike
    wall time (a process that exited in between is not counted)."""
    import psutil

    out: dict[str, float] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return out
    for p in procs:
        try:
            t = p.cpu_times()
            role = _role(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        out[role] = out.get(role, 0.0) + t.user + t.system
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--strategy", default="key")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--trigger", type=float, default=1.0)
    ap.add_argument("--max-events-per-trigger", type=int, default=None)
    ap.add_argument("--bootstrap", default=None)
    ap.add_argument("--profile", default=None, help="py-spy output dir")
    ap.add_argument("--rate", type=float, default=1e9, help="offered events/s (default: flat out)")
    ap.add_argument("--tasks", type=int, default=None, help="RouteSettings.tasks")
    ap.add_argument("--settle", type=float, default=0.0, help="s to wait after route.ready")
    keep_flag(ap)
    args = ap.parse_args()
    home = Path(scratch_dir("skewlab-bench-route-"))
    broker = get_service("broker", str(home)) if args.bootstrap is None else None
    try:
        bench(args, home, args.bootstrap if broker is None else broker.start().url)
    finally:
        if broker is not None:
            broker.stop()
        drop_scratch(str(home), args.keep)


def bench(args: argparse.Namespace, home: Path, bootstrap: str) -> None:
    """The route job alone on a run of its own in ``home``: its rate, latency and CPU."""
    run_id = f"bench-{int(time.time())}"
    files = RunDir(home / "runs" / run_id)
    files.path.mkdir(parents=True)
    client = connect(KafkaSettings(bootstrap))
    events_topic, routed_topic = f"events-{run_id}", f"routed-{run_id}"
    client.create_topic(events_topic, args.partitions)
    client.create_topic(routed_topic, args.workers)
    s = RouteSettings(
        run_id=run_id,
        bootstrap=bootstrap,
        events_topic=events_topic,
        routed_topic=routed_topic,
        workers=args.workers,
        strategy=args.strategy,
        delta_root=str(home / "delta"),
        run_dir=str(files.path),
        trigger_s=args.trigger,
        max_events_per_trigger=args.max_events_per_trigger,
        **({"tasks": args.tasks} if args.tasks else {}),
    )
    files.route_settings.write_text(s.to_json())
    cmd = [sys.executable, "-m", "skewlab.live.mains.route_job", str(files.route_settings)]
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        out = str(Path(args.profile) / "route.txt")
        cmd = [spy, "record", "--subprocesses", "-r", "50", "-f", "raw", "-o", out, "--", *cmd]
    log = open(files.log("route"), "wb")  # noqa: SIM115
    t_launch = time.time()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    try:
        while not files.route_ready.exists():
            if proc.poll() is not None:
                raise SystemExit(f"route job exited {proc.returncode}: see {files.log('route')}")
            time.sleep(0.1)
        t_ready = time.time()
        ready = files.route_ready.read_text()
        time.sleep(args.settle)
        cpu0 = tree_cpu(proc.pid)
        t0 = time.time()
        rep = produce(
            client,
            parse_workload("zipf:s=1.1,v=2.72", seed=1),
            ProduceSettings(events_topic, args.partitions, args.events, rate=args.rate),
        )
        t_produced = time.time()
        while routed_count(client, routed_topic) < args.events:
            if proc.poll() is not None:
                raise SystemExit(f"route job exited {proc.returncode}: see {files.log('route')}")
            time.sleep(0.05)
        t_done = time.time()
        cpu1 = tree_cpu(proc.pid)
        by_role = {r: c - cpu0.get(r, 0.0) for r, c in cpu1.items()}
        cpu = sum(by_role.values())
        files.route_stop.touch()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
        log.close()
    n_raw, s_raw = raw_consume(bootstrap, events_topic)
    raw = n_raw / s_raw
    lat = route_latency_ms(client, routed_topic)
    rate = args.events / (t_done - t0)
    say(f"route job alone: {args.strategy}, {args.events:,} events, {args.partitions} partitions")
    say(f"start-up: launch -> ready {t_ready - t_launch:.1f} s; route.ready: {ready[:300]}")
    say(f"produce: {rep.events:,} in {t_produced - t0:.2f} s")
    say(row("run", "events/s", "x raw"))
    say(row("raw consume", f"{raw:,.0f}", "1.000"))
    say(row("route job", f"{rate:,.0f}", f"{rate / raw:.3f}"))
    say(
        f"route latency (routed record time - event ts), ms: p50 {lat[0]:,.0f}  "
        f"p90 {lat[1]:,.0f}  p99 {lat[2]:,.0f}  (trigger {args.trigger} s, "
        f"max/trigger {args.max_events_per_trigger}, offered {args.rate:,.0f}/s, "
        f"tasks {s.tasks})"
    )
    say(
        f"route job CPU: {cpu:.1f} s for {args.events:,} events = "
        f"{cpu / args.events * 1e6:.0f} us/event (JVM + Python workers; load-independent)"
    )
    for r, c in sorted(by_role.items(), key=lambda kv: -kv[1]):
        say(f"  {r:50s} {c:6.1f} s  {c / args.events * 1e6:5.0f} us/event")
    say(f"load average: {os.getloadavg()[0]:.1f}")
    client.delete_topic(events_topic, missing_ok=True)
    client.delete_topic(routed_topic, missing_ok=True)
    client.close()


if __name__ == "__main__":
    main()
