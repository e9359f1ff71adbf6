"""Lesson 5: writing a schedule template.

An op's compute says what it computes; its schedule template says how, for one kind of target.
A template is one function `template(s, master_outs, outs, target, cfg)`: `s` is the schedule
of a fused group, `master_outs` the outputs of its main op, `outs` the group's outputs, `target`
the Target (vector width, cores), and `cfg` a tuning configuration.

The template *declares its knobs* on `cfg` (`define_split`, `define_knob`, `define_reorder`,
`define_annotate`) and *applies* their values in the same function.  Called with cfg=None it
gets a collecting space whose lookups return each knob's default, so the default schedule and
the space the auto-tuner searches come from one definition and cannot drift apart.  One decorator
registers it: `@template(name, tunable=True)` (ops/schedules/: what compile uses by default and
what the tuner searches); the op names it in its `schedule={"cpu": name}`.

The op: column sums, y[j] = sum_i x[i, j].  The naive loop order (j outside, the reduction over
i inside) walks x by columns; the template splits j into vectors, puts the reduction loop
outside the vector, and vectorizes, so each step reads one contiguous row segment.  Knobs: the
vector width (tile_j) and whether the column blocks run in parallel.  The lesson prints the
space, lowers the default and another config, and checks every config in the space against
NumPy: tuning picks among schedules, it never changes what is computed.

Run it:  python docs/tutorials/05_schedule_template.py
"""
import os

import numpy as np

import tensorforge
from tensorforge import te
from tensorforge.autotune import Task, build_candidate, instantiate
from tensorforge.graph.builder import GraphBuilder
from tensorforge.ops.registry import REDUCTION, TensorType, op
from tensorforge.ops.schedules import template
from tensorforge.te.space import as_config

ROWS, COLS = (int(v) for v in os.environ.get("TUTORIAL_SHAPE", "64x256").split("x"))
NAME = "tutorial_col_sum.cpu"


@template(NAME, tunable=True)
def schedule_col_sum(s, master_outs, outs, target, cfg=None) -> None:
    """Column blocks of `tile_j` lanes, the reduction outside the vector, blocks in parallel."""
    cfg = as_config(cfg)
    y = master_outs[0]
    (j,) = s[y].op.axis
    (i,) = s[y].op.reduce_axis
    cols = int(j.dom.extent.value)
    lanes = target.simd_lanes(y.dtype)
    # Knobs: declared here, their values read right below.
    cfg.define_split("tile_j", cols, 2, policy="factors", max_factor=4 * lanes,
                     default=(min(lanes, cols),))
    cfg.define_knob("parallel", [False, True], default=cols >= 4 * lanes)
    jo, ji = cfg["tile_j"].apply(s, s[y], j)
    s[y].reorder(jo, i, ji)
    s[y].vectorize(ji)
    if cfg["parallel"].val:
        s[y].parallel(jo)
    for out in outs:                       # an elementwise epilogue fused after the sum, if any
        if out is not y:
            s[y].compute_at(s[out], s[out].op.axis[0])


@op("tutorial.col_sum", pattern=REDUCTION, schedule={"cpu": NAME})
class col_sum:
    def infer(x: TensorType) -> TensorType:
        return TensorType((x.shape[1],), x.dtype)

    def compute(x: te.Tensor) -> te.Tensor:
        i = te.reduce_axis((0, x.shape[0]), name="i")
        return te.compute((x.shape[1],), lambda j: te.sum(x[i, j], axis=i), name="col_sum")

    def reference(x: np.ndarray) -> np.ndarray:
        return x.sum(axis=0)


rng = np.random.default_rng(0)
x = rng.standard_normal((ROWS, COLS)).astype("float32")

# 1. Compile uses the template with its defaults.
b = GraphBuilder("col_sums")
inp = b.input("x", (ROWS, COLS), "float32")
graph = b.finish([b.add1("tutorial.col_sum", [inp])])
(y,) = tensorforge.compile(graph)(x)
np.testing.assert_allclose(y, x.sum(axis=0), rtol=1e-4, atol=1e-4)
print("compiled with the default config: matches NumPy")

# 2. The same template as a tuning task: its config space is what the knobs declare.
task = Task.for_op("tutorial.col_sum", [((ROWS, COLS), "float32")])
space = task.config_space
print(f"{task}: {space.size} configs")
print(space)

s, args = instantiate(task, None)                         # the default config
print("--- the default schedule ---")
print(tensorforge.lower(s, args))
other = space.get(space.size - 1)                         # another point of the space
print(f"--- config {other} ---")
print(build_candidate(task, other))

# 3. Every config computes the same values.
inputs, (expected,) = task.reference_io(seed=1)
for index in range(space.size):
    config = space.get(index)
    module = tensorforge.build(build_candidate(task, config))
    got = np.full(expected.shape, np.nan, expected.dtype)
    module(*inputs, got)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=str(config))
print(f"all {space.size} configs match NumPy")
