"""The cluster's MLflow server stopped mid-run: the run goes on and says what it did not log.

``skewlab cluster up`` under a fresh data dir (the fixture of test_cluster.py, one cluster
for this module); a ``skewlab run`` on its master logs into the cluster's MLflow server; once
the workers committed a quarter of the input, the server's process group is killed. The run
must end EXACT as usual, its output must name the record of what it could not log, and the
record (``mlflow-not-logged.json``) must list the summary's metrics, artifacts and end
status; no call in it waited past the bound, and after the first failure the run tried
at most one call per retry interval (so it never sat silent for minutes).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from tests.integration.cluster.test_cluster import (
    RUN_TIMEOUT_S,
    SKEWLAB,
    Running,
    committed,
    new_run_dir,
    running,
)

from skewlab.live.report.tracking import CALL_BOUND_S, NotLogged
from skewlab.rundir import RunDir
from skewlab.services.mlflow_server import http_ok
from skewlab.services.process import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.cluster]

__all__ = ["running"]  # the module's cluster (test_cluster.py's fixture)

EVENTS = 20480
RUN = [
    "run", "--strategy", "pkg", "--workers", "4", "--partitions", "2",
    "--events", str(EVENTS), "--rate", "400", "--window", "1", "--no-progress",
]  # fmt: skip
"""51 s of input at 400 events/s: the server goes with most of it still to come."""
STOP_AT = 0.25
"""The server is killed once the workers committed this share of the input."""


def test_mlflow_server_stopped_mid_run_the_run_ends_exact_and_lists_what_it_lost(
    running: Running, tmp_path: Path
) -> None:
    home = running.home
    runs = home / "runs"
    before = {d.name for d in runs.iterdir()} if runs.is_dir() else set()
    out_path = tmp_path / "run.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [*SKEWLAB, *RUN, "--home", str(home)],
            env=running.env, stdout=out, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
    try:
        rd = RunDir.of(new_run_dir(home, before))
        share = STOP_AT * EVENTS
        assert wait_until(
            lambda: proc.poll() is not None or sum(committed(home, rd.run_id).values()) >= share,
            900.0,
            0.5,
        ), "the workers never committed a quarter of the input"
        assert proc.poll() is None, out_path.read_text()[-3000:]
        assert rd.mlflow_run.exists()  # the run opened its MLflow run on the server
        assert NotLogged.load(rd) is None  # and logged into it so far

        (server,) = [s for s in running.cluster.services() if s.name == "mlflow-server"]
        state = server.status().state
        assert state is not None
        os.killpg(os.getpgid(state.pid), signal.SIGKILL)
        base = running.env["MLFLOW_TRACKING_URI"]
        assert wait_until(lambda: not http_ok(f"{base}/health"), 60.0, 0.5), "server still up"

        rc = proc.wait(timeout=RUN_TIMEOUT_S)
        text = out_path.read_text()
        assert rc == 0, text[-3000:]
        assert re.search(
            rf"^{rd.run_id}: EXACT: expected {EVENTS} events, merged {EVENTS}", text, re.M
        ), text[-3000:]

        missed = NotLogged.load(rd)
        assert missed is not None, text[-3000:]
        assert missed.tracking_uri == base
        assert missed.status == "FINISHED"  # the verdict it could not set: EXACT
        assert {"events", "throughput", "p99_ms", "exact"} <= set(missed.metrics)
        assert "summary.json" in missed.artifacts
        assert missed.tags and not missed.params  # params were logged when it opened
        # the output says it: the summary's one line naming the record and every artifact
        # not logged, and before it at most the first failed progress point's line
        lines = [ln for ln in text.splitlines() if str(rd.mlflow_not_logged) in ln]
        assert 1 <= len(lines) <= 2, text[-3000:]
        assert all(a in lines[-1] for a in missed.artifacts), lines[-1]
        # never silent for minutes: every call tried waited at most the bound, and after
        # the first failure only one call per retry interval was tried (the rest skipped)
        tried = missed.failures
        assert tried and all(f["seconds"] <= CALL_BOUND_S for f in tried), tried
        assert tried[-1]["call"] == "get_run"  # finish tried one call, then gave up
        progress_tried = [f for f in tried if f["call"].startswith("progress")]
        assert len(progress_tried) <= max(1, len(missed.progress_steps) // 10), tried
        print(f"not logged: {len(missed.failures)} calls tried ({tried}); "
              f"{len(missed.progress_steps)} progress points; {lines[-1]}")  # fmt: skip
    finally:
        if proc.poll() is None:
            proc.kill()
