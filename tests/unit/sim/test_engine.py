"""The simulator end to end, over tiny fake groupings and workloads (see conftest)."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.sim import ConstantService, SimConfig, SimError, UniformService, simulate

pytestmark = pytest.mark.unit


def cfg(**kw: Any) -> SimConfig:
    return SimConfig(**{"service": ConstantService(1.0), **kw})


class TestSingleWorker:
    def test_hand_computed_delays(self, fakes: Any) -> None:
        # service 1 s; arrivals 0, 0, 0, 3: waits 0, 1, 2, 0; sojourns 1, 2, 3, 1
        wl = fakes.ArrayWorkload(["a"] * 4, [0.0, 0.0, 0.0, 3.0])
        r = simulate(fakes.HashKeyConfig(1), wl, 4, rate=1.0, config=cfg())
        assert r.queue_delay.n == 4
        assert r.queue_delay.mean == pytest.approx(0.75)
        assert r.queue_delay.max == 2.0
        assert r.sojourn.mean == pytest.approx(1.75)
        assert r.sojourn.max == 3.0
        assert r.makespan_s == 4.0
        assert r.throughput == pytest.approx(1.0)

    def test_md1_mean_wait(self, fakes: Any) -> None:
        # Poisson arrivals, deterministic service: Wq = rho * s / (2 (1 - rho))
        s, rho = 1e-3, 0.6
        wl = fakes.RandomWorkload(keys=10, seed=11, poisson=True)
        r = simulate(
            fakes.HashKeyConfig(1),
            wl,
            300_000,
            rate=rho / s,
            config=SimConfig(service=ConstantService(s), seed=1),
        )
        expected = rho * s / (2 * (1 - rho))
        assert r.queue_delay.mean == pytest.approx(expected, rel=0.05)
        assert r.sojourn.mean == pytest.approx(expected + s, rel=0.05)
        assert r.throughput == pytest.approx(rho / s, rel=0.01)

    def test_uniform_service_mean(self, fakes: Any) -> None:
        wl = fakes.RandomWorkload(keys=3, seed=2)
        svc = UniformService(10e-6, 50e-6)
        r = simulate(
            fakes.HashKeyConfig(1), wl, 50_000, rate=10_000.0, config=SimConfig(service=svc)
        )
        assert r.sojourn.mean - r.queue_delay.mean == pytest.approx(svc.mean, rel=0.01)


class TestLoadMetrics:
    def test_key_single_key_all_on_one_worker(self, fakes: Any) -> None:
        wl = fakes.ArrayWorkload(["hot"] * 1000, np.arange(1000) / 100.0)
        r = simulate(
            fakes.HashKeyConfig(8), wl, 1000, rate=100.0, config=cfg(service=ConstantService(1e-3))
        )
        assert sorted(r.worker_loads) == [0] * 7 + [1000]
        assert r.std_dev == pytest.approx(100 * math.sqrt(7) / 8)
        assert r.dist_cost == 1.0
        assert r.merge_cost == 1.0
        assert r.distinct_keys == 1

    def test_round_robin_against_naive_counts(self, fakes: Any) -> None:
        workers, n, rate, window = 4, 5_003, 100.0, 7.0
        wl = fakes.RandomWorkload(keys=50, seed=5)
        r = simulate(
            fakes.RoundRobinConfig(workers),
            wl,
            n,
            rate=rate,
            config=SimConfig(service=ConstantService(1e-3), window_s=window, chunk=999),
        )
        chunk = next(iter(wl.events(n, chunk=n, rate=rate)))
        ids, ts = chunk.keys.ids, chunk.ts
        who = np.arange(n) % workers
        win = np.floor(ts / window).astype(int)
        assert r.std_dev == pytest.approx(0.0, abs=0.01)
        assert r.window_loads.shape == (win.max() + 1, workers)
        for k in range(win.max() + 1):
            assert (
                r.window_loads[k].tolist() == np.bincount(who[win == k], minlength=workers).tolist()
            )
        assert r.partials == len(set(zip(win.tolist(), ids.tolist(), who.tolist())))
        assert r.window_keys == len(set(zip(win.tolist(), ids.tolist())))
        per_key = [len(set(who[ids == i].tolist())) for i in np.unique(ids)]
        assert r.dist_cost == pytest.approx(sum(per_key) / len(per_key))
        assert r.merge_cost > 1.0

    def test_splitters_deal_round_robin(self, fakes: Any) -> None:
        # 3 splitters, each with its own round-robin router over 2 workers:
        # event i goes to splitter i % 3 as its (i // 3)-th event -> worker (i // 3) % 2
        n = 1_001
        wl = fakes.RandomWorkload(keys=7, seed=9)
        r = simulate(
            fakes.RoundRobinConfig(2),
            wl,
            n,
            rate=50.0,
            config=SimConfig(
                service=ConstantService(1e-3), splitters=3, chunk=100, block_events=17
            ),
        )
        expected = np.bincount((np.arange(n) // 3) % 2, minlength=2)
        assert list(r.worker_loads) == expected.tolist()
        assert r.splitters == 3


class TestRunMechanics:
    def test_clock_advances_in_blocks(self, fakes: Any) -> None:
        grouping = fakes.RoundRobinConfig(2)
        wl = fakes.RandomWorkload(keys=5, seed=1)
        n, rate = 3_000, 1_000.0
        simulate(
            grouping, wl, n, rate=rate, config=SimConfig(service=ConstantService(1e-4), block_s=0.1)
        )
        seen = np.array(grouping.seen_times)
        assert np.all(np.diff(seen) >= 0)
        assert np.all(np.diff(seen) <= 0.1 + 1 / rate)
        assert seen[-1] == pytest.approx((n - 1) / rate, abs=0.1)
        assert len(seen) >= n / (0.1 * rate)

    def test_deterministic(self, fakes: Any) -> None:
        def run() -> dict[str, Any]:
            wl = fakes.RandomWorkload(keys=30, seed=4, zipf_s=1.2, poisson=True)
            svc = UniformService(1e-4, 3e-4)
            out = simulate(
                fakes.HashKeyConfig(3),
                wl,
                20_000,
                rate=8_000.0,
                config=SimConfig(service=svc, seed=3),
            )
            return {
                k: v for k, v in out.summary().items() if not k.endswith("_s") or k == "makespan_s"
            }

        assert run() == run()

    def test_progress(self, fakes: Any) -> None:
        calls: list[tuple[int, int]] = []
        wl = fakes.RandomWorkload(keys=5)
        simulate(
            fakes.HashKeyConfig(2),
            wl,
            2_500,
            rate=100.0,
            config=SimConfig(chunk=1_000),
            progress=lambda done, total: calls.append((done, total)),
        )
        assert calls == [(1_000, 2_500), (2_000, 2_500), (2_500, 2_500)]

    def test_result_picklable_and_json(self, fakes: Any) -> None:
        wl = fakes.RandomWorkload(keys=5)
        r = simulate(fakes.HashKeyConfig(2), wl, 500, rate=100.0)
        clone = pickle.loads(pickle.dumps(r))
        assert clone.summary() == r.summary()
        doc = json.loads(json.dumps(r.to_dict()))
        assert sum(map(sum, doc["window_loads"])) == 500
        assert doc["queue_delay"]["n"] == 500
        with pytest.raises(ValueError):
            r.window_loads[0, 0] = 7

    def test_bad_grouping_output(self, fakes: Any) -> None:
        wl = fakes.RandomWorkload(keys=5)
        with pytest.raises(SimError, match="outside"):
            simulate(fakes.ConstConfig(3, target=3), wl, 10, rate=10.0)

    @pytest.mark.parametrize(
        "kw",
        [
            {"splitters": 0},
            {"window_s": 0},
            {"block_events": 1.5},
            {"service": 1e-3},
            {"seed": "x"},
        ],
    )
    def test_config_validation(self, kw: dict[str, Any]) -> None:
        with pytest.raises(ConfigError):
            SimConfig(**kw)

    @pytest.mark.parametrize(("events", "rate"), [(0, 1.0), (10, 0.0), (10, float("nan"))])
    def test_run_validation(self, fakes: Any, events: int, rate: float) -> None:
        with pytest.raises(ConfigError):
            simulate(fakes.HashKeyConfig(2), fakes.RandomWorkload(), events, rate=rate)
