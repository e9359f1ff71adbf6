"""Tensor intrinsics and `Stage.tensorize` (te/intrin.py, tir/tensorize.py): matching, binding,
the three phases, printing, the interpreter running the pattern, and the errors that name what
differs.  The intrinsics here are written in plain loop-program statements, so the C backend
runs them on any machine."""
import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.ir.expr import Var, const
from tensorforge.te.schedule import ScheduleError
from tensorforge.tir import interp
from tensorforge.tir import nodes as N


def soft_dot(lanes=16, depth=4, b_strides=None, wrong_impl=False, with_update=True, name="soft_dot"):
    """C[j] += sum_k A[k] * B[j, k] (u8 x s8 -> s32), implemented with plain loops over the
    bound buffers (`wrong_impl`: the code stores 1 everywhere, the pattern stays right)."""
    a = te.placeholder((depth,), "uint8", name="a")
    b = te.placeholder((lanes, depth), "int8", name="b")
    k = te.reduce_axis((0, depth), name="k")
    c = te.compute((lanes,), lambda j: te.sum(a[k].astype("int32") * b[j, k].astype("int32"), axis=k), name="c")

    def lower(ins, outs):
        (ab, bb), (cb,) = ins, outs
        j, kk = Var("j"), Var("kk")
        term = ab.load(kk).astype("int32") * bb.load(j, kk).astype("int32")
        value = const(1, "int32") if wrong_impl else cb.load(j) + term
        update = N.For(j, const(0), const(lanes), N.SERIAL, N.For(kk, const(0), const(depth), N.SERIAL,
                                                                  cb.store(value, j)))
        reset = N.For(j, const(0), const(lanes), N.SERIAL, cb.store(const(0, "int32"), j))
        if not with_update:
            return N.seq(reset, update)
        return N.seq(reset, update), reset, update

    binds = {b: te.decl_buffer((lanes, depth), "int8", "b", strides=b_strides)} if b_strides else None
    return te.decl_tensor_intrin(c.op, lower, binds, name=name)


def int8_matmul(m, n, k, transpose_b=False, out_dtype="int32"):
    A = te.placeholder((m, k), "uint8", name="A")
    B = te.placeholder((k, n) if transpose_b else (n, k), "int8", name="B")
    r = te.reduce_axis((0, k), name="r")
    if transpose_b:
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r].astype(out_dtype) * B[r, j].astype(out_dtype), axis=r), name="C")
    else:
        C = te.compute((m, n), lambda i, j: te.sum(A[i, r].astype(out_dtype) * B[j, r].astype(out_dtype), axis=r), name="C")
    return A, B, C


def dot_schedule(A, B, C, jf=16, kf=4, order="kouter"):
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    (r,) = s[C].op.reduce_axis
    jo, ji = s[C].split(j, factor=jf)
    ro, ri = s[C].split(r, factor=kf)
    if order == "kouter":
        s[C].reorder(i, jo, ro, ji, ri)
    else:
        s[C].reorder(i, ro, jo, ji, ri)
    return s, ji, ri


def data(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    return a, b, a.astype(np.int64) @ b.astype(np.int64).T


@pytest.mark.parametrize("order", ["kouter", "kfirst"])
def test_reset_and_update_around_an_outer_reduction(order):
    A, B, C = int8_matmul(5, 32, 24)
    s, ji, _ = dot_schedule(A, B, C, order=order)
    s[C].tensorize(ji, soft_dot())
    func = tensorforge.lower(s, [A, B, C])
    text = str(func)
    assert "# tensorized: soft_dot.update" in text
    assert "# tensorized: soft_dot.reset" in text
    a, b, expect = data(5, 32, 24)
    got = np.full((5, 32), -9, np.int32)
    interp.run(func, a, b, got)
    np.testing.assert_array_equal(got, expect)
    mod = tensorforge.build(s, [A, B, C])
    got = np.full((5, 32), -9, np.int32)
    mod(a, b, got)
    np.testing.assert_array_equal(got, expect)
    assert "tensorized: soft_dot.update" in mod.source


def test_body_when_the_whole_reduction_is_inside():
    A, B, C = int8_matmul(3, 16, 4)
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    s[C].tensorize(j, soft_dot())
    func = tensorforge.lower(s, [A, B, C])
    assert "soft_dot.body" in str(func) and "soft_dot.update" not in str(func)
    a, b, expect = data(3, 16, 4, seed=1)
    got = np.full((3, 16), 5, np.int32)
    tensorforge.build(s, [A, B, C])(a, b, got)
    np.testing.assert_array_equal(got, expect)


def test_scalar_init_when_the_intrinsic_has_no_reset():
    def lower(ins, outs):
        full = soft_dot(name="x").lower_fn(ins, outs)
        return full[0], None, full[2]
    base = soft_dot(name="no_reset")
    intrin = te.decl_tensor_intrin(base.op, lower, name="no_reset")
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, intrin)
    a, b, expect = data(2, 16, 8, seed=2)
    got = np.full((2, 16), 3, np.int32)
    tensorforge.build(s, [A, B, C])(a, b, got)
    np.testing.assert_array_equal(got, expect)


def test_interpreter_runs_the_pattern_and_c_runs_the_implementation():
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot(wrong_impl=True, name="wrong"))
    func = tensorforge.lower(s, [A, B, C])
    a, b, expect = data(2, 16, 8, seed=3)
    got = np.zeros((2, 16), np.int32)
    interp.run(func, a, b, got)
    np.testing.assert_array_equal(got, expect)
    got = np.zeros((2, 16), np.int32)
    tensorforge.build(s, [A, B, C])(a, b, got)
    assert (got == 1).all()


