"""Every process's settings derive from the run's spec (skewlab.live.driver.settings;
the state manager's: skewlab.runsettings)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from skewlab.live.autoscale.protocol import GroupSettings, LiveSettings
from skewlab.live.autoscale.settings import AutoscaleSettings, monitor_timing
from skewlab.live.driver.context import worker_file
from skewlab.live.driver.handle import RunHandle
from skewlab.live.driver.run import Run, open_run
from skewlab.live.driver.settings import (
    produce_settings,
    rebalance_settings,
    route_settings,
    routed_partitions,
    worker_settings,
)
from skewlab.live.worker.settings import read_worker_settings
from skewlab.rundir import RunDir
from skewlab.runsettings import ExperimentSettings, state_manager_settings
from skewlab.spec import AUTOSCALE_DEFAULTS, AUTOSCALE_SETTINGS, n_events

pytestmark = pytest.mark.unit


def _handle(tmp_path: Path, run_id: str = "key-1") -> RunHandle:
    files = RunDir.create(tmp_path, run_id)
    return RunHandle(
        run_id=run_id, home=str(tmp_path), run_dir=str(files), delta_root=str(tmp_path / "d"),
        settings={}, bootstrap="h:9092", events_topic=files.events_topic,
        routed_topic=files.routed_topic,
    )  # fmt: skip


def test_route_and_worker_settings_carry_the_spec_and_the_handle(tmp_path: Path) -> None:
    s = ExperimentSettings(strategy="key", workers=3, partitions=5, window_s=7.0,
                           client="kafka-python", service_us=2.0, trigger_s=0.25,
                           rebalance="dlb-h")  # fmt: skip
    h = _handle(tmp_path)
    route = route_settings(s.spec, h)
    assert (route.workers, route.strategy, route.window_s, route.trigger_s, route.client) == (
        3, "key", 7.0, 0.25, "kafka-python",
    )  # fmt: skip
    assert route.message_sets and route.run_dir == h.run_dir and route.bootstrap == "h:9092"
    files = RunDir.of(h.run_dir)
    for i in (0, 2):
        w = worker_settings(s.spec, h, i)
        assert (w.worker, w.window_s, w.service_us, w.splitters, w.cost) == (i, 7.0, 2.0, 5, "spin")
        assert w.kafka.client == "kafka-python" and w.topic == files.routed_topic
        assert w.stop_file == str(files.workers_stop)
        assert w.ready_file == str(files.worker_ready(i))
    rb = rebalance_settings(s.spec, h)
    assert rb is not None and (rb.policy, rb.workers, rb.interval_s) == ("dlb-h", 3, 10.0)
    assert state_manager_settings(s.spec, h.run_id, h.delta_root) is None
    assert routed_partitions(s.spec, h) == 3


def test_a_scale_out_run_has_spare_partitions_and_sleeping_spare_instances(
    tmp_path: Path,
) -> None:
    s = ExperimentSettings(strategy="key", workers=2, service_us=50.0, scale_out="checkpoint",
                           max_instances=3)  # fmt: skip
    h = _handle(tmp_path)
    sm = state_manager_settings(s.spec, h.run_id, h.delta_root)
    assert sm is not None and (sm.policy, sm.workers, sm.max_instances) == ("checkpoint", 2, 3)
    assert routed_partitions(s.spec, h) == sm.partitions > 2
    assert rebalance_settings(s.spec, h) is None
    spare = worker_settings(s.spec, h, 2)
    assert spare.cost == "sleep" and spare.stop_file == str(RunDir.of(h.run_dir).spares_stop)
    plain = ExperimentSettings()
    assert worker_settings(plain.spec, h, 0).splitters == 0
    assert not route_settings(plain.spec, h).message_sets


def test_produce_settings_follow_the_workload_and_its_ramp() -> None:
    flat = ExperimentSettings(rate=100.0, duration_s=3.0, partitions=2, payload_bytes=64)
    ps = produce_settings(flat.spec, "t")
    assert (ps.topic, ps.partitions, ps.events, ps.rate, ps.payload_bytes) == (
        "t",
        2,
        300,
        100.0,
        64,
    )
    assert ps.ramp_factor == 1.0
    ramp = ExperimentSettings(rate=100.0, duration_s=4.0, load_ramp="2x/2s")
    pr = produce_settings(ramp.spec, "t")
    assert (pr.ramp_factor, pr.ramp_interval_s) == (2.0, 2.0)
    assert pr.events == n_events(ramp.spec.workload) == 100 * 2 + 200 * 2
    assert n_events(ExperimentSettings(events=7).spec.workload) == 7


def test_autoscale_settings_and_the_process_settings_share_one_declaration() -> None:
    shared = {f.name for f in dataclasses.fields(GroupSettings)}
    auto = {f.name for f in dataclasses.fields(AutoscaleSettings)}
    assert shared <= auto and shared <= {f.name for f in dataclasses.fields(LiveSettings)}
    plain = AutoscaleSettings()
    for s in AUTOSCALE_SETTINGS:
        assert getattr(plain, s.name) == s.default == AUTOSCALE_DEFAULTS[s.name], s.name
    s = AutoscaleSettings(algorithm="kafka:40", partitions=8, capacity=900.0, bin_capacity=600.0,
                          record_bytes=50, **monitor_timing(4.0, 30.0))  # fmt: skip
    live = s.live("r", "h:1", ".", ".")
    assert live.shared() == s.shared()
    assert (live.window_s, live.min_span_s, live.max_consumers) == (8.0, 2.0, 40)


PROCESS_SETTINGS = ("RouteSettings", "WorkerSettings", "RebalanceSettings",
                    "StateManagerSettings", "ProduceSettings", "LiveSettings")  # fmt: skip
BUILT_ELSEWHERE = {
    "skewlab.live.worker.settings": "a worker's settings read back from its JSON file",
    "skewlab.live.mains.jobs": "the stand-alone produce job, from its own flags",
    "skewlab.control.scaleout.step": "the scheduled scale-out step, from its DAG params",
    "skewlab.live.mains.route_host": "the route host's own warm-up, on scratch files of no run",
}


def test_process_settings_are_built_from_a_run_only_in_live_settings() -> None:
    lib = Path(__file__).resolve().parents[4] / "lib"
    builders: dict[str, set[str]] = {}
    for path in sorted((lib / "skewlab").rglob("*.py")):
        module = ".".join(path.relative_to(lib).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            call = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            if call and node.func.id in PROCESS_SETTINGS:  # type: ignore[attr-defined]
                builders.setdefault(node.func.id, set()).add(module)  # type: ignore[attr-defined]
    # the state manager's settings need no handle: built beside their type, in the core
    run_side = {"skewlab.live.driver.settings", "skewlab.live.autoscale.settings",
                "skewlab.runsettings"}  # fmt: skip
    assert set(builders) == set(PROCESS_SETTINGS)
    for name, modules in builders.items():
        assert modules - set(BUILT_ELSEWHERE) <= run_side, name


def test_each_process_reads_its_settings_once_as_the_run_wrote_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = ExperimentSettings(strategy="key", workers=2, rebalance="dlb-h", home=str(tmp_path),
                           mlflow=False)  # fmt: skip
    run = Run.new(s, run_id="key-once")
    run.handle.bootstrap = "h:9092"  # as after the services phase
    run.handle.save()
    path = worker_file(run.ctx, 1)  # what the run writes for instance 1
    w = worker_settings(s.spec, run.handle, 1)
    assert read_worker_settings(str(path)) == w == read_worker_settings(path.read_text())
    reads: list[str] = []
    parse = RunHandle.from_json
    monkeypatch.setattr(RunHandle, "from_json", lambda text: reads.append(text) or parse(text))
    again = open_run(run.files.path)  # a DAG task: the handle read and parsed once
    assert len(reads) == 1 and isinstance(again, Run) and again.settings == s
    assert again.ctx.settings is again.settings  # parsed once, passed down
