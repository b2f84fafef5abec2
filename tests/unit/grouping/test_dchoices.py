"""D-Choices / W-Choices: heavy hitters get more choices, the tail gets PKG's two."""

from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np
import pytest

from skewlab.errors import ConfigError
from skewlab.grouping import DChoicesConfig, PKGConfig, WChoicesConfig
from skewlab.grouping.dchoices import SpaceSaving
from skewlab.keys import KeyBatch, KeyVocab

pytestmark = pytest.mark.unit


def heavy_stream(n: int = 20_000, tail: int = 2_000) -> tuple[KeyVocab, np.ndarray]:
    """Key 0 carries 40% of the events, the rest is uniform over ``tail`` keys."""
    rng = np.random.default_rng(11)
    ids = np.where(rng.random(n) < 0.4, 0, rng.integers(1, tail + 1, n))
    return KeyVocab(f"h{i}" for i in range(tail + 1)), ids.astype(np.int64)


def workers_per_key(vocab: KeyVocab, ids: np.ndarray, out: np.ndarray) -> dict[str, set[int]]:
    used: dict[str, set[int]] = defaultdict(set)
    for i, w in zip(ids.tolist(), out.tolist()):
        used[vocab.keys[i]].add(w)
    return used


def test_space_saving_overestimates_within_error_and_stays_bounded() -> None:
    ss = SpaceSaving(20)
    rng = np.random.default_rng(5)
    stream = [f"s{int(x)}" for x in (rng.zipf(1.4, 5_000) % 500)]
    for t, key in enumerate(stream, 1):
        ss.offer(key, t)
        assert len(ss.entries) <= 20
    truth = Counter(stream)
    for key, (count, error, _) in ss.entries.items():
        assert count - error <= truth[key] <= count
    assert max(ss.entries, key=lambda k: ss.entries[k][0]) == truth.most_common(1)[0][0]


def test_w_choices_spreads_the_heavy_key_over_all_workers() -> None:
    vocab, ids = heavy_stream()
    g = WChoicesConfig(workers=10).build()
    out = g.route_batch(KeyBatch(ids, vocab))
    used = workers_per_key(vocab, ids, out)
    assert used["h0"] == set(range(10))
    assert g.is_heavy("h0") and not g.is_heavy("h1")
    loads = np.bincount(out, minlength=10)
    pkg_loads = np.bincount(PKGConfig(workers=10).build().route_batch(KeyBatch(ids, vocab)))
    assert loads.max() < pkg_loads.max()  # 40% of the stream cannot fit on 2 of 10 workers


def paper_d(head: list[float], workers: int, epsilon: float) -> int:
    """The paper's rule for ``d`` (dchoices module docstring), written out independently.

    The smallest ``d >= max(2, round(p1 W))`` below ``W`` with, for ``b(h) = 1 -
    ((W - 1) / W) ** (h d)``, ``p1 + (pH - p1) b(1)^d + pT b(1)^2 <= b(1) + eps``
    and ``pH + pT b(|H|)^2 <= b(|H|) + eps``; ``W`` when none is.
    """
    p1, ph = max(head), sum(head)
    pt = 1.0 - ph

    def b(h: int, d: int) -> float:
        return 1.0 - ((workers - 1) / workers) ** (h * d)

    for d in range(max(2, round(p1 * workers)), workers):
        first = p1 + (ph - p1) * b(1, d) ** d + pt * b(1, d) ** 2 <= b(1, d) + epsilon
        whole = ph + pt * b(len(head), d) ** 2 <= b(len(head), d) + epsilon
        if first and whole:
            return d
    return workers


