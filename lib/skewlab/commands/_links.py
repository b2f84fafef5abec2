"""Where a user finds an MLflow run the CLI just logged: a URL, or how to open one."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker


def run_link(tracker: Tracker, run_id: str) -> str:
    """The run's page on the tracking server (an ``http(s)`` tracking URI), else the
    ``mlflow ui`` command that serves the local store, with the run's path under it."""
    uri = tracker.settings.tracking_uri
    experiment_id = tracker.client.get_run(run_id).info.experiment_id
    page = f"#/experiments/{experiment_id}/runs/{run_id}"
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/{page}"
    return f"mlflow ui --backend-store-uri {uri}, then http://127.0.0.1:5000/{page}"
