"""Where a reader finds an MLflow run: its page URL, plus how to serve a local store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

__all__ = ["MLFLOW_UI_DEFAULT", "run_link", "run_url"]

MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves a local store unless told another port."""


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page: on the tracking server itself for an ``http(s)`` tracking URI,
    else under :data:`MLFLOW_UI_DEFAULT` (``mlflow ui --backend-store-uri <uri>``)."""
    base = tracking_uri if tracking_uri.startswith(("http://", "https://")) else MLFLOW_UI_DEFAULT
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def run_link(tracker: Tracker, run_id: str) -> str:
    """One log-line fragment: the run's URL, plus how to serve a local store."""
    uri = tracker.settings.tracking_uri
    url = run_url(uri, tracker.client.get_run(run_id).info.experiment_id, run_id)
    if uri.startswith(("http://", "https://")):
        return url
    return f"{url} (serve the store with: mlflow ui --backend-store-uri {uri})"
