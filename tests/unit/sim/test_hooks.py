"""The control-loop hook interface, exercised with trivial hooks."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.keys import KeyVocab
from skewlab.sim import (
    ConstantService,
    LoadView,
    RoutingOverride,
    SimConfig,
    SimError,
    SimHook,
    simulate,
)

pytestmark = pytest.mark.unit


@dataclass
class Recorder:
    """Records every view; returns the scripted decisions in turn (then None)."""

    interval_s: float
    script: list[RoutingOverride | None] = field(default_factory=list)
    views: list[LoadView] = field(default_factory=list)

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        self.views.append(view)
        return self.script.pop(0) if self.script else None


def test_recorder_is_a_hook() -> None:
    assert isinstance(Recorder(1.0), SimHook)


def test_views_cover_each_interval(fakes: Any) -> None:
    hook = Recorder(interval_s=1.0)
    wl = fakes.RandomWorkload(keys=4, seed=2)
    rate, n = 100.0, 550
    r = simulate(fakes.HashKeyConfig(3), wl, n, rate=rate, config=SimConfig(), hooks=[hook])
    # events at i / 100 for i < 550: ticks at 1, 2, 3, 4, 5 (the last event is at 5.49)
    assert [v.now for v in hook.views] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [v.since for v in hook.views] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert all(v.total == 100 for v in hook.views)
    assert all(int(v.key_counts.sum()) == 100 for v in hook.views)
    assert r.hook_ticks == 5
    first = hook.views[0]
    loads = first.key_loads()
    assert sum(loads.values()) == 100
    assert list(loads.values()) == sorted(loads.values(), reverse=True)
    assert len(first.key_loads(top=1)) == 1
    with pytest.raises(ValueError):
        first.worker_loads[0] = 1


def test_override_pins_key_from_tick_on(fakes: Any) -> None:
    workers = 4
    home = int(KeyVocab(["a"]).buckets(13, workers)[0])
    target = (home + 1) % workers
    hook = Recorder(interval_s=1.0, script=[RoutingOverride.of({"a": target}, reason="test")])
    wl = fakes.ArrayWorkload(["a"] * 500, np.arange(500) / 100.0)
    r = simulate(fakes.HashKeyConfig(workers), wl, 500, rate=100.0, hooks=[hook])
    # events before t=1 (100 of them) stay home, the other 400 are pinned
    assert r.worker_loads[home] == 100
    assert r.worker_loads[target] == 400
    assert r.overrides == 1
    assert r.dist_cost == 2.0
    assert hook.views[1].override is not None
    assert hook.views[1].last_worker[0] == target


def test_empty_override_clears(fakes: Any) -> None:
    workers = 4
    home = int(KeyVocab(["a"]).buckets(13, workers)[0])
    target = (home + 2) % workers
    hook = Recorder(1.0, script=[RoutingOverride.of({"a": target}), RoutingOverride()])
    wl = fakes.ArrayWorkload(["a"] * 300, np.arange(300) / 100.0)
    r = simulate(fakes.HashKeyConfig(workers), wl, 300, rate=100.0, hooks=[hook])
    assert r.worker_loads[home] == 200
    assert r.worker_loads[target] == 100


def test_backlog_seen_at_tick(fakes: Any) -> None:
    # 100 events/s, 0.02 s each, one worker: by t=1 100 events = 2 s of work
    # arrived and were served back to back from t=0, so 1 s is still queued.
    hook = Recorder(interval_s=1.0)
    wl = fakes.ArrayWorkload(["a"] * 150, np.arange(150) / 100.0)
    simulate(
        fakes.ConstConfig(2, target=0),
        wl,
        150,
        rate=100.0,
        config=SimConfig(service=ConstantService(0.02)),
        hooks=[hook],
    )
    assert hook.views[0].backlog_s.tolist() == pytest.approx([1.0, 0.0])


def test_later_hook_wins_a_key(fakes: Any) -> None:
    a = Recorder(1.0, script=[RoutingOverride.of({"a": 1})])
    b = Recorder(1.0, script=[RoutingOverride.of({"a": 2})])
    wl = fakes.ArrayWorkload(["a"] * 200, np.arange(200) / 100.0)
    r = simulate(fakes.ConstConfig(3, target=0), wl, 200, rate=100.0, hooks=[a, b])
    assert list(r.worker_loads) == [100, 0, 100]


def test_bad_overrides(fakes: Any) -> None:
    hook = Recorder(1.0, script=[RoutingOverride.of({"a": 9})])
    wl = fakes.ArrayWorkload(["a"] * 200, np.arange(200) / 100.0)
    with pytest.raises(SimError, match="worker 9"):
        simulate(fakes.HashKeyConfig(2), wl, 200, rate=100.0, hooks=[hook])
    with pytest.raises(ConfigError):
        simulate(fakes.HashKeyConfig(2), wl, 200, rate=100.0, hooks=[Recorder(0.0)])


def test_override_value() -> None:
    o = RoutingOverride.of({"b": 1, "a": 0}, reason="r")
    assert o.pairs == (("a", 0), ("b", 1))
    assert o.as_dict() == {"a": 0, "b": 1}
    assert len(o) == 2
    assert pickle.loads(pickle.dumps(o)) == o
    for bad in [(("a", -1),), (("a", 0), ("a", 1)), ((1, 0),), (("a", True),)]:
        with pytest.raises(ConfigError):
            RoutingOverride(bad)  # type: ignore[arg-type]


def test_gap_in_stream_skips_empty_ticks(fakes: Any) -> None:
    hook = Recorder(interval_s=1.0)
    ts = [0.0, 0.5, 1000.2, 1000.7, 1001.5]
    wl = fakes.ArrayWorkload(["a"] * 5, ts)
    r = simulate(fakes.HashKeyConfig(2), wl, 5, rate=1.0, hooks=[hook])
    # tick at 1 (2 events before it), then the next tick after the gap is 1001
    assert [v.now for v in hook.views] == [1.0, 1001.0]
    assert [v.since for v in hook.views] == [0.0, 1.0]
    assert [v.total for v in hook.views] == [2, 2]
    assert r.hook_ticks == 2


@dataclass
class HandOff:
    """Pins ``key`` from ``src`` to ``dst`` at the first tick; its state takes ``transfer_s``."""

    interval_s: float
    key: str
    src: int
    dst: int
    transfer_s: float
    _pending: list[tuple[str, int, float]] = field(default_factory=list)

    def on_tick(self, now: float, view: LoadView) -> RoutingOverride | None:
        if now > self.interval_s:
            return None
        self._pending.append((self.key, self.src, self.transfer_s))
        return RoutingOverride.of({self.key: self.dst})

    def take_handoffs(self) -> list[tuple[str, int, float]]:
        out, self._pending = self._pending, []
        return out


def test_handed_off_key_waits_for_its_state(fakes: Any) -> None:
    wl = fakes.RandomWorkload(keys=1, seed=3)  # one key, k0: every event is the moved key
    src = fakes.HashKeyConfig(2).build().route("k0")

    def run(transfer_s: float) -> Any:
        hook = HandOff(interval_s=1.0, key="k0", src=src, dst=1 - src, transfer_s=transfer_s)
        cfg = SimConfig(service=ConstantService(1e-3))
        return simulate(fakes.HashKeyConfig(2), wl, 300, rate=100.0, config=cfg, hooks=[hook])

    free, held = run(0.0), run(0.5)
    # 100 ev/s with 1 ms service never queues; with a 0.5 s hold the ~50 records that
    # arrive during it wait for the state, the first almost 0.5 s
    assert free.queue_delay.max < 1e-6
    assert 0.45 < held.queue_delay.max <= 0.5 + 1e-9
    assert held.worker_loads == free.worker_loads and free.worker_loads[1 - src] > 0


def test_poisson_arrivals_queue_where_even_spacing_does_not(fakes: Any) -> None:
    # 1 worker, rate 500/s, 1 ms service: evenly spaced arrivals (2 ms apart) never wait;
    # Poisson arrivals at the same rate (utilisation 0.5) do, on about half the events
    wl = fakes.RandomWorkload(keys=3, seed=4)
    even = simulate(
        fakes.HashKeyConfig(1),
        wl,
        20_000,
        rate=500.0,
        config=SimConfig(service=ConstantService(1e-3)),
    )
    pois = simulate(
        fakes.HashKeyConfig(1),
        wl,
        20_000,
        rate=500.0,
        config=SimConfig(service=ConstantService(1e-3), arrivals="poisson"),
    )
    assert even.queue_delay.p99 == 0.0
    # M/D/1 at rho 0.5: mean wait rho / (2 (1 - rho)) * S = 0.5 ms
    assert 0.4e-3 < pois.queue_delay.mean < 0.6e-3
    with pytest.raises(ConfigError, match="poisson"):
        SimConfig(arrivals="bursty")
