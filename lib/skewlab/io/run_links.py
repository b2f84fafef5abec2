"""Where a reader finds an MLflow run: its page URL, plus how to serve a local store."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from skewlab.io.tracking import Tracker

__all__ = [
    "CLASSIC_VIEW",
    "MLFLOW_UI_DEFAULT",
    "experiment_url",
    "run_link",
    "run_url",
    "serve_hint",
]

MLFLOW_UI_DEFAULT = "http://127.0.0.1:5000"
"""Where ``mlflow ui`` serves a local store unless told another port."""


CLASSIC_VIEW = "workflowType=machine_learning"
"""MLflow 3's UI opens experiments in its GenAI view (traces, token usage) unless the page's
address asks for the model-training view; the experiment kind tag alone is not read when
the UI has its GenAI / Model training switch (:data:`skewlab.io.tracking.EXPERIMENT_KIND`)."""


def _base(tracking_uri: str) -> str:
    base = tracking_uri if tracking_uri.startswith(("http://", "https://")) else MLFLOW_UI_DEFAULT
    return base.rstrip("/")


def experiment_url(tracking_uri: str, experiment_id: str) -> str:
    """The experiment's runs table, in MLflow's classic (model training) view."""
    return f"{_base(tracking_uri)}/#/experiments/{experiment_id}?{CLASSIC_VIEW}"


def run_url(tracking_uri: str, experiment_id: str, run_id: str) -> str:
    """The run's page, in MLflow's classic view: on the tracking server itself for an
    ``http(s)`` tracking URI, else under :data:`MLFLOW_UI_DEFAULT` (``mlflow ui
    --backend-store-uri <uri>``)."""
    return f"{_base(tracking_uri)}/#/experiments/{experiment_id}/runs/{run_id}?{CLASSIC_VIEW}"


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
