"""The MLflow UI compare page in headless chromium: two runs side by side, metrics shown.

Two runs are logged with :class:`~skewlab.io.tracking.Tracker` into a tmp SQLite
store (the same code path experiments use), ``mlflow server`` serves that store
on a free port, and chromium opens ``#/compare-runs`` for the two runs. The
metric names must be in the page's DOM; the screenshot is saved in the test's
tmp dir (``screenshots/mlflow-compare.png``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import pytest
from tests.integration.fixtures.airflow import free_port, wait_until

if TYPE_CHECKING:
    from tests.browser.conftest import Page

pytestmark = [pytest.mark.browser, pytest.mark.integration]

METRICS = {
    "key": {"imb_score": 240.2, "p99_ms": 137.4, "throughput": 1218.0},
    "dkg": {"imb_score": 155.1, "p99_ms": 56.4, "throughput": 2435.0},
}


@pytest.fixture
def mlflow_ui(tmp_path: Path) -> Iterator[tuple[str, str, list[str]]]:
    """``(url, experiment id, [run ids])``: two logged runs and an MLflow server on them."""
    import httpx

    from skewlab.io.tracking import Tracker, TrackingSettings

    tracker = Tracker(TrackingSettings.for_data_dir(tmp_path / "data"))
    runs = []
    for strategy, metrics in METRICS.items():
        with tracker.run("skewlab-browser", f"sim-{strategy}", {"strategy": strategy}) as rid:
            tracker.log_metrics(rid, metrics)
            runs.append(rid)
    exp_id = tracker.experiment_id("skewlab-browser")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "mlflow-server.log"
    argv = [
        str(Path(sys.executable).with_name("mlflow")),
        "server",
        "--backend-store-uri",
        tracker.settings.tracking_uri,
        "--default-artifact-root",
        tracker.settings.artifact_location,
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
        yield url, exp_id, runs
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def test_compare_page_shows_both_runs_metrics(
    browser: Page, mlflow_ui: tuple[str, str, list[str]]
) -> None:
    url, exp_id, runs = mlflow_ui
    query = f"runs={quote(json.dumps(runs))}&experiments={quote(json.dumps([exp_id]))}"
    browser.goto(f"{url}/#/compare-runs?{query}")
    names = list(METRICS["key"])
    condition = " && ".join(f"document.body.innerText.includes({json.dumps(n)})" for n in names)
    browser.wait_for(condition, "metric names on the compare page", timeout_s=60)
    browser.wait_for(
        "['sim-key', 'sim-dkg'].every(n => document.body.innerText.includes(n))",
        "both run names",
    )
    assert browser.scroll_to_text("Metrics")
    shot = browser.screenshot("mlflow-compare")
    assert shot.stat().st_size > 10_000
    text = browser.text()
    for name in names:
        assert name in text
    assert "240.2" in text and "155.1" in text  # each run's value, not only the names


def test_the_experiment_opens_in_the_classic_runs_view(
    browser: Page, mlflow_ui: tuple[str, str, list[str]]
) -> None:
    """The addresses skewlab prints open MLflow 3's model-training view: the experiment on
    its runs table (each run by name), a run on its metrics, not the GenAI view (traces,
    token usage) the UI opens by default."""
    from skewlab.io.run_links import experiment_url, run_url

    url, exp_id, runs = mlflow_ui
    browser.goto(experiment_url(url, exp_id))
    browser.wait_for(
        "['sim-key', 'sim-dkg'].every(n => document.body.innerText.includes(n))",
        "the runs table with both runs",
        timeout_s=60,
    )
    shot = browser.screenshot("mlflow-experiment")
    assert shot.stat().st_size > 10_000
    assert "Token usage" not in browser.text()
    browser.goto(run_url(url, exp_id, runs[0]))
    browser.wait_for(
        "document.body.innerText.includes('imb_score')", "the run's metrics", timeout_s=60
    )
    browser.screenshot("mlflow-run")
    text = browser.text()
    assert "sim-key" in text and "Token usage" not in text
