"""Every kind of live run opens as its own class from its handle (``RunHandle.kind``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewlab.live.autoscale.protocol import LiveSettings
from skewlab.live.autoscale.run import AutoscaleRun
from skewlab.live.autoscale.settings import AutoscaleSettings
from skewlab.live.driver.handle import HandleError, RunHandle
from skewlab.live.driver.run import Run, new_run, open_run
from skewlab.runsettings import ExperimentSettings

pytestmark = pytest.mark.unit


def test_new_and_open_run_pick_the_class_of_the_settings_and_of_the_handle(
    tmp_path: Path,
) -> None:
    auto = new_run(AutoscaleSettings(home=str(tmp_path), mlflow=False), run_id="a-1")
    grouping = new_run(ExperimentSettings(home=str(tmp_path), mlflow=False), run_id="g-1")
    assert isinstance(auto, AutoscaleRun) and isinstance(grouping, Run)
    assert RunHandle.load(auto.files.path).kind == "autoscale"
    assert RunHandle.load(grouping.files.path).kind == "grouping"
    opened = open_run(auto.files.path)
    assert isinstance(opened, AutoscaleRun) and opened.run_id == "a-1"
    assert isinstance(open_run(grouping.files.path), Run)
    with pytest.raises(HandleError, match="phase 'topics' not done"):
        opened.start()  # the same guard as a grouping run's


def test_an_opened_autoscale_run_reads_its_processes_settings_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = AutoscaleSettings(home=str(tmp_path), mlflow=False)
    auto = AutoscaleRun.new(s, run_id="a-2")
    h = auto.handle
    h.bootstrap = "127.0.0.1:1"
    h.save()
    written = s.live(h.run_id, h.bootstrap, h.run_dir, h.delta_root, "spark")
    auto.files.settings.write_text(written.to_json())  # as phase topics writes it
    reads: list[str] = []
    parse = LiveSettings.from_file
    monkeypatch.setattr(LiveSettings, "from_file", lambda p: reads.append(str(p)) or parse(p))
    opened = open_run(auto.files.path)
    assert isinstance(opened, AutoscaleRun)
    assert opened.engine == "spark" and opened.live == written
    assert opened.live is opened.live and opened.engine == "spark"
    assert reads == [str(auto.files.settings)]