def test_the_binding_follows_the_region():
    """An attached local accumulator: offsets relative to the tile, strides of the tile."""
    A, B, C = int8_matmul(6, 64, 12)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    i, j = s[C].op.axis
    io, jo, ii, ji = s[C].tile(i, j, 3, 32)
    s[CL].compute_at(s[C], jo)
    ci, cj = s[CL].op.axis
    (cr,) = s[CL].op.reduce_axis
    cjo, cji = s[CL].split(cj, factor=16)
    cro, cri = s[CL].split(cr, factor=4)
    s[CL].reorder(cro, ci, cjo, cji, cri)
    s[CL].tensorize(cji, soft_dot())
    func = tensorforge.lower(s, [A, B, C])
    a, b, expect = data(6, 64, 12, seed=4)
    got = np.full((6, 64), 7, np.int32)
    interp.run(func, a, b, got)
    np.testing.assert_array_equal(got, expect)
    got = np.full((6, 64), 7, np.int32)
    tensorforge.build(s, [A, B, C])(a, b, got)
    np.testing.assert_array_equal(got, expect)


# -- mismatches -------------------------------------------------------------------------------
def lower_error(s, args) -> str:
    with pytest.raises(ScheduleError) as info:
        tensorforge.lower(s, args)
    return str(info.value)


def test_dtype_mismatch_is_named():
    A, B, C = int8_matmul(2, 16, 8, out_dtype="int16")
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot())
    msg = lower_error(s, [A, B, C])
    assert "dtype" in msg and "int16" in msg and "soft_dot" in msg


def test_extent_mismatch_is_named():
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, _ = dot_schedule(A, B, C, jf=8)
    s[C].tensorize(ji, soft_dot())
    msg = lower_error(s, [A, B, C])
    assert "j.inner" in msg and "extent 8" in msg and "extent 16" in msg


def test_access_pattern_mismatch_names_the_input():
    A, B, C = int8_matmul(2, 16, 8, transpose_b=True)
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot())
    msg = lower_error(s, [A, B, C])
    assert "access pattern of input b" in msg and "stage buffer B" in msg


def test_declared_stride_must_match():
    A, B, C = int8_matmul(2, 16, 8)          # B rows are 8 apart, the intrinsic wants 4
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot(b_strides=(4, 1), name="packed_dot"))
    msg = lower_error(s, [A, B, C])
    assert "stride 4" in msg and "stride 8" in msg


def test_guard_inside_the_region_is_refused():
    A, B, C = int8_matmul(2, 20, 8)          # 20 columns: the 16-wide split needs a guard
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot())
    assert "guard" in lower_error(s, [A, B, C])


def test_outer_reduction_needs_an_update():
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, _ = dot_schedule(A, B, C)
    s[C].tensorize(ji, soft_dot(with_update=False, name="body_only"))
    assert "update" in lower_error(s, [A, B, C])


def test_a_conditional_reduction_needs_the_same_condition():
    """A triangular reduction (a scan: k <= i) tensorizes with an intrinsic whose reduction has
    that condition over the matched loops (ops/reduce_scan.py's running sum); one with another
    condition (k < i), or none, is refused by name."""
    from tensorforge.ops.reduce_scan import scan_intrin
    x = te.placeholder((3, 9), "float32", name="x")

    def scan(strict):
        def f(r, i):
            k = te.reduce_axis((0, 9), name="k")
            return te.sum(x[r, k], axis=k, where=(k.var < i) if strict else (k.var <= i))
        return te.compute((3, 9), f, name="y")

    y = scan(False)
    s = te.create_schedule(y.op)
    s[y].tensorize(s[y].op.axis[1], scan_intrin("cumsum", 9, "float32", "float32", 0, 0))
    f = tensorforge.build(s, [x, y], target="c")
    data = np.random.default_rng(0).standard_normal((3, 9)).astype("float32")
    out = np.zeros((3, 9), "float32")
    f(data, out)
    np.testing.assert_array_equal(out, np.cumsum(data, axis=1))
    assert "tf_cumsum_float32_float32_9_if" in f.source
    other = scan(True)
    s = te.create_schedule(other.op)
    s[other].tensorize(s[other].op.axis[1], scan_intrin("cumsum", 9, "float32", "float32", 0, 0))
    assert "conditions differ" in lower_error(s, [x, other])


def test_loop_count_mismatch():
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, ri = dot_schedule(A, B, C)
    s[C].tensorize(ri, soft_dot())
    assert "0 data and 1 reduction loops" in lower_error(s, [A, B, C])


def test_tensorize_arguments_are_checked():
    A, B, C = int8_matmul(2, 16, 8)
    s, ji, _ = dot_schedule(A, B, C)
    with pytest.raises(ScheduleError, match="tensor intrinsic"):
        s[C].tensorize(ji, "vnni")
    s[C].tensorize(ji, soft_dot())
    s[C].split(ji, factor=4)
    assert "no longer a loop" in lower_error(s, [A, B, C])


def test_decl_tensor_intrin_checks_its_pattern():
    a = te.placeholder((4,), "float32", name="a")
    b = te.compute((4,), lambda i: a[i] * 2, name="b")
    c = te.compute((4,), lambda i: b[i] + 1, name="c")
    with pytest.raises(te.IntrinError, match="placeholders only"):
        te.decl_tensor_intrin(c.op, lambda ins, outs: None)
    with pytest.raises(te.IntrinError, match="is int8 but tensor a is float32"):
        te.decl_tensor_intrin(b.op, lambda ins, outs: None, binds={a: te.decl_buffer((4,), "int8", "a")})
