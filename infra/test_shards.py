"""The whole pytest suite as two pytest processes side by side (``bash infra/test.sh``).

A live run keeps these 2 cores about 70 % busy: the rest is waiting (a JVM starting, a
poll for an event, a paced input). Two shards of about equal length run at once, each
with its own session services (broker, route host, Airflow) under its own ``--basetemp``:

1. shard A: the Airflow tests (browser, DAGs, the Airflow REST and stop tests: they share
   one Airflow standalone), the crash matrix and the unit tests; shard B: all the rest of
   ``tests/`` (``--ignore`` of shard A's paths, so a new folder lands in B);
2. each shard's lines are printed as they come, prefixed ``[A]`` / ``[B]``;
3. on SIGINT / SIGTERM both shards get SIGTERM (their fixtures tear down: root conftest);
4. a JUnit path asked for in ``$PYTEST_ADDOPTS`` gets both shards' reports merged;
5. the exit code is 0 only if both shards' are. Measurements: docs/testing.md.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARD_A = (
    "tests/browser",
    "tests/dags",
    "tests/integration/test_airflow_rest.py",
    "tests/integration/test_airflow_stop.py",
    "tests/integration/crash",
    "tests/unit",
)
"""Shard A's paths, in order: the Airflow users first (one standalone, stopped after its
last user), then the crash matrix, then the pure unit tests."""


def shard_args() -> dict[str, list[str]]:
    """Step 1: each shard's pytest arguments (paths; shard B ignores shard A's)."""
    missing = [p for p in SHARD_A if not (ROOT / p).exists()]
    if missing:
        raise SystemExit(f"test_shards: shard A names paths that do not exist: {missing}")
    return {"A": list(SHARD_A), "B": ["tests", *(f"--ignore={p}" for p in SHARD_A)]}


def requested_junit(addopts: str) -> str | None:
    """The ``--junitxml`` / ``--junit-xml`` path in ``$PYTEST_ADDOPTS``, if any."""
    words = shlex.split(addopts)
    for i, w in enumerate(words):
        for flag in ("--junitxml", "--junit-xml"):
            if w == flag and i + 1 < len(words):
                return words[i + 1]
            if w.startswith(flag + "="):
                return w.split("=", 1)[1]
    return None


def merge_junit(parts: list[Path], out: Path) -> None:
    """Step 4: one ``<testsuites>`` holding every shard's suites (a missing part is skipped)."""
    root = ET.Element("testsuites")
    for part in parts:
        if not part.exists():
            continue
        tree = ET.parse(part).getroot()
        suites = [tree] if tree.tag == "testsuite" else list(tree)
        root.extend(suites)
    out.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(out, encoding="utf-8", xml_declaration=True)


def _pump(name: str, stream: object, lock: threading.Lock) -> None:
    """Step 2: copy a shard's lines to our stdout with its prefix."""
    for line in iter(stream.readline, ""):  # type: ignore[attr-defined]
        with lock:
            sys.stdout.write(f"[{name}] {line}")
            sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--python", default=sys.executable, help="the venv's python")
    args = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="skewlab-shards-"))
    junit_out = requested_junit(os.environ.get("PYTEST_ADDOPTS", ""))
    procs: dict[str, subprocess.Popen[str]] = {}
    lock = threading.Lock()
    pumps = []
    for name, paths in shard_args().items():
        cmd = [args.python, "-m", "pytest", *paths, f"--basetemp={work / name}",
               f"--junitxml={work / f'junit-{name}.xml'}"]  # fmt: skip
        print(f"[{name}] {shlex.join(cmd)}", flush=True)
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        p = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, bufsize=1, env=env)  # fmt: skip
        procs[name] = p
        t = threading.Thread(target=_pump, args=(name, p.stdout, lock), daemon=True)
        t.start()
        pumps.append(t)

    def stop(signum: int, frame: object) -> None:  # step 3
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    codes = {name: p.wait() for name, p in procs.items()}
    for t in pumps:
        t.join(timeout=10)
    if junit_out:
        merge_junit([work / f"junit-{n}.xml" for n in procs], Path(junit_out))
    print("test_shards: " + ", ".join(f"shard {n} exit {c}" for n, c in codes.items()), flush=True)
    bad = [c for c in codes.values() if c != 0]
    if bad:
        print(f"test_shards: the shards' tmp dirs are kept in {work}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return bad[0] if bad else 0  # step 5


if __name__ == "__main__":
    sys.exit(main())
