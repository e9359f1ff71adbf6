"""Model-guided search: simulated annealing and batch picking on a known score, and the
model-based tuner, with a fake runner, against random search (whole-space scoring and
annealing alike), with transfer from another task of the same template."""
import math
import random

import numpy as np
import pytest

from tensorforge.autotune import features as F
from tensorforge.autotune.measure import BuildResult, MeasureResult
from tensorforge.autotune.records import Record
from tensorforge.autotune.search import knob_distance, pick_batch, score_space, simulated_annealing
from tensorforge.autotune.task import Task
from tensorforge.autotune.tuner import tune
from tensorforge.autotune.tuners import RandomTuner, make_tuner

# A fixed 16-lane target (AVX-512): the spaces' sizes and the expected values below do not
# depend on the machine the tests run on (nothing here is compiled for it).
FIXED = "c -mcpu=skylake-avx512"
GEMM = Task.for_op("matmul", [((32, 48), "float32"), ((48, 64), "float32")], target=FIXED)        # 4608 configs
MM = Task.for_op("matmul", [((2, 64), "float32"), ((64, 96), "float32")], target=FIXED)           # 384 configs
SMALL = Task.for_op("matmul", [((1, 64), "float32"), ((64, 256), "float32")], target=FIXED)       # 192 configs


def synthetic_cost(config) -> float:
    """A 'time' from what the matmul knobs do, alike for every matmul task (as in
    test_cost_model.py): best with 32-column tiles, a reduction split of 4, unpacked, panel
    loop outside."""
    v = config.to_json()
    nr = v["tile_n"][1] * v["tile_n"][2]
    return 1e-3 * (1 + (math.log2(nr) - 5) ** 2 + 0.7 * abs(math.log2(v["tile_k"][1]) - 2)
                   + 0.5 * v["pack_b"] + 0.3 * v["order"][0])


def separable_score(configs) -> np.ndarray:
    """Higher is better; the best has every knob at index 1."""
    return np.array([-sum((i - 1) ** 2 for i in c.indices) for c in configs], float)


class FakeBuilder:
    n_parallel = 4

    def build(self, inputs):
        return [BuildResult(i) for i in inputs]


class FakeRunner:
    """'Times' candidates with synthetic_cost and remembers the costs in order."""

    def __init__(self):
        self.costs: list[float] = []

    def run(self, builds):
        out = [synthetic_cost(b.input.config) for b in builds]
        self.costs += out
        return [MeasureResult((c,)) for c in out]


@pytest.fixture(scope="module", autouse=True)
def small_features():
    """The small task's features, computed here without processes (the tuners find them cached)."""
    F.extract_features(SMALL, list(SMALL.config_space), n_parallel=1)


