"""Every misuse of a schedule primitive raises ScheduleError naming the stage and axis; bad
arguments are refused before any C code runs."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.codegen.c_like import CodegenError
from tensorforge.te import ScheduleError
from tensorforge.testing import workloads as W


@pytest.fixture
def mm():
    w = W.matmul(16, 16, 8)
    return w, te.create_schedule(w.outputs[0].op), w.outputs[0]


def test_split_axis_of_another_stage():
    w = W.elementwise_chain(4, 8)
    s = te.create_schedule(w.outputs[0].op)
    out = w.outputs[0]
    add = out.op.input_tensors()[0]
    with pytest.raises(ScheduleError, match=r"split on stage relu: axis i is not an axis of this stage; it belongs to stage add"):
        s[out].split(s[add].op.axis[0], factor=2)


def test_split_factor_zero(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="factor must be positive"):
        s[C].split(s[C].op.axis[0], factor=0)


def test_split_needs_exactly_one_amount(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="exactly one of factor or nparts"):
        s[C].split(s[C].op.axis[0])


def test_split_already_split_axis(mm):
    _, s, C = mm
    i = s[C].op.axis[0]
    s[C].split(i, factor=4)
    with pytest.raises(ScheduleError, match="already split or fused"):
        s[C].split(i, factor=2)


def test_vectorize_reduction_axis(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="vectorize on stage C: axis k is a reduction axis"):
        s[C].vectorize(s[C].op.reduce_axis[0])


def test_parallel_reduction_axis(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="reduction axis"):
        s[C].parallel(s[C].op.reduce_axis[0])


def test_fuse_data_with_reduce(mm):
    _, s, C = mm
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    s[C].reorder(i, k, j)
    with pytest.raises(ScheduleError, match="cannot fuse a data axis with a reduction axis"):
        s[C].fuse(i, k)


def test_fuse_not_adjacent(mm):
    _, s, C = mm
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    with pytest.raises(ScheduleError, match="not adjacent"):
        s[C].fuse(i, k)


def test_reorder_duplicate(mm):
    _, s, C = mm
    i, j = s[C].op.axis
    with pytest.raises(ScheduleError, match="given twice"):
        s[C].reorder(i, i)


def test_compute_at_non_consumer():
    A = te.placeholder((4, 8), name="A")
    t = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="t")
    u = te.compute((4, 8), lambda i, j: t[i, j] + 1.0, name="u")
    v = te.compute((4, 8), lambda i, j: A[i, j] * 3.0, name="v")
    s = te.create_schedule([u.op, v.op])
    with pytest.raises(ScheduleError, match="stage v does not consume t"):
        s[t].compute_at(s[v], s[v].op.axis[0])


def test_compute_at_output(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="output stage"):
        s[C].compute_at(s[C], s[C].op.axis[0])


def test_compute_inline_reduction():
    w = W.softmax(3, 5)
    s = te.create_schedule(w.outputs[0].op)
    e = [t for t in w.outputs[0].op.input_tensors() if t.op.name == "exp"][0]
    mx = e.op.input_tensors()[1]
    with pytest.raises(ScheduleError, match="a reduction cannot be inlined"):
        s[mx].compute_inline()


def test_compute_at_placeholder(mm):
    w, s, C = mm
    with pytest.raises(ScheduleError, match="placeholder"):
        s[w.args[0]].compute_at(s[C], s[C].op.axis[0])


def test_attach_outside_some_reader():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((8,), lambda i: B[i] * 2.0, name="C")
    D = te.compute((8,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[C], s[C].op.axis[0])
    with pytest.raises(ScheduleError, match="stage D, which reads it, is outside that loop"):
        tensorforge.lower(s, [A, D])


def test_cache_write_after_scheduling(mm):
    _, s, C = mm
    s[C].split(s[C].op.axis[0], factor=4)
    with pytest.raises(ScheduleError, match="before scheduling"):
        s.cache_write(C, "local")


def test_cache_read_non_reader(mm):
    w, s, C = mm
    other = te.compute((4,), lambda i: w.args[0][i, 0], name="other")
    with pytest.raises(ScheduleError):
        s.cache_read(w.args[0], "local", [other])


def test_bind_needs_thread_axis(mm):
    _, s, C = mm
    with pytest.raises(ScheduleError, match="not a te.thread_axis"):
        s[C].bind(s[C].op.axis[0], s[C].op.axis[1])


def test_bind_refused_by_c_target(mm):
    w, s, C = mm
    s[C].bind(s[C].op.axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(CodegenError, match="bound to thread axis 'blockIdx.x', but the C target has no thread axes"):
        tensorforge.build(s, w.args, target="c")


def test_wrong_index_count():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(te.TensorError, match="has 2 dimension"):
        te.compute((4,), lambda i: A[i], name="B")


def test_missing_placeholder_argument(mm):
    w, s, C = mm
    with pytest.raises(ValueError, match="placeholder B .* not in the argument list"):
        tensorforge.lower(s, [w.args[0], C])


def test_wrong_shape_raises_before_call(mm):
    w, s, C = mm
    f = tensorforge.build(s, w.args)
    a = np.zeros((16, 8), "float32")
    b = np.zeros((8, 16), "float32")
    with pytest.raises(ValueError, match="C"):
        f(a, b, np.zeros((16, 15), "float32"))
    with pytest.raises((TypeError, ValueError), match="A"):
        f(a.astype("float64"), b, np.zeros((16, 16), "float32"))
    with pytest.raises((TypeError, ValueError)):
        f(a, b)


def test_tuple_reduction_with_some_outputs_as_arguments():
    # argmax gives (index, value); Y reads the value, only the index is an argument
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)), name="argmax")
    X = te.placeholder((7, 19), name="X")
    k = te.reduce_axis((0, 19), name="k")
    idx, val = te.compute((7,), lambda i: argmax((k.var, X[i, k]), axis=k), name="am")
    Y = te.compute((7,), lambda i: val[i] * 2.0, name="Y")
    s = te.create_schedule(Y.op)
    with pytest.raises(ValueError, match=r"output am\.v1 of am is not in the argument list"):
        tensorforge.lower(s, [X, idx, Y])
    tensorforge.lower(s, [X, Y])            # none of the outputs: am gets buffers of its own
    tensorforge.lower(s, [X, idx, val, Y])  # all of them
