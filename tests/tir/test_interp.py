"""The reference interpreter: hand-built PrimFuncs run on NumPy, checked against NumPy / Python."""
import math

import numpy as np
import pytest

from tensorforge.ir import expr as E
from tensorforge.ir.expr import Broadcast, Call, Cast, Let, Ramp, Select, Var, call_intrin, const
from tensorforge.tir import interp
from tensorforge.tir.nodes import (
    PARALLEL,
    SERIAL,
    THREAD_BINDING,
    UNROLLED,
    VECTORIZED,
    Allocate,
    AttrStmt,
    Buffer,
    BufferLoad,
    BufferStore,
    Evaluate,
    For,
    IfThenElse,
    LetStmt,
    PrimFunc,
    seq,
)

rng = np.random.default_rng(0)


def loop(var, extent, body, kind=SERIAL, start=0):
    return For(var, E.convert(start), E.convert(extent), kind, body)


def load(buf, *idx):
    return BufferLoad(buf, tuple(E.convert(i) for i in idx))


def store(buf, value, *idx):
    return BufferStore(buf, E.convert(value), tuple(E.convert(i) for i in idx))


def elementwise(op, dtype, n=16):
    """B[i] = op(A[i]) over a 1-D buffer of `n` elements."""
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    i = Var("i")
    return PrimFunc("ew", (A, B), loop(i, n, store(B, op(load(A, i)), i)))


def binary(op, dtype, out_dtype=None, n=16):
    A, B = Buffer("A", (n,), dtype), Buffer("B", (n,), dtype)
    C = Buffer("C", (n,), out_dtype or dtype)
    i = Var("i")
    return PrimFunc("bin", (A, B, C), loop(i, n, store(C, op(load(A, i), load(B, i)), i)))


def matmul(n, flat=False, kind=SERIAL):
    A, B, C = (Buffer(x, (n, n), "float32") for x in "ABC")
    i, j, k = Var("i"), Var("j"), Var("k")
    if flat:
        a, b, c = (i * n + k,), (k * n + j,), (i * n + j,)
    else:
        a, b, c = (i, k), (k, j), (i, j)
    update = store(C, load(C, *c) + load(A, *a) * load(B, *b), *c)
    body = loop(i, n, loop(j, n, seq(store(C, const(0.0), *c), loop(k, n, update))), kind)
    return PrimFunc("matmul", (A, B, C), body)


# --------------------------------------------------------------------------------------------
# Loop nests


