"""MLflow's compare view sets two live runs' plots side by side, in headless chromium.

Two runs are logged exactly as a live run logs itself (:func:`open_live_run`,
:meth:`LiveRun.finish` with the summary's plots) into a tmp SQLite store, with
different windows (5 s and 15 s), so their plots differ. ``mlflow server``
serves the store on a free port; chromium opens ``#/compare-runs`` for the two
runs, picks ``worker_loads.png`` in the Artifacts section and must show one
loaded image per run, each holding that run's own PNG (byte length, width and
height compared with the file in the run's artifacts). Screenshots go to the
test's tmp dir (``screenshots/``).
"""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import numpy as np
import pytest
from tests.integration.fixtures.airflow import free_port, wait_until

if TYPE_CHECKING:
    from tests.browser.conftest import Page

    from skewlab.live.report.tracking import LiveRun

pytestmark = [pytest.mark.browser, pytest.mark.integration]

PLOT = "worker_loads.png"
T0 = 1_800_000_000.0


def _run(home: Path, name: str, window_s: float, shares: list[float]) -> LiveRun:
    """One finished MLflow run of a made-up 30 s live run in windows of ``window_s``."""
    from skewlab.io.tracking import TrackingSettings
    from skewlab.live.report.plots import draw
    from skewlab.live.report.summary import RunSummary
    from skewlab.live.report.tracking import open_live_run
    from skewlab.rundir import RunDir
    from skewlab.runsettings import ExperimentSettings

    s = ExperimentSettings(
        strategy="dkg", workers=len(shares), window_s=window_s, home=str(home), experiment="cmp"
    )
    rd = RunDir.create(home, name)
    run = open_live_run(s, rd, TrackingSettings.for_data_dir(home))
    windows = int(30 / window_s)
    loads = np.rint(np.outer(np.full(windows, 1000 * window_s), shares)).astype(int)
    lat = np.sort(np.random.default_rng(len(name)).gamma(2.0, 40.0 * window_s, 300))
    n = int(loads.sum())
    summary = RunSummary(
        run_id=name,
        strategy="dkg",
        workers=len(shares),
        events=n,
        quarantined=0,
        produce_rate=n / 30,
        throughput=n / 30,
        std_dev=float(np.std(shares) * 100),
        dist_cost=1.2,
        imb_score=10.0,
        p50_ms=float(np.median(lat)),
        p90_ms=float(np.percentile(lat, 90)),
        p99_ms=float(np.percentile(lat, 99)),
        max_ms=float(lat.max()),
        exact=True,
        exactness="EXACT",
        wall_s=35.0,
        window_s=window_s,
        t_first_s=T0,
        window_starts_ms=[round((T0 + i * window_s) * 1000) for i in range(windows)],
        window_loads=loads.tolist(),
        window_latency_ms=[(50.0, 90.0)] * windows,
        latency_values_ms=lat.tolist(),
        latency_frac=(np.arange(1, lat.size + 1) / lat.size).tolist(),
    )
    summary.plots = draw(summary, rd.path)
    run.finish(summary)
    return run


@pytest.fixture
def compare_ui(tmp_path: Path) -> Iterator[tuple[str, list[LiveRun]]]:
    """``(server url, [two finished runs])``: an MLflow server on the runs' store."""
    import httpx

    home = tmp_path / "home"
    runs = [
        _run(home, "live-w5", 5.0, [0.4, 0.35, 0.25]),
        _run(home, "live-w15", 15.0, [0.7, 0.2, 0.1]),
    ]
    ts = runs[0].tracker.settings
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "mlflow-server.log"
    argv = [
        str(Path(sys.executable).with_name("mlflow")),
        "server",
        "--backend-store-uri",
        ts.tracking_uri,
        "--default-artifact-root",
        ts.artifact_location,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def up() -> bool | None:
        try:
            return True if httpx.get(f"{url}/health", timeout=3.0).status_code == 200 else None
        except httpx.HTTPError:
            return None

    def dead() -> str | None:
        code = proc.poll()
        return None if code is None else f"mlflow server exited ({code}): {log.read_text()[-1500:]}"

    try:
        wait_until("mlflow server", up, 90.0, dead)
        yield url, runs
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _png_facts(path: Path) -> tuple[int, int, int]:
    """(bytes, width, height) of a PNG file (width/height from its IHDR chunk)."""
    data = path.read_bytes()
    width, height = struct.unpack(">II", data[16:24])
    return len(data), width, height


IMAGES = """(async () => {
  const imgs = Array.from(document.querySelectorAll('img')).filter(
    i => i.complete && i.naturalWidth > 0 && i.getBoundingClientRect().width > 0);
  const out = [];
  for (const i of imgs) {
    let bytes = -1;
    try { bytes = (await (await fetch(i.src)).arrayBuffer()).byteLength; } catch (e) {}
    const x = i.getBoundingClientRect().x;
    out.push({src: i.src.slice(0, 80), bytes, w: i.naturalWidth, h: i.naturalHeight, x});
  }
  return out;
})()"""
"""The images shown on the page (loaded, with a width): bytes, natural size, left edge."""

LEAF = (
    "Array.from(document.querySelectorAll('*')).filter(e => e.textContent.trim() === {name}"
    " && !Array.from(e.children).some(c => c.textContent.trim() === {name}))"
)
"""The innermost elements whose text is ``name`` (JSON-quoted)."""


def test_compare_view_sets_both_runs_plots_side_by_side(
    browser: Page, compare_ui: tuple[str, list[LiveRun]]
) -> None:
    url, runs = compare_ui
    ids = [r.mlflow_run_id for r in runs]
    exp = runs[0].experiment_id
    facts = []
    for r in runs:
        folder = r.tracker.artifact_dir(r.mlflow_run_id)
        assert folder is not None
        facts.append(_png_facts(folder / PLOT))
    assert facts[0][0] != facts[1][0]  # two different pictures, told apart by size
    query = f"runs={quote(json.dumps(ids))}&experiments={quote(json.dumps([exp]))}"
    browser.goto(f"{url}/#/compare-runs?{query}")
    browser.wait_for(
        "['live-w5', 'live-w15'].every(n => document.body.innerText.includes(n))",
        "both run names",
        timeout_s=60,
    )
    # The Artifacts section lists the files common to both runs; pick the load plot.
    leaf = LEAF.format(name=json.dumps(PLOT))
    browser.wait_for(f"{leaf}.length > 0", "the plot in the artifact list", timeout_s=60)
    browser.screenshot("compare-artifacts")
    clicked = browser.eval(
        f"(() => {{ const h = {leaf}; const e = h[h.length - 1];"
        " e.scrollIntoView({block: 'center'}); e.click(); return true; })()"
    )
    assert clicked
    sizes = json.dumps([f[0] for f in facts])
    shown = browser.wait_for(
        f"(async () => {{ const v = await {IMAGES}; const got = v.map(i => i.bytes);"
        f" return {sizes}.every(n => got.includes(n)) ? v : null; }})()",
        "both runs' images",
        timeout_s=60,
    )
    browser.screenshot("compare-plots")
    by_bytes = {img["bytes"]: img for img in shown}
    for (size, width, height), run in zip(facts, runs, strict=True):
        img = by_bytes.get(size)
        assert img is not None, (run.mlflow_run_id, size, shown)
        assert (img["w"], img["h"]) == (width, height)
    # Side by side, in the order of the runs' columns.
    assert by_bytes[facts[0][0]]["x"] < by_bytes[facts[1][0]]["x"]
