from pathlib import Path

import pytest

from skewlab.io.tracking import TrackingSettings

pytestmark = pytest.mark.unit


def test_runs_log_under_the_data_dir_unless_a_tracking_server_is_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    local = TrackingSettings.for_runs(tmp_path)
    assert local.tracking_uri == TrackingSettings.for_data_dir(tmp_path).tracking_uri
    assert str(tmp_path) in local.tracking_uri and local.tracking_uri.startswith("sqlite:///")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    assert TrackingSettings.for_runs(tmp_path).tracking_uri == "http://mlflow:5000"