def test_elementwise_add():
    f = binary(lambda a, b: a + b, "float32")
    a, b = rng.random(16, dtype=np.float32), rng.random(16, dtype=np.float32)
    c = np.zeros(16, np.float32)
    interp.run(f, a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("flat", [False, True])
def test_matmul_init_and_update(flat):
    f = matmul(8, flat)
    a, b = rng.random((8, 8), dtype=np.float32), rng.random((8, 8), dtype=np.float32)
    c = np.full((8, 8), 7.0, np.float32)
    interp.run(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
    src = interp.python_source(f)
    assert ("C_f[i * 8 + j]" if flat else "C[i, j]") in src


def test_matmul_64_cubed_is_translated_once(monkeypatch):
    # What keeps the interpreter fast: a PrimFunc becomes Python text once, then runs as plain
    # nested loops; a second run reuses the compiled function.
    translations = []
    real = interp.translate
    monkeypatch.setattr(interp, "translate", lambda func: translations.append(func) or real(func))
    f = matmul(64, flat=True, kind=PARALLEL)
    a, b = rng.random((64, 64), dtype=np.float32), rng.random((64, 64), dtype=np.float32)
    for _ in range(2):
        c = np.full((64, 64), np.nan, np.float32)
        interp.run(f, a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    assert translations == [f]
    src = interp.python_source(f)
    assert src.count("for ") == 3 and "C_f[i * 64 + j]" in src


def test_loop_kinds_run_serially_and_nonzero_min():
    A = Buffer("A", (10,), "int32")
    i = Var("i")
    for kind in (SERIAL, PARALLEL, VECTORIZED, UNROLLED):
        f = PrimFunc("k", (A,), loop(i, 6, store(A, i * 2, i), kind, start=3))
        a = np.zeros(10, np.int32)
        interp.run(f, a)
        np.testing.assert_array_equal(a, [0, 0, 0, 6, 8, 10, 12, 14, 16, 0])


def test_thread_binding_is_refused_clearly():
    A = Buffer("A", (4,), "float32")
    tx = Var("tx")
    f = PrimFunc("g", (A,), For(tx, const(0), const(4), THREAD_BINDING, store(A, const(1.0), tx),
                                thread_tag="threadIdx.x"))
    with pytest.raises(NotImplementedError, match="threadIdx.x"):
        interp.run(f, np.zeros(4, np.float32))


def test_if_let_attr_evaluate():
    A, B = Buffer("A", (8,), "int32"), Buffer("B", (8,), "int32")
    i, t = Var("i"), Var("t")
    body = loop(i, 8, LetStmt(t, load(A, i) * 3, AttrStmt("pragma_x", 1, seq(
        Evaluate(const(0)),
        IfThenElse(t % 2 == 0, store(B, t, i), store(B, -t, i))))))
    f = PrimFunc("ifs", (A, B), body)
    a = np.arange(8, dtype=np.int32) - 3
    b = np.zeros(8, np.int32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.where(a * 3 % 2 == 0, a * 3, -a * 3))


def test_allocate_temporary_and_garbage_fill():
    A, B = Buffer("A", (4, 8), "float32"), Buffer("B", (4,), "float32")
    T = Buffer("T", (8,), "float32", scope="local")
    i, j = Var("i"), Var("j")
    body = loop(i, 4, Allocate(T, seq(
        loop(j, 8, store(T, load(A, i, j) * 2.0, j)),
        store(B, const(0.0), i),
        loop(j, 8, store(B, load(B, i) + load(T, j), i)))))
    f = PrimFunc("tmp", (A, B), body)
    a = rng.random((4, 8), dtype=np.float32)
    b = np.zeros(4, np.float32)
    interp.run(f, a, b)
    np.testing.assert_allclose(b, (a * 2).sum(axis=1), rtol=1e-6)
    # Reading a temporary that was never written shows up as NaN, not as a lucky zero.
    f2 = PrimFunc("uninit", (B,), Allocate(T, loop(i, 4, store(B, load(T, i), i))))
    interp.run(f2, b)
    assert np.isnan(b).all()


def test_same_names_are_distinct_objects():
    # Two buffers called "A" and two loop variables called "i": identity, not name, counts.
    A1, A2 = Buffer("A", (4,), "int32"), Buffer("A", (4,), "int32")
    i1, i2 = Var("i"), Var("i")
    body = loop(i1, 4, loop(i2, 4, store(A2, load(A2, i1) + i2, i1)))
    f = PrimFunc("dup", (A1, A2), seq(loop(i1, 4, store(A1, i1 * 10, i1)), body))
    a1, a2 = np.zeros(4, np.int32), np.zeros(4, np.int32)
    interp.run(f, a1, a2)
    np.testing.assert_array_equal(a1, [0, 10, 20, 30])
    np.testing.assert_array_equal(a2, [6, 6, 6, 6])


# --------------------------------------------------------------------------------------------
# Vectors


def test_vector_ramp_broadcast_load_store():
    A, B = Buffer("A", (4, 16), "float32"), Buffer("B", (4, 16), "float32")
    i, j = Var("i"), Var("j")
    idx = Ramp(i * 16 + j * 4, const(1), 4)
    value = BufferLoad(A, (idx,)) * Broadcast(const(2.0), 4) + Broadcast(const(1.0), 4)
    assert value.dtype == "float32x4"
    f = PrimFunc("vec", (A, B), loop(i, 4, loop(j, 4, BufferStore(B, value, (idx,)))))
    a = rng.random((4, 16), dtype=np.float32)
    b = np.zeros((4, 16), np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))


def test_stride_two_gather_and_scatter():
    A, B = Buffer("A", (16,), "int32"), Buffer("B", (16,), "int32")
    i = Var("i")
    gather = BufferLoad(A, (Ramp(i, const(2), 8),))  # A[i], A[i+2], ..., A[i+14]
    f = PrimFunc("g", (A, B), loop(i, 2, BufferStore(B, gather, (Ramp(i * 8, const(1), 8),))))
    a = np.arange(16, dtype=np.int32) * 3
    b = np.zeros(16, np.int32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.concatenate([a[0::2], a[1::2]]))
    # scatter: B[2*k + i] = A[8*i + k]
    f2 = PrimFunc("s", (A, B), loop(i, 2, BufferStore(
        B, BufferLoad(A, (Ramp(i * 8, const(1), 8),)), (Ramp(i, const(2), 8),))))
    interp.run(f2, a, b)
    np.testing.assert_array_equal(b, a.reshape(2, 8).T.reshape(-1))


def test_multidim_vector_index_and_vector_select():
    A, B = Buffer("A", (4, 8), "float32"), Buffer("B", (4, 8), "float32")
    i = Var("i")
    ramp = Ramp(const(0), const(1), 8)
    x = BufferLoad(A, (Broadcast(i, 8), ramp))
    relu = Select(x > Broadcast(const(0.0), 8), x, Broadcast(const(0.0), 8))
    f = PrimFunc("relu", (A, B), loop(i, 4, BufferStore(B, relu, (Broadcast(i, 8), ramp))))
    a = rng.standard_normal((4, 8)).astype(np.float32)
    b = np.zeros((4, 8), np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.maximum(a, 0))


def test_vector_int_lanes_wrap_and_cast():
    A, B = Buffer("A", (8,), "int8"), Buffer("B", (8,), "float32")
    idx = Ramp(const(0), const(1), 8)
    x = BufferLoad(A, (idx,))
    f = PrimFunc("v8", (A, B), BufferStore(B, Cast("float32x8", x + x), (idx,)))
    a = np.array([1, 100, -100, 127, -128, 5, 60, 64], np.int8)
    b = np.zeros(8, np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, (a + a).astype(np.float32))


# --------------------------------------------------------------------------------------------
# Scalar semantics like C


def test_select_guards_out_of_bounds_load():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (10,), "float32")
    i = Var("i")
    guarded = Select(i < 8, load(A, i), const(-1.0))
    f = PrimFunc("pad", (A, B), loop(i, 10, store(B, guarded, i)))
    a = rng.random(8, dtype=np.float32)
    b = np.zeros(10, np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.concatenate([a, [-1, -1]]).astype(np.float32))
    # && does not evaluate its right side when the left is false (C short-circuit).
    g = PrimFunc("and", (A, B), loop(i, 10, IfThenElse(
        (i < 8) & (load(A, i) > 0.5), store(B, const(1.0), i), store(B, const(0.0), i))))
    interp.run(g, a, b)
    np.testing.assert_array_equal(b[:8], (a > 0.5).astype(np.float32))


def test_out_of_bounds_index_raises_naming_buffer():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    f = PrimFunc("oob", (A, B), loop(i, 8, store(B, load(A, i - 1), i)))  # A[-1]
    with pytest.raises(IndexError, match="'A'"):
        interp.run(f, np.zeros(8, np.float32), np.zeros(8, np.float32))
    g = PrimFunc("oob2", (A, B), loop(i, 8, store(B, load(A, i + 1), i)))  # A[8]
    with pytest.raises(IndexError, match="index 8 .*'A'"):
        interp.run(g, np.zeros(8, np.float32), np.zeros(8, np.float32))


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_floordiv_floormod_on_negative_ints_match_python(dtype):
    vals = np.array([-7, -6, -1, 0, 1, 5, 7, -128 if dtype == "int8" else -100], dtype)
    divs = np.array([2, -2, 3, -3, 5, -4, 1, 7], dtype)
    for op, ref in ((lambda a, b: a // b, lambda x, y: x // y),
                    (lambda a, b: a % b, lambda x, y: x % y)):
        f = binary(op, dtype, n=8)
        c = np.zeros(8, dtype)
        interp.run(f, vals, divs, c)
        assert c.tolist() == [ref(int(x), int(y)) for x, y in zip(vals, divs)]


def test_integer_div_truncates_like_c():
    f = binary(lambda a, b: E.Div(a, b), "int32", n=6)
    a = np.array([7, -7, 7, -7, 6, -1], np.int32)
    b = np.array([2, 2, -2, -2, 3, 4], np.int32)
    c = np.zeros(6, np.int32)
    interp.run(f, a, b, c)
    assert c.tolist() == [3, -3, -3, 3, 2, 0]


def test_int8_and_uint_wraparound():
    f = binary(lambda a, b: a + b, "int8")
    a = np.full(16, 100, np.int8)
    c = np.zeros(16, np.int8)
    interp.run(f, a, a, c)
    assert (c == -56).all()
    g = binary(lambda a, b: a - b, "uint32", n=2)
    c = np.zeros(2, np.uint32)
    interp.run(g, np.array([3, 0], np.uint32), np.array([5, 1], np.uint32), c)
    assert c.tolist() == [2 ** 32 - 2, 2 ** 32 - 1]
    h = binary(lambda a, b: a * b, "int32", n=1)
    c = np.zeros(1, np.int32)
    interp.run(h, np.array([65536], np.int32), np.array([65536 + 3], np.int32), c)
    assert c.tolist() == [3 * 65536]


def test_int_ops_match_numpy_wrapping_arithmetic():
    # NumPy array arithmetic wraps like C; the scalar path must agree on every op and dtype.
    for dtype in ("int8", "int16", "int32", "uint8", "uint16", "int64"):
        info = np.iinfo(dtype)
        a = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
        b = rng.integers(info.min, info.max, 64, dtype=dtype, endpoint=True)
        b[b == 0] = 1
        for op, ref in ((lambda x, y: x + y, np.add), (lambda x, y: x - y, np.subtract),
                        (lambda x, y: x * y, np.multiply), (E.Min, np.minimum), (E.Max, np.maximum)):
            c = np.zeros(64, dtype)
            interp.run(binary(op, dtype, n=64), a, b, c)
            np.testing.assert_array_equal(c, ref(a, b), err_msg=f"{dtype}")


def test_float32_arithmetic_rounds_in_float32():
    f = binary(lambda a, b: (a + b) - a, "float32", n=1)
    c = np.zeros(1, np.float32)
    interp.run(f, np.array([1e8], np.float32), np.array([1.0], np.float32), c)
    assert c.dtype == np.float32
    assert c[0] == 0.0  # in float64 it would be 1.0
    g = binary(lambda a, b: a / b, "float32", n=1)
    interp.run(g, np.array([1.0], np.float32), np.array([3.0], np.float32), c)
    assert c[0] == np.float32(1) / np.float32(3)
    h = binary(lambda a, b: a / b, "float32", n=1)
    interp.run(h, np.array([1.0], np.float32), np.array([0.0], np.float32), c)
    assert c[0] == np.inf


def test_float16_computes_in_float16():
    f = binary(lambda a, b: (a + b) - a, "float16", n=1)
    c = np.zeros(1, np.float16)
    interp.run(f, np.array([2048], np.float16), np.array([1.0], np.float16), c)
    assert c[0] == 0.0  # 2048 + 1 rounds back to 2048 in float16


def test_float_floordiv_floormod():
    f = binary(lambda a, b: a // b, "float32", n=4)
    g = binary(lambda a, b: a % b, "float32", n=4)
    a = np.array([7.5, -7.5, 7.5, -1.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, 3.0], np.float32)
    c = np.zeros(4, np.float32)
    interp.run(f, a, b, c)
    np.testing.assert_array_equal(c, np.floor(a / b))
    interp.run(g, a, b, c)
    np.testing.assert_array_equal(c, a - np.floor(a / b) * b)


def test_float_min_max_follow_the_c_form():
    # C prints min as `a < b ? a : b`: a NaN on the left yields b, a NaN on the right yields NaN.
    a = np.array([np.nan, 1.0, 2.0, -0.0], np.float32)
    b = np.array([1.0, np.nan, -3.0, 0.0], np.float32)
    for cls, cmp in ((E.Min, np.less), (E.Max, np.greater)):
        want = np.where(cmp(a, b), a, b)
        c = np.zeros(4, np.float32)
        interp.run(binary(cls, "float32", n=4), a, b, c)
        np.testing.assert_array_equal(c, want)
        A, B, C = (Buffer(x, (4,), "float32") for x in "ABC")
        idx = Ramp(const(0), const(1), 4)
        v = PrimFunc("v", (A, B, C), BufferStore(C, cls(BufferLoad(A, (idx,)), BufferLoad(B, (idx,))), (idx,)))
        c = np.zeros(4, np.float32)
        interp.run(v, a, b, c)
        np.testing.assert_array_equal(c, want)


def test_casts():
    f = elementwise(lambda x: Cast("float32", Cast("int32", x)), "float32", n=6)
    a = np.array([2.7, -2.7, 0.5, -0.5, 1e3, -3.0], np.float32)
    b = np.zeros(6, np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.trunc(a))
    A, B = Buffer("A", (3,), "int32"), Buffer("B", (3,), "float32")
    C = Buffer("C", (3,), "int8")
    D = Buffer("D", (3,), "bool")
    i = Var("i")
    x = load(A, i)
    g = PrimFunc("casts", (A, B, C, D), loop(i, 3, seq(
        store(B, Cast("float32", x), i),           # int -> float rounds to nearest
        store(C, Cast("int8", x), i),              # narrowing wraps
        store(D, Cast("bool", x), i))))
    a = np.array([16777217, 300, 0], np.int32)
    b, c, d = np.zeros(3, np.float32), np.zeros(3, np.int8), np.ones(3, bool)
    interp.run(g, a, b, c, d)
    np.testing.assert_array_equal(b, a.astype(np.float32))
    np.testing.assert_array_equal(c, a.astype(np.int8))
    assert d.tolist() == [True, True, False]


def test_compare_and_logic_into_bool_buffer():
    A, B = Buffer("A", (6,), "int32"), Buffer("B", (6,), "bool")
    i = Var("i")
    x = load(A, i)
    cond = ~((x < 2) | (x >= 4)) | (x == -1)
    f = PrimFunc("logic", (A, B), loop(i, 6, store(B, cond, i)))
    a = np.array([-1, 1, 2, 3, 4, 5], np.int32)
    b = np.zeros(6, bool)
    interp.run(f, a, b)
    assert b.tolist() == [True, False, True, True, False, False]


def test_let_expression():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    i, t = Var("i"), Var("t", "float32")
    f = PrimFunc("let", (A, B), loop(i, 4, store(B, Let(t, load(A, i) * 2.0, t * t + t), i)))
    a = rng.random(4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    interp.run(f, a, b)
    t_ = a * np.float32(2)
    np.testing.assert_array_equal(b, t_ * t_ + t_)


UNARY = ["exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "tanh", "sigmoid", "erf",
         "abs", "floor", "ceil", "round", "trunc", "sin", "cos", "tan", "asin", "acos", "atan",
         "sinh", "cosh", "asinh", "acosh", "atanh"]


def _unary_ref(op, x):
    table = {"rsqrt": lambda v: 1 / np.sqrt(v), "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
             "erf": np.vectorize(math.erf), "round": np.rint, "asin": np.arcsin,
             "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh, "acosh": np.arccosh,
             "atanh": np.arctanh}
    return table.get(op, getattr(np, op, None))(x.astype(np.float64))


@pytest.mark.parametrize("op", UNARY)
def test_unary_intrinsics_match_numpy(op):
    n = 16
    if op == "acosh":
        a = np.linspace(1.0, 5.0, n).astype(np.float32)
    elif op in ("asin", "acos", "atanh"):
        a = np.linspace(-0.9, 0.9, n).astype(np.float32)
    elif op in ("log", "log2", "log1p", "sqrt", "rsqrt"):
        a = np.linspace(0.1, 9.0, n).astype(np.float32)
    else:
        a = np.linspace(-2.6, 2.6, n).astype(np.float32)
    f = elementwise(lambda x: call_intrin(op, x), "float32", n)
    b = np.zeros(n, np.float32)
    interp.run(f, a, b)
    np.testing.assert_allclose(b, _unary_ref(op, a), rtol=2e-6, atol=1e-6)


def test_binary_and_predicate_intrinsics():
    a = np.array([2.0, -3.5, 0.5, 9.0], np.float32)
    b = np.array([3.0, 2.0, -1.5, 4.0], np.float32)
    for op, ref in (("pow", np.power), ("atan2", np.arctan2), ("fmod", np.fmod)):
        c = np.zeros(4, np.float32)
        interp.run(binary(lambda x, y: call_intrin(op, x, y), "float32", n=4), a, b, c)  # noqa: B023
        np.testing.assert_allclose(c, ref(a, b), rtol=1e-6)
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "bool")
    i = Var("i")
    f = PrimFunc("nan", (A, B), loop(i, 4, store(B, call_intrin("isnan", load(A, i)) |
                                               call_intrin("isinf", load(A, i)), i)))
    out = np.zeros(4, bool)
    interp.run(f, np.array([np.nan, 1.0, -np.inf, 0.0], np.float32), out)
    assert out.tolist() == [True, False, True, False]


def test_vector_intrinsic_keeps_dtype():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (8,), "float32")
    idx = Ramp(const(0), const(1), 8)
    f = PrimFunc("vexp", (A, B), BufferStore(B, call_intrin("erf", BufferLoad(A, (idx,))) +
                                             call_intrin("exp", BufferLoad(A, (idx,))), (idx,)))
    a = np.linspace(-1, 1, 8).astype(np.float32)
    b = np.zeros(8, np.float32)
    interp.run(f, a, b)
    np.testing.assert_allclose(b, np.vectorize(math.erf)(a) + np.exp(a), rtol=1e-6)


def test_deep_expression_is_split():
    # A 600-deep right-nested sum would exceed Python's parser limits if printed as one line.
    A, B = Buffer("A", (600,), "float32"), Buffer("B", (1,), "float32")
    total = load(A, 599)
    for k in range(598, -1, -1):
        total = E.Add(load(A, k), total)
    f = PrimFunc("deep", (A, B), store(B, total, 0))
    a = rng.random(600, dtype=np.float32)
    b = np.zeros(1, np.float32)
    interp.run(f, a, b)
    ref = a[599]
    for k in range(598, -1, -1):
        ref = a[k] + ref
    assert b[0] == ref


# --------------------------------------------------------------------------------------------
# Arguments and shapes


def test_symbolic_shape_bound_from_array():
    n = Var("n")
    A, B = Buffer("A", (n, 3), "float32"), Buffer("B", (n,), "float32")
    i, j = Var("i"), Var("j")
    body = loop(i, n, seq(store(B, const(0.0), i), loop(j, 3, store(B, load(B, i) + load(A, i, j), i))))
    f = PrimFunc("rowsum", (A, B), body, shape_vars=(n,))
    for rows in (1, 5):
        a = rng.random((rows, 3), dtype=np.float32)
        b = np.zeros(rows, np.float32)
        interp.run(f, a, b)
        np.testing.assert_allclose(b, a.sum(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match=r"'B'.*n=5"):
        interp.run(f, np.zeros((5, 3), np.float32), np.zeros(4, np.float32))


def test_computed_dimension_is_checked():
    n = Var("n")
    A, B = Buffer("A", (n,), "float32"), Buffer("B", (n * 2,), "float32")
    i = Var("i")
    f = PrimFunc("dup", (A, B), loop(i, n * 2, store(B, load(A, i // 2), i)), shape_vars=(n,))
    a = rng.random(3, dtype=np.float32)
    b = np.zeros(6, np.float32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, np.repeat(a, 2))
    with pytest.raises(ValueError, match="'B'"):
        interp.run(f, a, np.zeros(5, np.float32))


def test_argument_errors_name_the_parameter():
    f = matmul(4)
    good = [np.zeros((4, 4), np.float32) for _ in range(3)]
    with pytest.raises(ValueError, match=r"'B'.*\(4, 4\).*\(4, 5\)"):
        interp.run(f, good[0], np.zeros((4, 5), np.float32), good[2])
    with pytest.raises(ValueError, match="'C'.*float32.*float64"):
        interp.run(f, good[0], good[1], np.zeros((4, 4)))
    with pytest.raises(ValueError, match="takes 3 arrays"):
        interp.run(f, good[0], good[1])
    with pytest.raises(TypeError, match="'A'"):
        interp.run(f, [[0.0] * 4] * 4, good[1], good[2])


def test_non_contiguous_output_is_written_back():
    f = matmul(4, flat=True)
    a, b = rng.random((4, 4), dtype=np.float32), rng.random((4, 4), dtype=np.float32)
    big = np.zeros((4, 8), np.float32)
    c = big[:, ::2]
    interp.run(f, a, b, c)
    np.testing.assert_allclose(big[:, ::2], a @ b, rtol=1e-6)
    assert (big[:, 1::2] == 0).all()


def test_vector_gather_out_of_bounds_raises():
    A, B = Buffer("A", (8,), "float32"), Buffer("B", (4,), "float32")
    i = Var("i")
    f = PrimFunc("g", (A, B), loop(i, 2, BufferStore(
        B, BufferLoad(A, (Ramp(i * 3, const(2), 4),)), (Ramp(const(0), const(1), 4),))))
    with pytest.raises(IndexError, match=r"\[9\].*'A'"):  # i = 1 reads A[3], ..., A[9]
        interp.run(f, np.zeros(8, np.float32), np.zeros(4, np.float32))


def test_symbolic_allocate():
    n = Var("n")
    A, B = Buffer("A", (n,), "int32"), Buffer("B", (n,), "int32")
    T = Buffer("T", (n,), "int32", scope="local")
    i = Var("i")
    f = PrimFunc("rev", (A, B), Allocate(T, seq(
        loop(i, n, store(T, load(A, i) + 1, i)),
        loop(i, n, store(B, load(T, n - 1 - i), i)))), shape_vars=(n,))
    a = np.arange(7, dtype=np.int32)
    b = np.zeros(7, np.int32)
    interp.run(f, a, b)
    np.testing.assert_array_equal(b, a[::-1] + 1)


def test_malformed_programs_are_reported_at_translation():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    T = Buffer("T", (4,), "float32", scope="local")
    i, free = Var("i"), Var("free")
    with pytest.raises(ValueError, match="'T'"):
        interp.run(PrimFunc("t", (A,), loop(i, 4, store(A, load(T, i), i))), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="'free'"):
        interp.run(PrimFunc("v", (A,), store(A, const(1.0), free)), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="2 indices"):
        interp.run(PrimFunc("x", (A,), store(A, const(1.0), 0, 0)), np.zeros(4, np.float32))
    weird = Call("float32", "not_an_intrinsic", (load(A, 0),))
    with pytest.raises(NotImplementedError, match="not_an_intrinsic"):
        interp.run(PrimFunc("c", (A, B), store(B, weird, 0)), np.zeros(4, np.float32),
                   np.zeros(4, np.float32))


def test_source_is_cached_and_readable():
    f = matmul(4)
    src = interp.python_source(f)
    assert src is interp.python_source(f)
    assert "for k in range(4):" in src
    assert "C[i, j] = C[i, j] + A[i, k] * B[k, j]" in src  # in-range indices carry no checks
