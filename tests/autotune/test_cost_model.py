"""Loop-program features and the XGBoost cost model: the layout read on a hand-made program,
features that see the knobs, failures, the cache and the process pool; the model ranks unseen
configs of a synthetic cost, predicts cheaply, and transfers between tasks of one template."""
import math
import random
import sys

import numpy as np
import pytest

from tensorforge import te
from tensorforge.autotune import features as F
from tensorforge.autotune.measure import MeasureResult
from tensorforge.autotune.records import Record
from tensorforge.autotune.task import Task
from tensorforge.tir.build import schedule_to_primfunc

# A fixed 16-lane target (AVX-512): the spaces' sizes and the expected values below do not
# depend on the machine the tests run on (nothing here is compiled for it).
FIXED = "c -mcpu=skylake-avx512"
MM = Task.for_op("matmul", [((2, 64), "float32"), ((64, 96), "float32")], target=FIXED)          # 384 configs
MM_OTHER = Task.for_op("matmul", [((1, 64), "float32"), ((64, 256), "float32")], target=FIXED)   # 192 configs
CONV = Task.for_op("conv2d_nchwc", [((1, 16, 12, 12), "float32"), ((2, 16, 3, 3, 32), "float32")],
                   {"padding": (1, 1, 1, 1), "strides": (1, 1)}, target=FIXED)
NAMES = F.feature_names()
SERIAL = F.FeatureExtractor(n_parallel=1)      # no processes started in these tests


def synthetic_cost(config) -> float:
    """A 'time' from what the matmul knobs do (same meaning for every matmul task): best with
    32-column tiles, a reduction split of 4, unpacked, panel loop outside."""
    v = config.to_json()
    nr = v["tile_n"][1] * v["tile_n"][2]
    return 1e-3 * (1 + (math.log2(nr) - 5) ** 2 + 0.7 * abs(math.log2(v["tile_k"][1]) - 2)
                   + 0.5 * v["pack_b"] + 0.3 * v["order"][0])


def feature(x: np.ndarray, name: str) -> float:
    return float(x[NAMES.index(name)])