def test_annealing_returns_distinct_unvisited_good_configs():
    space = GEMM.config_space
    rng = random.Random(0)
    visited = {space.random(rng).index for _ in range(200)}
    calls = []

    def score(configs):
        calls.append(len(configs))
        return separable_score(configs)

    out = simulated_annealing(space, score, visited, 16, rng, n_chains=8, n_steps=60, max_points=400)
    assert len(out) == 16 and len({c.index for _, c in out}) == 16
    assert not {c.index for _, c in out} & visited
    assert [s for s, _ in out] == sorted((s for s, _ in out), reverse=True)
    assert sum(calls) <= 400                                      # the budget of scored points
    all_scores = np.sort(separable_score(list(space)))[::-1]
    assert out[0][0] >= all_scores[len(all_scores) // 100]        # among the best 1 % of 4608


def test_whole_space_scoring_skips_visited():
    space = SMALL.config_space
    scores = separable_score(list(space))
    best = int(np.argmax(scores))
    out = score_space(space, scores, {best}, 5)
    assert len(out) == 5 and best not in {c.index for _, c in out}
    assert [s for s, _ in out] == sorted(scores[np.arange(space.size) != best])[::-1][:5]


def test_batches_are_diverse_with_an_epsilon_of_random_configs():
    space = GEMM.config_space
    rng = random.Random(1)
    candidates = sorted(((float(s), c) for c, s in zip(list(space)[:600], separable_score(list(space)[:600]))),
                        key=lambda sc: -sc[0])
    batch = pick_batch(candidates, 8, rng, epsilon=0.0, diversity=2)
    assert len(batch) == 8 and all(knob_distance(a, b) >= 2 for a in batch for b in batch if a is not b)
    assert batch[0] is candidates[0][1]
    drawn = iter(space.get(i) for i in range(4000, 4100))
    randoms = pick_batch(candidates, 8, rng, epsilon=1.0, random_config=lambda: next(drawn))
    assert [c.index for c in randoms] == list(range(4000, 4008))


def trials_to_optimum(costs: list[float], best: float) -> int:
    return next((k + 1 for k, c in enumerate(costs) if c <= best), len(costs) + 100)


def drive(tuner, trials: int, batch: int = 4) -> list[float]:
    """The tuning loop without measuring: propose, 'time' with synthetic_cost, update."""
    costs: list[float] = []
    while len(costs) < trials and tuner.has_next():
        configs = tuner.next_batch(min(batch, trials - len(costs)))
        results = [MeasureResult((synthetic_cost(c),)) for c in configs]
        costs += [r.cost for r in results]
        tuner.update(configs, results)
    return costs


def test_model_based_tuner_finds_the_optimum_sooner_than_random():
    pytest.importorskip("xgboost")
    best = min(synthetic_cost(c) for c in SMALL.config_space)
    found = {}
    for kind in ("xgb", "random"):
        found[kind] = []
        for seed in range(3):
            runner = FakeRunner()
            tune(SMALL, trials=40, tuner=kind, seed=seed, builder=FakeBuilder(), runner=runner, batch_size=4, log=False)
            found[kind].append(trials_to_optimum(runner.costs, best))
    assert np.mean(found["xgb"]) < np.mean(found["random"]), found
    assert max(found["xgb"]) <= 40, found


def test_annealing_path_of_the_tuner():
    """The same search with the space too large to score whole (annealing over loop features)."""
    from tensorforge.autotune.search import ModelBasedTuner

    pytest.importorskip("xgboost")
    best = min(synthetic_cost(c) for c in SMALL.config_space)
    hits = []
    for seed in range(2):
        tuner = ModelBasedTuner(SMALL.config_space, seed, task=SMALL, exhaustive_limit=0, n_steps=40, max_points=200)
        costs = drive(tuner, 40)
        assert len(costs) == 40 and len(tuner.visited) == 40
        hits.append(trials_to_optimum(costs, best))
    assert max(hits) <= 40, hits


def test_tuner_never_repeats_and_uses_up_a_space():
    pytest.importorskip("xgboost")
    tuner = make_tuner("xgb", SMALL.config_space, seed=0)              # no task: knob features
    seen: list[int] = []
    while tuner.has_next():
        batch = tuner.next_batch(24)
        assert batch
        seen += [c.index for c in batch]
        tuner.update(batch, [MeasureResult((synthetic_cost(c),)) for c in batch])
    assert sorted(seen) == list(range(SMALL.config_space.size))
    assert tuner.next_batch(4) == []


def test_knob_features_anneal_a_large_space():
    pytest.importorskip("xgboost")
    tuner = make_tuner("xgb", GEMM.config_space, seed=0)
    costs = drive(tuner, 48, batch=8)
    ranked = sorted(synthetic_cost(c) for c in GEMM.config_space)
    assert min(costs) <= ranked[len(ranked) // 200]     # best 0.5 % of 4608 (found: the best; random: 2 %)


def test_transfer_from_another_task_improves_the_first_batch():
    from tensorforge.autotune.search import ModelBasedTuner

    pytest.importorskip("xgboost")
    rng = random.Random(0)
    history = list({c.index: c for c in (MM.config_space.random(rng) for _ in range(48))}.values())
    records = [Record(MM, c.to_json(), (synthetic_cost(c),)) for c in history]
    mean = lambda batch: np.mean([synthetic_cost(c) for c in batch])   # noqa: E731
    warm, cold = [], []
    for seed in range(3):
        with_history = ModelBasedTuner(SMALL.config_space, seed, task=SMALL, transfer=records, n_parallel=1)
        without = ModelBasedTuner(SMALL.config_space, seed, task=SMALL, n_parallel=1)
        first, plain = with_history.next_batch(8), without.next_batch(8)
        assert [c.index for c in first] != [c.index for c in plain]
        assert [c.index for c in plain] == [c.index for c in RandomTuner(SMALL.config_space, seed).next_batch(8)]
        warm.append(mean(first))
        cold.append(mean(plain))
    assert np.mean(warm) < 0.8 * np.mean(cold), (warm, cold)
