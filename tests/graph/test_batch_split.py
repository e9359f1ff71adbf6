"""graph/batch_split.py: which values split along the batch axis with the inputs, judged per op
from its TE compute (or its declared axes), and the check that a cut graph is the same graph."""
import numpy as np
import pytest

from tensorforge.graph.batch_split import NotSeparable, same_but_split, split_axes
from tensorforge.graph.builder import GraphBuilder

F = np.float32


def _graph(build, shape):
    b = GraphBuilder("t")
    x = b.input("x", shape, "float32")
    return b.finish([build(b, x)]), x


def _w(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(F)


KEEPS_ROWS = {   # name: (build, input shape, the output's split axis)
    "conv+relu": (lambda b, x: b.add1("relu", [b.add1("conv2d", [x, b.const(_w(8, 4, 3, 3))],
                                                       {"padding": (1, 1, 1, 1)})]), (6, 4, 8, 8), 0),
    "transposed conv": (lambda b, x: b.add1("conv_transpose2d", [x, b.const(_w(4, 2, 4, 4))],
                                            {"strides": (2, 2), "padding": (1, 1, 1, 1)}), (6, 4, 8, 8), 0),
    "max pool": (lambda b, x: b.add1("max_pool2d", [x], {"kernel": (2, 2), "strides": (2, 2)}), (6, 4, 8, 8), 0),
    "global pool": (lambda b, x: b.add1("global_avg_pool", [x]), (6, 4, 8, 8), 0),
    "flatten": (lambda b, x: b.add1("flatten", [x], {"axis": 1}), (6, 4, 8, 8), 0),
    "reshape of the other axes": (lambda b, x: b.add1("reshape", [x], {"shape": (6, 16, 16)}), (6, 4, 8, 8), 0),
    "transpose": (lambda b, x: b.add1("transpose", [x], {"perm": (1, 0, 2, 3)}), (6, 4, 8, 8), 1),
    "reduce other axes": (lambda b, x: b.add1("reduce_sum", [x], {"axes": (1,), "keepdims": 0}), (6, 4, 8), 0),
    "softmax over the last axis": (lambda b, x: b.add1("softmax", [x], {"axes": (-1,)}), (6, 4, 8), 0),
    "layer norm": (lambda b, x: b.add1("layer_norm", [x, b.const(np.ones(8, F)), b.const(np.zeros(8, F))]),
                   (6, 4, 8), 0),
    "instance norm": (lambda b, x: b.add1("instance_norm", [x, b.const(np.ones(4, F)), b.const(np.zeros(4, F))]),
                      (6, 4, 8, 8), 0),
    "bias broadcast": (lambda b, x: b.add1("add", [x, b.const(np.ones((1, 4, 1, 1), F))]), (6, 4, 8, 8), 0),
    "matmul rows": (lambda b, x: b.add1("matmul", [x, b.const(_w(8, 5))]), (6, 4, 8), 0),
    "slice of another axis": (lambda b, x: b.add1("slice", [x], {"starts": (1,), "ends": (5,), "axes": (2,)}),
                              (6, 4, 8), 0),
    "pad of another axis": (lambda b, x: b.add1("pad", [x], {"pads": (0, 0, 1, 0, 0, 1)}), (6, 4, 8), 0),
    "concat along another axis": (lambda b, x: b.add1("concat", [x, x], {"axis": 1}), (6, 4, 8), 0),
    "embedding lookup": (lambda b, x: b.add1("gather", [b.const(_w(10, 5)), b.add1("cast", [x], {"dtype": "int64"})]),
                         (6, 7), 0),
    "topk (declared axes)": (lambda b, x: b.add("topk", [x], {"k": 3})[0], (6, 4, 8), 0),
}

MIXES_ROWS = {   # name: (build, input shape, what the refusal says)
    "sum over the batch": (lambda b, x: b.add1("reduce_sum", [x], {"axes": (0,), "keepdims": 1}), (6, 4),
                           "read at r0 along its split axis 0"),
    "softmax over the batch": (lambda b, x: b.add1("softmax", [x], {"axes": (0,)}), (6, 4), "along its split axis"),
    "cumsum over the batch": (lambda b, x: b.add1("cumsum", [x], {"axis": 0}), (6, 4), "along its split axis"),
    "reshape merging the batch": (lambda b, x: b.add1("reshape", [x], {"shape": (24, 2)}), (6, 4, 2),
                                  "along its split axis"),
    "slice of the batch": (lambda b, x: b.add1("slice", [x], {"starts": (1,), "ends": (5,), "axes": (0,)}), (6, 4),
                           "along its split axis"),
    "pad of the batch": (lambda b, x: b.add1("pad", [x], {"pads": (1, 0, 0, 0)}), (6, 4), "along its split axis"),
    "concat along the batch": (lambda b, x: b.add1("concat", [x, x], {"axis": 0}), (6, 4), "along its split axis"),
    "a constant with one row per batch row": (lambda b, x: b.add1("add", [x, b.const(np.ones((6, 1), F))]), (6, 4),
                                              "other than to read rows"),
    "comparison with the row index": (lambda b, x: b.add1("trilu", [x], {"k": 0}), (6, 6), "other than to read rows"),
    "product over the batch": (lambda b, x: b.add1("matmul", [b.const(_w(3, 6)), x]), (6, 4), "along its split axis"),
    "layer norm over the batch": (lambda b, x: b.add1("layer_norm", [x, b.const(np.ones((6, 4), F))], {"axis": 0}),
                                  (6, 4), "along its split axis"),
    "topk along the batch": (lambda b, x: b.add("topk", [x], {"k": 3, "axis": 0})[0], (6, 4),
                             "computes along axis 0"),
}


@pytest.mark.parametrize("name", sorted(KEEPS_ROWS))
def test_ops_that_keep_batch_rows_apart_split(name):
    build, shape, axis = KEEPS_ROWS[name]
    g, x = _graph(build, shape)
    assert split_axes(g, {x: 0})[g.outputs[0]] == axis


@pytest.mark.parametrize("name", sorted(MIXES_ROWS))
def test_ops_that_mix_batch_rows_refuse_and_name_the_node(name):
    build, shape, says = MIXES_ROWS[name]
    g, x = _graph(build, shape)
    with pytest.raises(NotSeparable, match=f"node .*{g.nodes[-1].op}.*{says}"):
        split_axes(g, {x: 0})


def test_values_that_do_not_read_the_split_input_stay_whole():
    b = GraphBuilder("t")
    x = b.input("x", (6, 4), "float32")
    t = b.input("t", (4,), "float32")
    y = b.add1("mul", [b.add1("relu", [t]), x])
    g = b.finish([y])
    axes = split_axes(g, {x: 0})
    assert axes[y] == 0 and g.nodes[0].outputs[0] not in axes


def _cnn(rows: int, scale_by_rows: bool = False):
    b = GraphBuilder("t")
    x = b.input("x", (rows, 4, 8, 8), "float32")
    y = b.add1("conv2d", [x, b.const(_w(8, 4, 3, 3))], {"padding": (1, 1, 1, 1)})
    y = b.add1("reshape", [y], {"shape": (rows, 512)})
    if scale_by_rows:          # a model that multiplies by its batch size (a folded Shape)
        y = b.add1("mul", [y, b.const(np.array(rows, F))])
    return b.finish([y]), x


def test_a_graph_cut_to_fewer_rows_is_the_same_graph():
    full, x = _cnn(6)
    axes = split_axes(full, {x: 0})
    assert same_but_split(full, _cnn(2)[0], axes, 6, 2) is None
    assert "input x" in same_but_split(full, _cnn(2)[0], {}, 6, 2)          # unsplit, the input differs


def test_a_constant_that_depends_on_the_batch_size_is_found():
    full, x = _cnn(6, scale_by_rows=True)
    axes = split_axes(full, {x: 0})
    assert "constant that depends on the batch size" in same_but_split(full, _cnn(2, True)[0], axes, 6, 2)
