"""Where a reader finds an MLflow run: its page URL, plus how to serve a local store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

__all__ = ["MLFLOW_UI_DEFAULT", "run_link", "run_url", "serve_hint"]

MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves a local store unless told another port."""


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page: on the tracking server itself for an ``http(s)`` tracking URI,
    else under :data:`MLFLOW_UI_DEFAULT` (``mlflow ui --backend-store-uri <uri>``)."""
    base = tracking_uri if tracking_uri.startswith(("http://", "https://")) else MLFLOW_UI_DEFAULT
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def serve_hint(tracking_uri: str) -> str | None:
    """How to start the MLflow UI that :func:`run_url` points at for a local store (None
    for a tracking server: it serves its own pages)."""
    if tracking_uri.startswith(("http://", "https://")):
        return None
    port = MLFLOW_UI_DEFAULT.rsplit(":", 1)[1]
    return (
        f"start the MLflow UI to open it: mlflow ui --backend-store-uri {tracking_uri} "
        f"--port {port}"
    )


def run_link(tracker: Tracker, run_id: str) -> str:
    """One log-line fragment: the run's URL, plus how to serve a local store."""
    uri = tracker.settings.tracking_uri
    url = run_url(uri, tracker.client.get_run(run_id).info.experiment_id, run_id)
    hint = serve_hint(uri)
    return url if hint is None else f"{url} ({hint})"
