"""Config spaces: knob enumeration, indices, neighbours, JSON, and tunable templates whose
default point (a ConfigEntity) schedules exactly like the same template called without a
config (its heuristic default, as compiling without records uses it)."""
import json
import math
import random

import pytest

import tensorforge
from tensorforge import te
from tensorforge.autotune.task import Task, build_candidate, task_of_group
from tensorforge.ops import registry
from tensorforge.ops.schedules import get_template, get_tunable
from tensorforge.target import Target
from tensorforge.te.space import ConfigEntity, ConfigError, ConfigSpace, split_entities


def sizes(entities):
    return [e.size for e in entities]


def test_split_factors_enumerates_ordered_factorizations():
    assert sizes(split_entities(12, 2, "factors", False)) == [(12, 1), (6, 2), (4, 3), (3, 4), (2, 6), (1, 12)]
    # 3-way splits of 8 with no tail: (outer, a, b) with a * b dividing 8
    three = split_entities(8, 3, "factors", False)
    assert len(three) == 10 and all(math.prod(s) == 8 for s in sizes(three))


def test_split_tails_power2_candidates_and_limits():
    tail = split_entities(10, 2, "factors", True)
    assert len(tail) == 10 and (4, 3) in sizes(tail)            # every tile size, ceil(10 / 3) = 4
    assert sizes(split_entities(12, 2, "power2", False)) == [(12, 1), (6, 2), (3, 4)]
    assert sizes(split_entities(12, 2, "power2", True)) == [(12, 1), (6, 2), (3, 4), (2, 8)]
    assert sizes(split_entities(64, 2, "factors", False, max_factor=8)) == [(64, 1), (32, 2), (16, 4), (8, 8)]
    cand = split_entities(10, 3, "candidate", True, candidates=[(-1, 2, 4), (1, 5)])
    assert sizes(cand) == [(2, 2, 4), (2, 1, 5)]
    with pytest.raises(ConfigError, match="does not divide"):
        split_entities(10, 2, "candidate", False, candidates=[(3,)])
    with pytest.raises(ConfigError, match="unknown split policy"):
        split_entities(10, 2, "thirds", False)


def small_space() -> ConfigSpace:
    cfg = ConfigSpace()
    cfg.define_split("tile", 16, 2, policy="power2", default=(4,))              # 5 values
    cfg.define_reorder("order", 3, policy="all")                                 # 6
    cfg.define_annotate("ann", 2, policy="try_unroll_vec")                      # 2 * 3
    cfg.define_knob("flag", [False, True], default=True)                        # 2
    return cfg


def test_space_size_index_and_defaults():
    space = small_space()
    assert space.size == 5 * 6 * 6 * 2 == len(space)
    assert [len(k) for k in space.knobs.values()] == [5, 6, 6, 2]
    for index in (0, 1, 5, 31, space.size - 1):
        assert space.get(index).index == index
    assert len({c.key for c in space}) == space.size                             # all points distinct
    d = space.default_config()
    assert d.to_json() == {"tile": [4, 4], "order": [0, 1, 2], "ann": ["none", "none"], "flag": True}
    assert space["tile"].size == (4, 4) and space["flag"].val is True            # collecting mode: defaults
    with pytest.raises(ConfigError, match="outside"):
        space.get(space.size)


def test_neighbors_and_mutation_change_one_knob():
    space = small_space()
    c = space.get(17)
    nbrs = space.neighbors(c)
    assert len(nbrs) == sum(len(k) - 1 for k in space.knobs.values())
    assert len({n.key for n in nbrs}) == len(nbrs) and c not in nbrs
    for n in nbrs:
        assert sum(a != b for a, b in zip(n.indices, c.indices)) == 1
    rng = random.Random(0)
    for _ in range(50):
        m = space.mutate(c, rng)
        assert sum(a != b for a, b in zip(m.indices, c.indices)) == 1


def test_config_json_round_trip():
    space = small_space()
    for index in range(0, space.size, 7):
        c = space.get(index)
        text = json.dumps(c.to_json())
        again = space.from_json(json.loads(text))
        assert again == c and again.index == index and again.key == c.key
    with pytest.raises(ConfigError, match="missing knobs"):
        space.from_json({"tile": [4, 4]})
    with pytest.raises(ConfigError, match="not one of its values"):
        space.from_json({**space.get(0).to_json(), "tile": [3, 5]})


