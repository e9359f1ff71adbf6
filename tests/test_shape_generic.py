"""Stretches of element-wise ops and reductions on kernels with shape variables
(tensorforge/shape_generic.py, staged.py `_GenericStretches`): compiled once for the sizes
their varying dimensions take, checked against ONNX's reference evaluator at every size."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import tensorforge
from tensorforge import shape_generic
from tensorforge.frontend import from_onnx
from tensorforge.graph.builder import GraphBuilder


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
                          list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _check(model, compiled, feeds):
    want = ReferenceEvaluator(model).run(None, feeds)
    got = compiled.run(**feeds)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_rows_picked_at_run_time_compile_once():
    """After Compress the number of rows is data: each new count compiled a specialization of
    the stretch that follows (about 150 ms for these four ops).  Now the second count compiles
    it with a shape variable, and every later count runs on that."""
    nodes = [helper.make_node("Greater", ["x", "zero"], ["keep"]),
             helper.make_node("Compress", ["x", "keep"], ["y"], axis=0),
             helper.make_node("Mul", ["y", "two"], ["y2"]),
             helper.make_node("Sigmoid", ["y2"], ["z"]),
             helper.make_node("ReduceSum", ["z"], ["s"], keepdims=0)]
    inits = [helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
             helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
                   [("z", TensorProto.FLOAT), ("s", TensorProto.FLOAT)], inits)
    compiled = tensorforge.compile(from_onnx(model))
    rng = np.random.default_rng(3)
    for count in (10, 20, 30, 5, 40, 25):            # rows kept: a new number each call
        x = -rng.random(50).astype("float32")
        x[rng.permutation(50)[:count]] *= -1
        _check(model, compiled, {"x": x})
    info = compiled.info
    # the Greater stretch and the first shape of the one after Compress; then one generic stretch
    assert info["specializations"] == 2, info
    assert info["shape_generic"]["stretches"] == 1 and info["shape_generic"]["calls"] == 5, info["shape_generic"]
    # shape_generic=False: one specialization per row count, as before
    off = tensorforge.compile(from_onnx(model), shape_generic=False)
    for count in (10, 20, 30):
        x = -rng.random(50).astype("float32")
        x[:count] *= -1
        _check(model, off, {"x": x})
    assert off.info["specializations"] == 4 and off.info["shape_generic"]["stretches"] == 0


def test_rows_gathered_by_nonzero_run_generic():
    """A detector's tail: NonZero's indices squeezed, the kept rows gathered and unsqueezed,
    scaled and summed, their softmax and its argmax; the count changes every call and the
    stretch after NonZero compiles once for any count."""
    nodes = [helper.make_node("Greater", ["score", "thresh"], ["keep"]),
             helper.make_node("NonZero", ["keep"], ["idx2"]),
             helper.make_node("Squeeze", ["idx2", "ax0"], ["idx"]),
             helper.make_node("Gather", ["boxes", "idx"], ["kept"], axis=0),
             helper.make_node("Unsqueeze", ["kept", "ax0"], ["batched"]),
             helper.make_node("Mul", ["batched", "scale"], ["scaled"]),
             helper.make_node("ReduceSum", ["scaled", "ax2"], ["area"], keepdims=0),
             helper.make_node("Softmax", ["kept"], ["probs"], axis=-1),
             helper.make_node("ArgMax", ["probs"], ["best"], axis=1, keepdims=0)]
    inits = [helper.make_tensor("thresh", TensorProto.FLOAT, [], [0.5]),
             helper.make_tensor("ax0", TensorProto.INT64, [1], [0]), helper.make_tensor("ax2", TensorProto.INT64, [1], [2]),
             helper.make_tensor("scale", TensorProto.FLOAT, [4], [640, 480, 640, 480])]
    model = _model(nodes, [helper.make_tensor_value_info("score", TensorProto.FLOAT, [64]),
                           helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [64, 4])],
                   [("scaled", TensorProto.FLOAT), ("area", TensorProto.FLOAT), ("probs", TensorProto.FLOAT),
                    ("best", TensorProto.INT64)], inits)
    compiled = tensorforge.compile(from_onnx(model))
    rng = np.random.default_rng(7)
    boxes = rng.random((64, 4)).astype("float32")
    for count in (5, 17, 40, 1, 0, 63):
        score = np.zeros(64, "float32")
        score[rng.permutation(64)[:count]] = 1.0
        _check(model, compiled, {"score": score, "boxes": boxes})
    assert compiled.info["shape_generic"]["stretches"] == 1, compiled.info["shape_generic"]


def test_symbolic_rows_broadcasts_and_reductions():
    """A symbolic batch through broadcasting, a select, casts, a transpose, a clip, a concat
    along it and reductions along and across it (a float and an integer mean), at 1, 0 and
    other rows."""
    nodes = [helper.make_node("Add", ["x", "row"], ["a"]),
             helper.make_node("Sigmoid", ["a"], ["b"]),
             helper.make_node("Greater", ["x", "row"], ["big"]),
             helper.make_node("Where", ["big", "b", "x"], ["w"]),
             helper.make_node("ReduceMean", ["w"], ["m0"], axes=[0], keepdims=1),
             helper.make_node("ReduceMax", ["w"], ["m1"], axes=[1], keepdims=0),
             helper.make_node("Cast", ["x"], ["xi"], to=TensorProto.INT32),
             helper.make_node("ReduceMean", ["xi"], ["mi"], axes=[0], keepdims=0),
             helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
             helper.make_node("Clip", ["wt", "lo", "hi"], ["c"]),
             helper.make_node("Concat", ["w", "x", "w"], ["cat"], axis=0)]
    inits = [helper.make_tensor("row", TensorProto.FLOAT, [4], [0.5, -1, 2, 0]),
             helper.make_tensor("lo", TensorProto.FLOAT, [], [-1.0]), helper.make_tensor("hi", TensorProto.FLOAT, [], [3.0])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
                   [("w", TensorProto.FLOAT), ("m0", TensorProto.FLOAT), ("m1", TensorProto.FLOAT),
                    ("mi", TensorProto.INT32), ("c", TensorProto.FLOAT), ("cat", TensorProto.FLOAT)], inits)
    compiled = tensorforge.compile(from_onnx(model))
    rng = np.random.default_rng(5)
    for n in (5, 3, 17, 1, 64, 2):
        _check(model, compiled, {"x": (rng.standard_normal((n, 4)) * 10).astype("float32")})
    # 5, then every size on the generic stretch but 1, which keeps a specialization of its own
    # (a size of 1 can change what the converter makes of a node: shape_generic.MIN_SIZE)
    assert compiled.info["specializations"] == 2 and compiled.info["shape_generic"]["stretches"] == 1
    assert compiled.info["shape_generic"]["calls"] == 4
    # no rows: the means of nothing (a NaN, and 0 for the integer mean, as the static path gives)
    w, m0, m1, mi, c, cat = compiled(np.zeros((0, 4), "float32"))
    assert w.shape == (0, 4) and m1.shape == (0,) and np.isnan(m0).all() and (mi == 0).all() and c.shape == (4, 0)


def test_products_stay_specialized_per_shape():
    """A stretch with a product needs constant shapes: it keeps one specialization per shape."""
    w = np.array([[1, -1], [0.5, 2]], "float32")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2])], [("z", TensorProto.FLOAT)],
                   [onnx.numpy_helper.from_array(w, "w")])
    compiled = tensorforge.compile(from_onnx(model), batch_buckets=None)
    for n in (3, 5, 6):
        _check(model, compiled, {"x": np.random.default_rng(n).standard_normal((n, 2)).astype("float32")})
    assert compiled.info["specializations"] == 3 and compiled.info["shape_generic"]["stretches"] == 0


def test_an_op_that_needs_constant_shapes_keeps_the_specializations():
    """A cumulative sum's compute reads constant shapes: the stretch is refused once, with the
    reason in info, and runs on per-shape specializations as before."""
    model = _model([helper.make_node("CumSum", ["x", "ax"], ["t"]), helper.make_node("Neg", ["t"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])], [("y", TensorProto.FLOAT)],
                   [helper.make_tensor("ax", TensorProto.INT64, [], [1])])
    compiled = tensorforge.compile(from_onnx(model), batch_buckets=None)
    for n in (2, 4, 7):
        _check(model, compiled, {"x": np.arange(3 * n, dtype="float32").reshape(n, 3)})
    info = compiled.info["shape_generic"]
    ((where, reason),) = info["not_generic"].items()
    assert info["stretches"] == 0 and where.endswith("node 0") and reason.startswith("group"), info
    assert compiled.info["specializations"] == 3


def test_varying_dims_share_a_symbol_where_the_sizes_agree():
    old, new = [(3, 4), (3,), (3, 8)], [(5, 4), (5,), (6, 8)]
    assert shape_generic.varying_dims(old, new) == {(0, 0): 0, (1, 0): 0, (2, 0): 1}


def test_generic_stretch_refuses_shapes_that_do_not_fit():
    """The constant dimensions must match and each variable takes one value across the inputs."""
    b = GraphBuilder("two")
    x, y = b.input("x", (3, 4), "float32"), b.input("y", (3, 4), "float32")
    g = b.finish([b.add1("add", [x, y])])
    runner = shape_generic.GenericStretch(g, {(0, 0): 0, (1, 0): 0}, "c")
    a = np.ones((6, 4), "float32")
    np.testing.assert_array_equal(runner(a, a)[0], a + a)
    assert not runner.accepts([a, np.ones((5, 4), "float32")])          # n is 6 and 5
    assert not runner.accepts([a, np.ones((6, 5), "float32")])          # 4 is constant
    assert not runner.accepts([a, a.astype("float64")])
    with pytest.raises(ValueError, match="do not fit the shape-generic kernels"):
        runner(a, np.ones((5, 4), "float32"))
    conv = GraphBuilder("conv")
    xc = conv.input("x", (1, 2, 5, 5), "float32")
    w = conv.const(np.ones((2, 2, 3, 3), "float32"), "w")
    gc = conv.finish([conv.add1("conv2d", [xc, w], {"strides": (1, 1), "padding": (1,) * 4, "dilations": (1, 1),
                                                    "groups": 1})])
    assert not shape_generic.candidate(gc)
    with pytest.raises(shape_generic.NotGeneric, match="conv2d"):
        shape_generic.GenericStretch(gc, {(0, 2): 0}, "c")


def test_kernels_vectorize_and_open_a_parallel_region_only_for_work_enough():
    """Rows of a constant width are vectors; the varying rows run on the thread pool only when a
    call has PARALLEL_MIN_ELEMS elements (the loop's if() clause): a stretch after a
    data-dependent op is often a few rows.  A sum over a varying length adds in float64."""
    b = GraphBuilder("rows")
    x = b.input("x", (3, 256), "float32")
    y = b.add1("sigmoid", [x])
    g = b.finish([y, b.add1("reduce_sum", [y], {"axes": (0,), "keepdims": 0})])
    runner = shape_generic.GenericStretch(g, {(0, 0): 0}, "c")
    text = runner.module.source
    assert "tf_float32x16" in text or "tf_float32x8" in text          # vector rows
    assert "double" in text                                             # the float64 sum
    if runner.target.num_cores > 1:
        assert f"schedule(static) if(n0 >= {-(-16384 // 256)})" in text, text
    rows = np.random.default_rng(0).random((20000, 256)).astype("float32")
    got, total = runner(rows)
    np.testing.assert_allclose(got, 1 / (1 + np.exp(-rows)), rtol=1e-6)
    np.testing.assert_allclose(total, (1 / (1 + np.exp(-rows.astype("float64")))).sum(axis=0), rtol=1e-6)


def test_a_size_of_one_keeps_its_own_specialization():
    """Squeeze with no axes drops every axis of size 1: at n = 1 the converter makes another
    graph than at n = 3 or 5, so the generic stretch (built from those) takes no size below
    MIN_SIZE and n = 1 compiles its own specialization."""
    g = helper.make_graph([helper.make_node("Squeeze", ["x"], ["s"]), helper.make_node("Neg", ["s"], ["y"])], "sq",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    compiled = tensorforge.compile(from_onnx(model), batch_buckets=None)
    for n in (3, 5, 1, 7, 1):
        _check(model, compiled, {"x": np.arange(4 * n, dtype="float32").reshape(n, 1, 4)})
    assert compiled(np.zeros((1, 1, 4), "float32"))[0].shape == (4,)
    assert compiled.info["shape_generic"]["stretches"] == 1 and compiled.info["specializations"] == 2


def test_boxes_kept_by_non_max_suppression_run_generic():
    """NonMaxSuppression keeps a different number of boxes per image; its indices' column is
    sliced (a constant axis) and squeezed, the boxes gathered, scaled and reduced, on one
    generic stretch for every count."""
    f, i = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("NonMaxSuppression", ["boxes", "scores", "maxout", "iou", "sthresh"], ["sel"]),
             helper.make_node("Slice", ["sel", "s2", "e3", "ax1"], ["col"]),
             helper.make_node("Squeeze", ["col", "ax1"], ["idx"]),
             helper.make_node("Squeeze", ["boxes", "ax0"], ["b2"]),
             helper.make_node("Gather", ["b2", "idx"], ["kept"], axis=0),
             helper.make_node("Mul", ["kept", "scale"], ["px"]),
             helper.make_node("ReduceMax", ["px"], ["mx"], axes=[1], keepdims=0)]
    inits = [helper.make_tensor("maxout", i, [1], [100]), helper.make_tensor("iou", f, [1], [0.5]),
             helper.make_tensor("sthresh", f, [1], [0.6]), helper.make_tensor("s2", i, [1], [2]),
             helper.make_tensor("e3", i, [1], [3]), helper.make_tensor("ax1", i, [1], [1]),
             helper.make_tensor("ax0", i, [1], [0]), helper.make_tensor("scale", f, [4], [640, 480, 640, 480])]
    g = helper.make_graph(nodes, "nms", [helper.make_tensor_value_info("boxes", f, [1, 100, 4]),
                                         helper.make_tensor_value_info("scores", f, [1, 1, 100])],
                          [helper.make_tensor_value_info("px", f, None), helper.make_tensor_value_info("mx", f, None)],
                          inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    compiled = tensorforge.compile(from_onnx(model))
    rng = np.random.default_rng(0)
    counts = set()
    for _ in range(6):
        xy = rng.random((1, 100, 2)).astype("float32")
        boxes = np.concatenate([xy, xy + rng.random((1, 100, 2)).astype("float32") * 0.3], axis=2)
        feeds = {"boxes": boxes, "scores": rng.random((1, 1, 100)).astype("float32")}
        _check(model, compiled, feeds)
        counts.add(compiled.run(**feeds)[0].shape[0])
    assert len(counts) >= 3 and compiled.info["shape_generic"]["stretches"] == 1, (counts, compiled.info)


def test_a_loop_that_grows_a_tensor_compiles_its_body_once():
    """A Loop body that appends a row to its carried tensor meets a new length every iteration.
    Its kernels after the concat see n + 1 rows, an expression: each kernel binds a variable of
    its own from the array.  40 iterations: one specialization and one generic stretch (40
    specializations before)."""
    f, i, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["row", "two"], ["row2"]),
         helper.make_node("Concat", ["acc_in", "row2"], ["acc_out"], axis=0),
         helper.make_node("Sigmoid", ["acc_out"], ["sig"]),
         helper.make_node("ReduceSum", ["sig", "ax"], ["tot"], keepdims=0)],
        "body",
        [helper.make_tensor_value_info("i", i, []), helper.make_tensor_value_info("cond_in", b, []),
         helper.make_tensor_value_info("acc_in", f, ["k", 4])],
        [helper.make_tensor_value_info("cond_out", b, []), helper.make_tensor_value_info("acc_out", f, ["k1", 4]),
         helper.make_tensor_value_info("tot", f, [4])],
        [helper.make_tensor("two", f, [], [2.0]), helper.make_tensor("ax", i, [1], [0])])
    g = helper.make_graph([helper.make_node("Loop", ["n", "c", "init"], ["final", "tots"], body=body)], "grow",
                          [helper.make_tensor_value_info("n", i, []), helper.make_tensor_value_info("c", b, []),
                           helper.make_tensor_value_info("init", f, [1, 4]), helper.make_tensor_value_info("row", f, [1, 4])],
                          [helper.make_tensor_value_info("final", f, None), helper.make_tensor_value_info("tots", f, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    compiled = tensorforge.compile(from_onnx(model))
    feeds = {"n": np.array(40, np.int64), "c": np.array(True), "init": np.ones((1, 4), "float32"),
             "row": np.arange(4, dtype="float32").reshape(1, 4)}
    _check(model, compiled, feeds)
    assert compiled.info["specializations"] == 1 and compiled.info["shape_generic"]["stretches"] == 1
    assert repr(compiled).endswith("1 specialization(s) compiled, 1 shape-generic stretch(es))")


_UNARY = ("sigmoid", "tanh", "relu", "abs", "neg")      # (exp of exp of exp overflows: no reference to compare)
_BINARY = ("add", "mul", "sub", "maximum")


def _random_stretch(ops: list, rows: int, width: int):
    """x[rows, width] through `ops` (op name, argument) on the GraphBuilder, with the outputs of
    every step kept (so reductions and element-wise results all come out)."""
    rng = np.random.default_rng(width)
    b = GraphBuilder("random")
    y = b.input("x", (rows, width), "float32")
    outs = []
    for k, (op, arg) in enumerate(ops):
        if op in _UNARY:
            y = b.add1(op, [y])
        elif op in _BINARY:
            row = rng.standard_normal((1, width) if arg else (width,)).astype("float32")
            y = b.add1(op, [y, b.const(row, f"row{k}")])
        elif op == "reduce":
            outs.append(b.add1(arg, [y], {"axes": (1,), "keepdims": 1}))     # one per row
            outs.append(b.add1(arg, [y], {"axes": (0,), "keepdims": 0}))     # over the rows
        elif op == "concat":
            y = b.add1("concat", [y, y], {"axis": 0})
        elif op == "reshape":          # [n, w] -> [n, a, b] -> [n, w]
            a = 4 if width % 4 == 0 else 1
            y = b.add1("reshape", [b.add1("reshape", [y], {"shape": (-1, a, width // a)})], {"shape": (0, -1)})
        elif op == "slice":
            y = b.add1("slice", [y], {"starts": (1,), "ends": (width,), "axes": (1,)}) if width > 1 else y
            width = max(1, width - 1)
    return b.finish([y, *outs])


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(_UNARY + _BINARY + ("reduce", "concat", "slice", "reshape")),
                              st.sampled_from([True, False, "reduce_sum", "reduce_max", "reduce_mean"])),
                    min_size=1, max_size=5),
       width=st.sampled_from([3, 16, 37]), sizes=st.lists(st.integers(2, 70), min_size=2, max_size=3))
def test_generic_stretches_equal_the_reference_at_every_size(ops, width, sizes):
    """Random chains of element-wise ops, broadcasts against constant rows, reductions along
    and across the varying rows, concats along them, slices of the constant axis and reshapes
    of it: the kernels built once from a graph of 5 rows give the reference's results at other
    sizes."""
    from tensorforge.graph.reference import run_reference
    # a reduction's argument names the reducer; a binary op's says whether the row is 2-D
    ops = [(op, arg if isinstance(arg, str) else "reduce_sum") if op == "reduce" else (op, arg is True)
           for op, arg in ops]
    runner = shape_generic.GenericStretch(_random_stretch(ops, 5, width), {(0, 0): 0}, "c")
    for n in sizes:
        graph = _random_stretch(ops, n, width)
        x = np.random.default_rng(n).standard_normal((n, width)).astype("float32")
        for got, want in zip(runner(x), run_reference(graph, x)):
            assert got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def test_reshapes_of_the_constant_axes_run_generic():
    """Reshape with -1 and 0 entries that keep the varying rows as the leading axis
    ([n, 85] -> [n, 5, 17] -> [n, 85], a detector's per-box layout) resolves on shape
    expressions; one that merges the rows with another axis ([n, 85] -> [-1]) needs constants
    and keeps its specializations."""
    f, i = TensorProto.FLOAT, TensorProto.INT64
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Neg", ["r"], ["y"]),
             helper.make_node("Reshape", ["y", "s2"], ["z"])]
    inits = [helper.make_tensor("s", i, [3], [-1, 5, 17]), helper.make_tensor("s2", i, [2], [0, -1])]
    model = _model(nodes, [helper.make_tensor_value_info("x", f, ["n", 85])], [("y", f), ("z", f)], inits)
    compiled = tensorforge.compile(from_onnx(model), batch_buckets=None)
    for n in (3, 5, 7, 40):
        _check(model, compiled, {"x": np.random.default_rng(n).random((n, 85)).astype("float32")})
    assert compiled.info["shape_generic"]["stretches"] == 1 and compiled.info["specializations"] == 1
    flat = _model([helper.make_node("Reshape", ["x", "s"], ["y"])], [helper.make_tensor_value_info("x", f, ["n", 85])],
                  [("y", f)], [helper.make_tensor("s", i, [1], [-1])])
    compiled = tensorforge.compile(from_onnx(flat), batch_buckets=None)
    for n in (3, 5, 7):
        _check(flat, compiled, {"x": np.random.default_rng(n).random((n, 85)).astype("float32")})
    assert compiled.info["shape_generic"]["stretches"] == 0 and compiled.info["specializations"] == 3