def test_layout_read_on_a_hand_made_matmul():
    """C[i, j] += A[i, k] * B[k, j] with loops i(8) jo(4) k(32) ji(4, vectorized): the values
    each level should show, worked out by hand."""
    A = te.placeholder((8, 32), name="A")
    B = te.placeholder((32, 16), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((8, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=4)
    s[C].reorder(i, jo, k, ji)
    s[C].vectorize(ji)
    x = F.program_features(schedule_to_primfunc(s, [A, B, C]))
    assert x.shape == (F.LENGTH,) == (len(NAMES),) and x.dtype == np.float32
    log = lambda v: math.log2(1 + v)   # noqa: E731
    assert feature(x, "flops") == pytest.approx(log(2 * 8 * 16 * 32))      # the update: one add, one multiply
    assert feature(x, "hot_vector_len") == pytest.approx(log(4))
    assert feature(x, "hot_depth") == 4 and feature(x, "statements") == pytest.approx(log(2))
    assert feature(x, "other_executions") == pytest.approx(log(8 * 16))   # the init statement
    assert feature(x, "vector_share") == 1 and feature(x, "hot_parallel_extent") == 0
    # slots: C (stored), then A and B in reading order; B's 32 x 16 floats are 2048 bytes
    assert [feature(x, f"b{n}.present") for n in range(4)] == [1, 1, 1, 0]
    assert feature(x, "b0.stored") == 1 and feature(x, "b2.bytes") == pytest.approx(log(2048))
    expected = {  # level: (extent, kind, {slot: (stride, touched, reuse)})
        0: (4, "vectorized", {0: (1, 4, 1), 1: (0, 1, 4), 2: (1, 4, 1)}),
        1: (32, "serial", {0: (0, 4, 32), 1: (1, 32, 4), 2: (16, 128, 1)}),
        2: (4, "serial", {0: (4, 16, 32), 1: (0, 32, 16), 2: (4, 512, 1)}),
        3: (8, "serial", {0: (16, 128, 32), 1: (32, 256, 16), 2: (0, 512, 8)}),
    }
    for lv, (extent, kind, slots) in expected.items():
        assert feature(x, f"l{lv}.extent") == pytest.approx(log(extent)), lv
        assert feature(x, f"l{lv}.{kind}") == 1, lv
        for b, (stride, touched, reuse) in slots.items():
            got = [feature(x, f"l{lv}.b{b}.{n}") for n in ("stride", "touched", "touched_bytes", "reuse")]
            assert got == pytest.approx([log(stride), log(touched), log(4 * touched), log(reuse)]), (lv, b)
    assert not x[NAMES.index("l4.extent"):NAMES.index("l4.b0.stride")].any()     # no fifth loop


def test_features_are_fixed_length_finite_and_see_the_knobs():
    space = CONV.config_space
    base = space.default_config()
    values = base.to_json()
    unroll_kw = space.from_json({**values, "unroll_kw": not values["unroll_kw"]})
    vector = space.from_json({**values, "tile_fi": [4, 8]})
    tile = space.from_json({**values, "tile_x": [12, 1]})
    x = F.extract_features(CONV, [base, unroll_kw, vector, tile], n_parallel=1)
    assert x.shape == (4, F.LENGTH) and np.isfinite(x).all()
    assert len({row.tobytes() for row in x}) == 4
    # vectorizing 8 lanes instead of 16, and unrolling one more loop, show where expected
    assert feature(x[0], "hot_vector_len") == pytest.approx(math.log2(17))
    assert feature(x[2], "hot_vector_len") == pytest.approx(math.log2(9))
    assert feature(x[1], "hot_unrolled") != feature(x[0], "hot_unrolled")
    mm = F.extract_features(MM, random_configs(MM, 32, seed=4), n_parallel=1)
    assert mm.shape[1] == F.LENGTH and np.isfinite(mm).all()


def test_a_config_that_does_not_lower_gets_zeros():
    import autotune_fault_templates  # noqa: F401
    task = Task.create("vector_add_faults.test", [((8,), "float32"), ((8,), "float32")])
    space = task.config_space
    good = space.from_json({"fault": "none", "tile": [2, 4]})
    broken = space.from_json({"fault": "build_error", "tile": [2, 4]})
    x = F.extract_features(task, [good, broken], n_parallel=1)
    assert x[0].any() and not x[1].any()


def test_cache_and_process_pool_agree_with_serial():
    space = CONV.config_space
    configs = [space.get(i) for i in range(0, space.size, max(1, space.size // 12))][:12]
    serial = np.stack([F.config_features(CONV, c) for c in configs])
    F.clear_cache()
    with F.FeatureExtractor(n_parallel=2, parallel_min=4, keep_pool=True) as fx:
        pooled = fx(CONV, configs)
        assert fx._pool is not None          # the batch went to the processes
    np.testing.assert_array_equal(pooled, serial)
    again = F.extract_features(CONV, configs[::-1], n_parallel=1)      # from the cache, any order
    np.testing.assert_array_equal(again, serial[::-1])


def test_knob_features_have_the_space_width():
    space = MM.config_space
    x = F.knob_features(space, [space.get(0), space.get(space.size - 1)])
    assert x.shape[0] == 2 and np.isfinite(x).all() and (x[0] != x[1]).any()


# The model -----------------------------------------------------------------------------------

def measured(task, configs):
    return [MeasureResult((synthetic_cost(c),)) for c in configs]


def random_configs(task, n, seed):
    rng = random.Random(seed)
    return list({c.index: c for c in (task.config_space.random(rng) for _ in range(n))}.values())


def test_model_learns_the_ranking_of_unseen_configs():
    from scipy.stats import spearmanr

    from tensorforge.autotune.cost_model import XGBoostCostModel

    pytest.importorskip("xgboost")
    model = XGBoostCostModel(SERIAL)
    assert not model.fitted and model.predict(MM, [MM.config_space.get(0)]).tolist() == [0.0]
    train = random_configs(MM, 64, seed=0)
    model.fit(MM, train, measured(MM, train))
    seen = {c.index for c in train}
    rest = [c for c in random_configs(MM, 160, seed=9) if c.index not in seen]
    scores = model.predict(MM, rest)
    assert scores.shape == (len(rest),)
    truth = np.array([1 / synthetic_cost(c) for c in rest])
    assert spearmanr(scores, truth).statistic > 0.75        # 0.86 when written
    top = [rest[i] for i in np.argsort(-scores)[:8]]
    best = sorted(synthetic_cost(c) for c in rest)
    assert min(synthetic_cost(c) for c in top) <= best[len(best) // 40]       # within the best 2.5 %


def test_failed_results_rank_lowest_and_fit_needs_two_values():
    from tensorforge.autotune.cost_model import XGBoostCostModel, normalized_throughput

    pytest.importorskip("xgboost")
    assert normalized_throughput([2.0, 1.0, math.inf, 4.0]).tolist() == [0.5, 1.0, 0.0, 0.25]
    model = XGBoostCostModel(SERIAL)
    configs = random_configs(MM, 4, seed=1)
    model.fit(MM, configs, [MeasureResult((1e-3,))] * 4)        # all equal: nothing to rank
    assert not model.fitted


def test_records_of_another_task_transfer():
    from scipy.stats import spearmanr

    from tensorforge.autotune.cost_model import XGBoostCostModel

    pytest.importorskip("xgboost")
    history = random_configs(MM, 48, seed=2)
    records = [Record(MM, c.to_json(), (synthetic_cost(c),)) for c in history]
    records.append(Record(MM, history[0].to_json(), (), "build_error", "boom"))
    model = XGBoostCostModel(SERIAL)
    model.fit_records(records)
    assert model.fitted                       # ready before the new task measured anything
    configs = random_configs(MM_OTHER, 96, seed=3)
    scores = model.predict(MM_OTHER, configs)
    assert spearmanr(scores, [1 / synthetic_cost(c) for c in configs]).statistic > 0.6


def test_missing_xgboost_names_the_extra(monkeypatch):
    from tensorforge.autotune.cost_model import XGBoostCostModel

    monkeypatch.setitem(sys.modules, "xgboost", None)
    with pytest.raises(ImportError, match=r"tensorforge\[tune\]"):
        XGBoostCostModel()


def test_a_template_that_hangs_while_lowering_gets_zero_features(monkeypatch):
    import autotune_fault_templates  # noqa: F401

    from tensorforge.autotune import features
    from tensorforge.autotune.task import Task

    task = Task.create("vector_add_faults.test", [((8,), "float32"), ((8,), "float32")])
    space = task.config_space
    hang = next(c for c in space if c["fault"].val == "build_hang")
    ok = next(c for c in space if c["fault"].val == "none")
    monkeypatch.setattr(features, "FEATURE_TIMEOUT", 0.5)
    with pytest.warns(RuntimeWarning, match="took more than 0.5 s"):
        assert not features.config_features(task, hang).any()
    assert features.config_features(task, ok).any()
