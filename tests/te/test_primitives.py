"""Every schedule primitive on several computes, compiled to C and run on the reference
interpreter, against NumPy."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.testing import check_schedule
from tensorforge.testing import workloads as W


def sched(w):
    return te.create_schedule([t.op for t in w.outputs])


@pytest.mark.parametrize("name", sorted(W.ALL))
def test_default_schedule(name):
    w = W.ALL[name]()
    check_schedule(sched(w), w.args, w.reference, rtol=1e-4, atol=1e-4)


def test_matmul_tile_split_reorder_vectorize_parallel():
    w = W.matmul(32, 48, 20)
    s = sched(w)
    C = w.outputs[0]
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, jo, ii, ji = s[C].tile(i, j, 8, 16)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ki, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    s[C].unroll(ki)
    func = check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)
    assert "ramp(" in str(func)  # really vectorized


def test_non_divisible_split_and_nparts():
    w = W.matmul(13, 29, 11)
    s = sched(w)
    C = w.outputs[0]
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, nparts=3)
    jo, ji = s[C].split(j, factor=8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].vectorize(ji)
    check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)


def test_fuse_then_split_and_parallel():
    w = W.elementwise_chain(7, 37)
    s = sched(w)
    out = w.outputs[0]
    i, j = s[out].op.axis
    f = s[out].fuse(i, j)
    fo, fi = s[out].split(f, factor=16)
    s[out].parallel(fo)
    s[out].vectorize(fi)
    check_schedule(s, w.args, w.reference)


def test_compute_inline_and_compute_at():
    w = W.elementwise_chain(6, 40)
    s = sched(w)
    out = w.outputs[0]
    mul, add = out.op.input_tensors()[0].op.input_tensors()[0], out.op.input_tensors()[0]
    s[mul].compute_inline()
    i, j = s[out].op.axis
    jo, ji = s[out].split(j, factor=8)
    s[add].compute_at(s[out], jo)
    s[out].vectorize(ji)
    func = check_schedule(s, w.args, w.reference)
    text = str(func)
    assert "mul = allocate" not in text  # inlined: no buffer of its own
    assert "allocate([1, 8]" in text  # the attached stage computes one 1x8 tile


def test_compute_root_undoes_attachment():
    w = W.elementwise_chain(5, 9)
    s = sched(w)
    out = w.outputs[0]
    add = out.op.input_tensors()[0]
    s[add].compute_at(s[out], s[out].op.axis[0])
    s[add].compute_root()
    check_schedule(s, w.args, w.reference)


def test_softmax_compute_at_rows():
    w = W.softmax(5, 40)
    s = sched(w)
    out = w.outputs[0]
    total = out.op.input_tensors()[1] if out.op.input_tensors()[0].op.name == "exp" else out.op.input_tensors()[0]
    e = [t for t in out.op.input_tensors() if t.op.name == "exp"][0]
    mx = [t for t in e.op.input_tensors() if t.op.name == "rowmax"][0]
    row = s[out].op.axis[0]
    for t in (mx, e, total):
        s[t].compute_at(s[out], row)
    jo, ji = s[out].split(s[out].op.axis[1], factor=16)
    s[out].vectorize(ji)
    s[out].parallel(row)
    check_schedule(s, w.args, w.reference, rtol=1e-5, atol=1e-6)


def test_conv2d_padding_stage_compute_at():
    w = W.conv2d(1, 3, 12, 11, 8, 3, 3, 1)
    s = sched(w)
    conv = w.outputs[0]
    pad = conv.op.input_tensors()[0]
    b, o, y, x = s[conv].op.axis
    yo, yi = s[conv].split(y, factor=4)
    s[pad].compute_at(s[conv], yo)
    oo, oi = s[conv].split(o, factor=4)
    s[conv].reorder(b, yo, oo, yi, x, oi)
    check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)


def test_conv2d_strided_inline_pad():
    w = W.conv2d(1, 2, 9, 9, 3, 3, 3, 1, 2)
    s = sched(w)
    pad = w.outputs[0].op.input_tensors()[0]
    s[pad].compute_inline()
    check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)


def test_cache_write_local_with_compute_at():
    w = W.matmul(32, 32, 16)
    s = sched(w)
    C = w.outputs[0]
    CC = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 4, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ci)
    s[C].vectorize(ji)
    func = check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)
    assert "allocate([4, 16], float32, 'local')" in str(func)


def test_cache_read_with_compute_at():
    w = W.matmul(16, 32, 24)
    s = sched(w)
    C = w.outputs[0]
    B = w.args[1]
    BB = s.cache_read(B, "local", [C])
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    ko, ki = s[C].split(k, factor=8)
    s[C].reorder(ko, i, ki, j)
    s[BB].compute_at(s[C], ko)
    func = check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4)
    assert "allocate([8, 32]" in str(func)


def test_int8_matmul_to_int32():
    w = W.matmul_int8(16, 32, 40)
    s = sched(w)
    C = w.outputs[0]
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    s[C].vectorize(ji)
    check_schedule(s, w.args, w.reference)


def test_two_outputs_reductions():
    w = W.reductions(9, 21)
    s = sched(w)
    mx, sm = w.outputs
    ko, ki = s[mx].split(s[mx].op.reduce_axis[0], factor=5)
    s[sm].parallel(s[sm].op.axis[0])
    check_schedule(s, w.args, w.reference, rtol=1e-5, atol=1e-5)


def test_pragma_and_set_scope():
    w = W.elementwise_chain(4, 16)
    s = sched(w)
    out = w.outputs[0]
    add = out.op.input_tensors()[0]
    s[add].set_scope("local")
    s[out].pragma(s[out].op.axis[0], "unroll_explicit")
    check_schedule(s, w.args, w.reference)


def _panel_product(k_extent=8, n=64, nr=32):
    A = te.placeholder((4, k_extent), name="A")
    B = te.placeholder((n // nr, k_extent, nr), name="B")         # column panels
    k = te.reduce_axis((0, k_extent), name="k")
    C = te.compute((4, n), lambda i, j: te.sum(A[i, k] * B[j // nr, k, j % nr], axis=k), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=nr)
    s[C].reorder(jo, i, k, ji)
    return s, (A, B, C), k


def test_prefetch_asks_for_what_a_later_iteration_reads():
    """prefetch(B, k, 8) at the k loop of a product over panels (2, 8, 32): each k step asks for
    the row that k + 8 reads, i.e. the same row of the next panel, one prefetch per 64-byte line
    of the 32 columns the inner loop sweeps; results are unchanged."""
    s, (A, B, C), k = _panel_product()
    s[C].prefetch(B, k, 8)
    text = str(tensorforge.lower(s, [A, B, C]))
    assert "prefetch(B[j.outer * 256 + k * 32 + 256])" in text
    assert "prefetch(B[j.outer * 256 + k * 32 + 272])" in text and text.count("prefetch(") == 2
    f = tensorforge.build(s, [A, B, C], target="c")
    assert f.source.count("__builtin_prefetch(") == 2
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((4, 8)).astype("float32"), rng.standard_normal((2, 8, 32)).astype("float32")
    c = np.full((4, 64), np.nan, "float32")
    f(a, b, c)
    np.testing.assert_allclose(c, a @ b.transpose(1, 0, 2).reshape(8, 64), rtol=1e-5, atol=1e-5)


def test_prefetch_offset_must_be_a_positive_number_of_iterations():
    s, (A, B, C), k = _panel_product()
    with pytest.raises(te.ScheduleError, match="positive number of iterations"):
        s[C].prefetch(B, k, 0)


def test_argmax_tuple_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]
        return te.if_then_else(keep, x[0], y[0]), te.if_then_else(keep, x[1], y[1])

    def fidentity(t0, t1):
        return te.const(-1, t0), te.min_value(t1)

    argmax = te.comm_reducer(fcombine, fidentity, name="argmax")
    n, m = 7, 19
    X = te.placeholder((n, m), name="X")
    k = te.reduce_axis((0, m), name="k")
    idx, val = te.compute((n,), lambda i: argmax((k.var, X[i, k]), axis=k), name="am")
    s = te.create_schedule(idx.op)
    check_schedule(s, [X, idx, val], lambda x: (x.argmax(axis=1).astype("int32"), x.max(axis=1)))


def test_symbolic_shape():
    n = te.var("n")
    A = te.placeholder((n, 16), name="A")
    B = te.compute((n, 16), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    io, ii = s[B].split(s[B].op.axis[0], factor=4)
    s[B].vectorize(s[B].op.axis[1])
    func = tensorforge.lower(s, [A, B])
    mod = tensorforge.build(func)
    for rows in (1, 7, 12):
        a = np.random.rand(rows, 16).astype("float32")
        b = np.zeros_like(a)
        mod(a, b)
        np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_floor_division_semantics():
    n = 17
    A = te.placeholder((n,), "int32", name="A")
    B = te.compute((n,), lambda i: A[i] // 3 + A[i] % 4 + (A[i] - 5) // (i + 1), name="B")
    s = te.create_schedule(B.op)
    check_schedule(s, [A, B], lambda a: a // 3 + a % 4 + (a - 5) // (np.arange(n) + 1))


def test_math_intrinsics():
    n = 33
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.exp(A[i]) + te.sqrt(te.abs(A[i])) + te.tanh(A[i]) + te.sigmoid(A[i])
                   + te.erf(A[i]) + te.floor(A[i] * 3) + te.round(A[i] * 5) + te.pow(te.abs(A[i]), 1.5)
                   + te.log(te.abs(A[i]) + 1) + te.sin(A[i]) * te.cos(A[i]) + te.rsqrt(A[i] * A[i] + 1),
                   name="B")
    s = te.create_schedule(B.op)
    from math import erf
    verf = np.vectorize(erf)

    def ref(a):
        return (np.exp(a) + np.sqrt(np.abs(a)) + np.tanh(a) + 1 / (1 + np.exp(-a)) + verf(a)
                + np.floor(a * 3) + np.round(a * 5) + np.abs(a) ** 1.5 + np.log(np.abs(a) + 1)
                + np.sin(a) * np.cos(a) + 1 / np.sqrt(a * a + 1)).astype("float32")

    check_schedule(s, [A, B], ref, rtol=1e-5, atol=1e-5)
