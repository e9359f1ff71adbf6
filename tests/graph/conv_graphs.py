"""A one-conv graph (conv2d with a constant weight, then relu) and its input, for the tests of
the passes that rewrite such a conv (dilated_conv_as_phases, trim_conv_taps' bands)."""
from __future__ import annotations

import numpy as np

from tensorforge.graph.builder import GraphBuilder


def conv_relu_graph(cin, cout, size, dilations, pads, kernel=(3, 3), strides=(1, 1), groups=1, seed=0):
    """(graph, input) of relu(conv2d(x, W)) on a (1, cin, *size) input."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("conv")
    x = b.input("x", (1, cin, *size), "float32")
    w = b.const(rng.standard_normal((cout, cin // groups, *kernel)).astype("float32") * 0.1, "w")
    y = b.add1("conv2d", [x, w], {"strides": strides, "padding": pads, "dilations": dilations, "groups": groups})
    graph = b.finish([b.add1("relu", [y])])
    return graph, rng.standard_normal((1, cin, *size)).astype("float32")
