"""Small graphs for the auto-tuning tests: a few convolutions (two of them the same workload)
with bias and relu epilogues, and a dense layer on constant weights."""
import numpy as np

from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.fuse import fuse
from tensorforge.graph.pipeline import optimize


def conv_net():
    b = GraphBuilder("conv_net")
    rng = np.random.default_rng(0)
    x = b.input("x", (1, 8, 10, 10), "float32")

    def conv_relu(h, cin, cout, name):
        w = b.const(rng.standard_normal((cout, cin, 3, 3)).astype("float32") * 0.1, f"{name}_w")
        bias = b.const(rng.standard_normal((1, cout, 1, 1)).astype("float32"), f"{name}_b")
        h = b.add1("conv2d", [h, w], {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1)})
        return b.add1("relu", [b.add1("add", [h, bias])])

    h = conv_relu(x, 8, 32, "c1")
    h = conv_relu(h, 32, 32, "c2")
    h = conv_relu(h, 32, 32, "c3")               # the same workload as c2
    h = b.add1("flatten", [h], {"axis": 1})
    w = b.const(rng.standard_normal((32 * 10 * 10, 40)).astype("float32") * 0.01, "fc_w")
    y = b.add1("matmul", [h, w])
    return b.finish([y])


def groups_of(graph):
    """The fused groups at opt_level 2: direct convs on any machine (with 16 vector registers
    the 8-channel first conv would otherwise be a Winograd conv)."""
    return fuse(optimize(graph, "c", 2))


def first_conv_group():
    """The fused group of conv_net's first conv (the conv with its bias and relu)."""
    return next(g for g in groups_of(conv_net()) if g.master is not None and g.master.op == "conv2d_nchwc")


def schedule_group(group, template, cfg, target="c"):
    """(schedule, placeholders, outputs) of a fused group as the lowering builds it (its
    elementwise stages inlined) and scheduled by `template` under `cfg`."""
    from tensorforge import te
    from tensorforge.lowering import group_to_te
    from tensorforge.target import Target
    from tensorforge.te.tensor import ComputeOp

    placeholders, env, master_outs, master_ops = group_to_te(group)
    outs = [env[v] for v in group.outputs]
    s = te.create_schedule([t.op for t in outs])
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and op not in {t.op for t in outs} and op not in master_ops \
                and not op.reduce_axis:
            stage.compute_inline()
    template(s, master_outs, outs, Target.parse(target), cfg)
    return s, placeholders, outs