def test_definitions_are_checked():
    cfg = ConfigSpace()
    cfg.define_knob("k", [1, 2])
    with pytest.raises(ConfigError, match="defined twice"):
        cfg.define_knob("k", [1, 2])
    with pytest.raises(ConfigError, match="not one of its values"):
        cfg.define_split("s", 16, default=(3,))             # a default must be a point of the space
    with pytest.raises(ConfigError, match="no knob 'missing'"):
        cfg["missing"]
    with pytest.raises(ConfigError, match="orders"):
        cfg.define_reorder("r", 9, policy="all")
    cfg.fallback_with(k=2)
    assert cfg.default_config().to_json() == {"k": 2}


def test_a_template_declares_and_applies_knobs():
    def template(cfg, n=32):
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        cfg.define_split("tile", s[B].op.axis[0], 2, policy="factors", default=(8,))
        cfg.define_knob("vec", [True, False])
        xo, xi = cfg["tile"].apply(s, B, s[B].op.axis[0])
        if cfg["vec"].val:
            s[B].vectorize(xi)
        return s, [A, B]

    space = ConfigSpace()
    template(space)
    assert space.size == 6 * 2
    for config in space:
        s, args = template(config)
        assert isinstance(config, ConfigEntity)
        split = s[args[1]].relations[0]
        assert split.factor.value == config["tile"].size[1]
        kinds = [s[args[1]].iter_var_attrs.get(iv) for iv in s[args[1]].leaf_iter_vars]
        assert (kinds[1] is not None and kinds[1].kind == "vectorized") == config["vec"].val
        tensorforge.lower(s, args)


def hand_vs_tunable(task: Task) -> tuple[str, str]:
    """Loop programs of the task's op under its schedule template without a config (as lowering
    calls it) and under the default point of the template's space."""
    ph = [te.placeholder(shape, dtype, name=f"in{k}") for k, (shape, dtype) in enumerate(task.inputs)]
    outs = registry.get(task.op).build_compute(ph, dict(task.attrs))
    s = te.create_schedule([o.op for o in outs])
    get_template(task.template)(s, outs, outs, Target.parse(task.target), None)
    hand = tensorforge.lower(s, ph + outs, "candidate")
    return str(hand), str(build_candidate(task, task.config_space.default_config()))


@pytest.mark.parametrize("task", [
    Task.for_op("matmul", [((24, 40), "float32"), ((40, 56), "float32")]),
    Task.for_op("matmul", [((2, 9, 16), "float32"), ((2, 16, 33), "float32")]),
    Task.for_op("matmul_packed", [((5, 64), "float32"), ((2, 64, 32), "float32")], {"units": 50}),
    Task.for_op("conv2d_nchwc", [((1, 16, 12, 12), "float32"), ((2, 16, 3, 3, 32), "float32")],
                {"padding": (1, 1, 1, 1)}),
], ids=["matmul", "batched", "packed", "conv"])
def test_default_point_is_the_hand_template(task):
    hand, tuned = hand_vs_tunable(task)
    assert tuned == hand
    assert task.config_space.size > 1


def test_conv_default_with_fused_epilogue_is_the_hand_template():
    """A group (conv in NCHW[x]c, bias, relu, back to NCHW): the tile is computed inside the
    epilogue alike without a config and at the default point of the conv's own task."""
    from autotune_graphs import first_conv_group, schedule_group

    target = Target.parse("c")
    group = first_conv_group()

    def lower_with(template, cfg):
        s, placeholders, outs = schedule_group(group, template, cfg)
        return str(tensorforge.lower(s, placeholders + outs, "k"))

    assert len(group.nodes) > 1
    default = task_of_group(group, target).config_space.default_config()
    assert isinstance(default, ConfigEntity)
    assert lower_with(get_tunable("conv2d_nchwc.cpu").fn, default) == lower_with(get_template("conv2d_nchwc.cpu"), None)