def one_hot_key_stream(periods: int, tail: int = 500) -> tuple[KeyVocab, np.ndarray]:
    """Periods of 10 events: the hot key ``h0`` 3 times, then 7 tail keys in rotation.

    ``h0`` holds 30 % of the stream and is the whole head (theta = 2 / (5 W) = 4 %
    at W = 10); each of the ``tail`` keys holds 0.14 %. At W = 10 the paper's rule
    needs more than ``round(0.3 * 10) = 3`` choices but fewer than ``W``.
    """
    pattern = np.array([0, -1, -1, 0, -1, -1, 0, -1, -1, -1])
    ids = np.tile(pattern, periods)
    slots = np.flatnonzero(ids < 0)
    ids[slots] = 1 + np.arange(len(slots)) % tail
    # one more period's first event, so the last refresh point (total = 1 + k * refresh)
    # falls on the final event
    ids = np.append(ids, 0)
    return KeyVocab(f"h{i}" for i in range(tail + 1)), ids.astype(np.int64)


def test_d_choices_solves_an_intermediate_d_from_the_head() -> None:
    workers, epsilon, refresh = 10, 0.01, 1000
    vocab, ids = one_hot_key_stream(periods=2000)
    g = DChoicesConfig(workers=workers, epsilon=epsilon, refresh=refresh).build()
    out = g.route_batch(KeyBatch(ids, vocab))
    # d was last solved at event number 1 + k * refresh = len(ids); with 501 keys
    # and 1000 counters SpaceSaving is exact, so the head is the true prefix shares.
    last = 1 + (len(ids) - 1) // refresh * refresh
    assert last == len(ids)
    shares = np.bincount(ids[:last], minlength=len(vocab)) / last
    theta = 2.0 / (5.0 * workers)
    head = [float(p) for p in shares if p > theta]
    assert len(head) == 1 and head[0] == pytest.approx(0.3, abs=1e-3)
    expected = paper_d(head, workers, epsilon)
    assert round(head[0] * workers) < expected < workers  # the rule's loop decides d
    assert g.d == expected
    used = workers_per_key(vocab, ids, out)
    assert len(used["h0"]) > 2


def test_w_choices_sends_heavy_events_to_the_lowest_least_loaded_worker() -> None:
    """All keys heavy, so every event goes to the first worker at the minimum load."""
    vocab = KeyVocab(["a", "b", "c"])
    rng = np.random.default_rng(3)
    ids = np.concatenate([[0, 1, 2], rng.integers(0, 3, 3_000)]).astype(np.int64)
    workers = 7
    loads = [0] * workers
    expected = []
    for _ in ids:
        w = loads.index(min(loads))
        loads[w] += 1
        expected.append(w)
    cfg = WChoicesConfig(workers=workers, theta=0.05)
    batched = cfg.build()
    half = len(ids) // 2
    first = batched.route_batch(KeyBatch(ids[:half], vocab))
    resumed = cfg.build(state=batched.snapshot())
    second = resumed.route_batch(KeyBatch(ids[half:], vocab))
    single = cfg.build()
    one_by_one = [single.route(vocab.keys[i]) for i in ids.tolist()]
    assert np.concatenate([first, second]).tolist() == expected == one_by_one


def test_d_choices_without_heavy_keys_is_pkg() -> None:
    vocab = KeyVocab(f"u{i}" for i in range(5_000))
    ids = np.random.default_rng(2).integers(0, 5_000, 4_000)
    # The very first event is heavy (frequency 1/1), but with all loads at 0 its
    # least-loaded choice is the first hashed one, PKG's first choice.
    g = DChoicesConfig(workers=8, d=3, theta=0.5).build()
    d = g.route_batch(KeyBatch(ids, vocab))
    p = PKGConfig(workers=8).build().route_batch(KeyBatch(ids, vocab))
    assert np.array_equal(d, p)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"d": 1}, "d"),
        ({"theta": 0.0}, "theta"),
        ({"counters": 0}, "counters"),
        ({"epsilon": 1.5}, "epsilon"),
        ({"refresh": 0}, "refresh"),
    ],
)
def test_bad_parameters_are_config_errors(params: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        DChoicesConfig(workers=4, **params)  # type: ignore[arg-type]
