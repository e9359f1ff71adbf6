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
    return fuse(optimize(graph, "c"))
