"""The C backend end to end: hand-built PrimFuncs are printed, compiled (all in one library, one
compiler call) and run against NumPy references."""
import math

import numpy as np
import pytest

from tensorforge.backends import cpu
from tensorforge.ir import expr as E
from tensorforge.tir import nodes as N

rng = np.random.default_rng(0)
F32, I32 = "float32", "int32"


# IR building helpers ------------------------------------------------------------------------
def c(value, dtype=None):
    return E.const(value, dtype)


def loop(var, extent, body, kind=N.SERIAL, start=0):
    return N.For(var, E.convert(start), E.convert(extent), kind, body)


def load(buf, index):
    return N.BufferLoad(buf, (E.convert(index),))


def store(buf, index, value):
    return N.BufferStore(buf, E.convert(value), (E.convert(index),))


def ramp(base, lanes, stride=1):
    return E.Ramp(E.convert(base), E.convert(stride), lanes)


def bcast(value, lanes, dtype=None):
    return E.Broadcast(E.const(value, dtype) if not isinstance(value, E.Expr) else value, lanes)


def elementwise(name, n, in_dtypes, out_dtype, fn, kind=N.SERIAL):
    """out[i] = fn(in0[i], in1[i], ...) over a constant n."""
    ins = [N.Buffer(f"X{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = N.Buffer("Y", (n,), out_dtype)
    i = E.Var("i")
    body = loop(i, n, store(out, i, fn(*[load(b, i) for b in ins])), kind)
    return N.PrimFunc(name, (*ins, out), body)


def vector_map(name, n, lanes, in_dtypes, out_dtype, fn):
    """out[ramp] = fn(in0[ramp], ...) in chunks of `lanes` (n divisible by lanes)."""
    ins = [N.Buffer(f"X{k}", (n,), d) for k, d in enumerate(in_dtypes)]
    out = N.Buffer("Y", (n,), out_dtype)
    j = E.Var("j")
    idx = ramp(j * lanes, lanes)
    body = loop(j, n // lanes, store(out, idx, fn(*[load(b, idx) for b in ins])))
    return N.PrimFunc(name, (*ins, out), body)


# The kernels ---------------------------------------------------------------------------------
FUNCS: list = []
UNARY = {   # intrinsic -> (NumPy reference, input domain)
    "exp": (np.exp, (-3, 3)), "exp2": (np.exp2, (-3, 3)), "log": (np.log, (0.1, 5)),
    "log2": (np.log2, (0.1, 5)), "log1p": (np.log1p, (0, 3)), "expm1": (np.expm1, (-1, 1)),
    "sqrt": (np.sqrt, (0, 4)), "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 4)),
    "tanh": (np.tanh, (-3, 3)), "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-5, 5)),
    "abs": (np.abs, (-3, 3)), "floor": (np.floor, (-3, 3)), "ceil": (np.ceil, (-3, 3)),
    "round": (np.round, (-3, 3)), "trunc": (np.trunc, (-3, 3)), "sin": (np.sin, (-3, 3)),
    "cos": (np.cos, (-3, 3)), "tan": (np.tan, (-1, 1)), "asin": (np.arcsin, (-0.9, 0.9)),
    "acos": (np.arccos, (-0.9, 0.9)), "atan": (np.arctan, (-3, 3)), "sinh": (np.sinh, (-2, 2)),
    "cosh": (np.cosh, (-2, 2)), "asinh": (np.arcsinh, (-3, 3)), "acosh": (np.arccosh, (1, 4)),
    "atanh": (np.arctanh, (-0.9, 0.9)), "erf": (np.vectorize(math.erf), (-2, 2)),
}
BINARY = {"pow": (np.power, (0.5, 2)), "atan2": (np.arctan2, (-2, 2)), "fmod": (np.fmod, (-5, 5))}

for op in UNARY:
    for dtype in ("float32", "float64"):
        FUNCS.append(elementwise(f"u_{op}_{dtype}", 37, [dtype], dtype, lambda x, op=op: E.call_intrin(op, x)))
for op in BINARY:
    FUNCS.append(elementwise(f"b_{op}", 37, [F32, F32], F32, lambda x, y, op=op: E.call_intrin(op, x, y)))
FUNCS.append(vector_map("v_exp_sigmoid", 32, 8, [F32], F32,
                        lambda x: E.call_intrin("exp", x) + E.call_intrin("sigmoid", x)))
FUNCS.append(vector_map("v_isnan", 32, 8, [F32], "bool",
                        lambda x: E.call_intrin("isnan", x) | E.call_intrin("isinf", x)))
FUNCS.append(elementwise("s_isnan", 32, [F32], "bool", lambda x: E.call_intrin("isnan", x)))


def _floor_funcs():
    for dtype in ("int8", "int32", "int64", "uint16", "float32"):
        FUNCS.append(elementwise(f"fdiv_{dtype}", 64, [dtype, dtype], dtype, lambda a, b: a // b))
        FUNCS.append(elementwise(f"fmod_{dtype}", 64, [dtype, dtype], dtype, lambda a, b: a % b))
        FUNCS.append(vector_map(f"vfdiv_{dtype}", 64, 16, [dtype, dtype], dtype, lambda a, b: a // b))
        FUNCS.append(vector_map(f"vfmod_{dtype}", 64, 16, [dtype, dtype], dtype, lambda a, b: a % b))


_floor_funcs()

# Symbolic shape, parallel elementwise loop.
n = E.Var("n")
A, B = N.Buffer("A", (n,), F32), N.Buffer("B", (n,), F32)
i = E.Var("i")
FUNCS.append(N.PrimFunc("axpy", (A, B), loop(i, n, store(B, i, load(A, i) * 2.0 + 1.0), N.PARALLEL), (n,)))

# Vector accesses: unaligned contiguous (offset 1), stride-2 gather, stride-2 scatter, index gather.
VA = N.Buffer("A", (64,), F32)
VB, VC, VD, VE = (N.Buffer(nm, (32,), F32) for nm in "BCDE")
VS = N.Buffer("S", (64,), F32)
j = E.Var("j")
FUNCS.append(N.PrimFunc("vec_access", (VA, VB, VC, VS, VE), N.seq(
    loop(j, 2, store(VB, ramp(j * 16, 16), load(VA, ramp(j * 16 + 1, 16)) * bcast(2.0, 16))),
    loop(j, 4, store(VC, ramp(j * 8, 8), load(VA, ramp(j * 16, 8, stride=2)))),
    loop(i, 64, store(VS, i, c(-1.0))),
    loop(j, 4, store(VS, ramp(j * 16 + 1, 8, stride=2), load(VA, ramp(j * 8, 8)))),
    loop(j, 4, store(VE, ramp(j * 8, 8), load(VA, ramp(j * 8, 8) * bcast(7, 8) % bcast(64, 8)))),
)))

# Min / Max / Select on vectors, with compound vector conditions.
FUNCS.append(vector_map("vec_minmax", 32, 8, [F32, F32], F32,
                        lambda x, y: E.Select(x > y, E.Min(x, y) * bcast(2.0, 8), E.Max(x, y))))
FUNCS.append(vector_map("vec_select_int", 32, 8, [F32, F32], I32,
                        lambda x, y: E.Select((x > bcast(0.0, 8)) & ~(y > bcast(0.5, 8)),
                                              bcast(1, 8), bcast(-1, 8))))
FUNCS.append(vector_map("vec_minmax_i16", 32, 16, ["int16", "int16"], "int16",
                        lambda x, y: E.Max(x, y) - E.Min(x, y)))
# int8 -> int32 cast, int8 wrap-around (vector and scalar), non-power-of-two lanes.
FUNCS.append(vector_map("vec_cast_i8", 32, 16, ["int8"], I32, lambda x: E.Cast("int32x16", x) * bcast(3, 16)))
FUNCS.append(vector_map("vec_wrap_i8", 32, 16, ["int8"], "int8", lambda x: x + x))
FUNCS.append(elementwise("wrap_i8", 32, ["int8"], "int8", lambda x: (x + x) // c(3, "int8")))
FUNCS.append(vector_map("vec_lanes3", 12, 3, [I32, F32], F32,
                        lambda x, y: E.Cast("float32x3", x // bcast(-2, 3)) + E.call_intrin("exp", y)))

# float16: scalar arithmetic, vector convert-and-compute, vector select.
FUNCS.append(elementwise("half_scalar", 32, ["float16"], "float16", lambda x: x * c(3.0, "float16") + c(0.1, "float16")))
FUNCS.append(vector_map("half_vector", 32, 8, ["float16", "float16"], "float16",
                        lambda x, y: E.Select(x < y, x * y, E.call_intrin("sqrt", E.call_intrin("abs", x)))))

# bool: scalar and vector loads/stores.
FUNCS.append(elementwise("bool_scalar", 32, [F32, "bool"], "bool", lambda x, m: (x > c(0.0)) & ~m))
FUNCS.append(vector_map("bool_vector", 32, 16, [F32, "bool"], "bool",
                        lambda x, m: (x > bcast(0.0, 16)) != m))
FUNCS.append(vector_map("bool_select", 32, 16, [F32, "bool"], F32, lambda x, m: E.Select(m, x, x * bcast(-1.0, 16))))

# Let, LetStmt, lazy Select guarding an out-of-bounds read, unrolled and vectorized loop kinds.
L_A, L_B = N.Buffer("A", (n,), F32), N.Buffer("B", (n,), F32)
t = E.Var("t", F32)
x = E.Var("x", F32)
guarded = E.Select(i + 1 < n, load(L_A, i + 1), c(0.0))
FUNCS.append(N.PrimFunc("lets", (L_A, L_B), loop(i, n, N.LetStmt(
    t, load(L_A, i) + 1.0, store(L_B, i, E.Let(x, t * 2.0, x * x + x) + guarded)), N.UNROLLED), (n,)))
V_A, V_B = N.Buffer("A", (64,), F32), N.Buffer("B", (64,), F32)
FUNCS.append(N.PrimFunc("simd_kind", (V_A, V_B), loop(i, 64, store(V_B, i, load(V_A, i) * 3.0), N.VECTORIZED)))

# Vector-valued lets: a boolean mask bound by LetStmt, a float vector bound by Let.
VX, VY = N.Buffer("X", (32,), F32), N.Buffer("Y", (32,), F32)
mask, vv = E.Var("mask", "boolx8"), E.Var("v", "float32x8")
vidx = ramp(j * 8, 8)
FUNCS.append(N.PrimFunc("vec_lets", (VX, VY), loop(j, 4, N.LetStmt(
    mask, load(VX, vidx) > bcast(0.0, 8),
    store(VY, vidx, E.Let(vv, load(VX, vidx) * bcast(3.0, 8),
                          E.Select(mask, vv, vv * bcast(-1.0, 8))))))))

# Parallel nest (inner parallel loop runs serially inside the outer team).
P_A, P_B = N.Buffer("A", (64, 33), F32), N.Buffer("B", (64, 33), F32)
r, k = E.Var("r"), E.Var("k")
FUNCS.append(N.PrimFunc("par2d", (P_A, P_B), loop(r, 64, loop(
    k, 33, store(P_B, r * 33 + k, E.call_intrin("tanh", load(P_A, r * 33 + k)) + E.Cast(F32, r)),
    N.PARALLEL), N.PARALLEL)))

# Allocations: a local (stack) tile and a global (heap) buffer of symbolic size.
AL_A, AL_B = N.Buffer("A", (n,), F32), N.Buffer("B", (n,), F32)
tile = N.Buffer("tile", (16,), F32, scope=N.LOCAL)
heap = N.Buffer("tmp", (n,), F32, scope=N.GLOBAL)
FUNCS.append(N.PrimFunc("allocs", (AL_A, AL_B), N.Allocate(heap, N.seq(
    loop(i, n, store(heap, i, load(AL_A, i) * 2.0), N.PARALLEL),
    loop(i, n, N.Allocate(tile, N.seq(
        loop(k, 16, store(tile, k, load(heap, n - 1 - i) + E.Cast(F32, k))),
        store(AL_B, i, load(tile, 3) + load(tile, 0)))))
)), (n,)))
# A vector load/store from a local allocation at a multiple of the lanes (aligned typedef).
VL_A, VL_B = N.Buffer("A", (64,), F32), N.Buffer("B", (64,), F32)
vt = N.Buffer("vt", (16,), F32, scope=N.LOCAL)
FUNCS.append(N.PrimFunc("aligned_local", (VL_A, VL_B), loop(j, 4, N.Allocate(vt, N.seq(
    store(vt, ramp(0, 16), load(VL_A, ramp(j * 16, 16)) + bcast(1.0, 16)),
    store(VL_B, ramp(j * 16, 16), load(vt, ramp(0, 16)) * load(vt, ramp(0, 16))))))))

# Zero padding of rows in a vectorized loop (64-bit addresses, a guard affine in x), an int32
# value of the loop variables with negative floor divisions, a gather along the rows.
PR_X, PR_P = N.Buffer("X", (5 * 29,), F32), N.Buffer("P", (5 * 33,), F32)
PR_Q, PR_T = N.Buffer("Q", (5 * 33,), I32), N.Buffer("T", (5 * 33,), F32)
inside = E.And(E.LE(c(2), k), E.LT(k, c(31)))
FUNCS.append(N.PrimFunc("pad_rows", (PR_X, PR_P, PR_Q, PR_T), loop(r, 5, loop(k, 33, N.seq(
    store(PR_P, r * 33 + k, E.Select(inside, load(PR_X, r * 29 + k - 2), c(0.0))),
    store(PR_Q, r * 33 + k, (r * k - 40) // 3),
    store(PR_T, r * 33 + k, load(PR_X, (r * 33 + k) % 29 * 5 + (r * 33 + k) // 29))), N.VECTORIZED))))


@pytest.fixture(scope="module")
def mod():
    return cpu.build(FUNCS, "c")


def rand(shape, dtype, lo=-3, hi=3):
    return rng.uniform(lo, hi, shape).astype(dtype)


def run(mod, name, *inputs, out_shape=None, out_dtype=None):
    out = np.zeros(out_shape or inputs[0].shape, out_dtype or inputs[0].dtype)
    mod[name](*inputs, out)
    return out


# Tests ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_intrinsics(mod, op):
    ref, (lo, hi) = UNARY[op]
    for dtype, tol in (("float32", 2e-6), ("float64", 1e-14)):
        x = rand(37, dtype, lo, hi)
        x[:4] = [lo, hi, 0.5 * (lo + hi), 2.5 if op == "round" else lo]   # 2.5 rounds to 2
        np.testing.assert_allclose(run(mod, f"u_{op}_{dtype}", x), ref(x).astype(dtype), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary_intrinsics(mod, op):
    ref, (lo, hi) = BINARY[op]
    x, y = rand(37, F32, lo, hi), rand(37, F32, lo, hi)
    np.testing.assert_allclose(run(mod, f"b_{op}", x, y), ref(x, y), rtol=2e-6, atol=1e-6)


def test_vector_intrinsics(mod):
    x = rand(32, F32)
    np.testing.assert_allclose(run(mod, "v_exp_sigmoid", x), np.exp(x) + 1 / (1 + np.exp(-x)), rtol=2e-6)
    x[[1, 9, 30]] = [np.nan, np.inf, -np.inf]
    expect = np.isnan(x) | np.isinf(x)
    np.testing.assert_array_equal(run(mod, "v_isnan", x, out_dtype=bool), expect)
    np.testing.assert_array_equal(run(mod, "s_isnan", x, out_dtype=bool), np.isnan(x))


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint16", "float32"])
def test_floordiv_floormod_negative_operands(mod, dtype):
    if dtype == "float32":
        a, b = rand(64, dtype, -20, 20), rand(64, dtype, -5, 5)
        b[b == 0] = 1
    else:
        lo = 0 if dtype == "uint16" else -100
        a = rng.integers(lo, 100, 64).astype(dtype)
        b = rng.integers(lo // 10, 10, 64).astype(dtype)
        b[b == 0] = 3
        if dtype != "uint16":
            b[:4] = [1, -1, 7, -7]
            a[:4] = [-7, 7, -1, 1]
    for prefix in ("", "v"):
        q, m = run(mod, f"{prefix}fdiv_{dtype}", a, b), run(mod, f"{prefix}fmod_{dtype}", a, b)
        if dtype == "float32":
            np.testing.assert_allclose(q, np.floor(a / b), rtol=1e-6)
            np.testing.assert_allclose(m, a - np.floor(a / b) * b, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(q, a // b)
            np.testing.assert_array_equal(m, a % b)


@pytest.mark.parametrize("dtype", ["int32", "uint16"])
def test_integer_division_by_zero_gives_zero_not_a_crash(mod, dtype):
    a, b = np.arange(64).astype(dtype), np.zeros(64, dtype)
    for name in ("fdiv_", "fmod_", "vfdiv_", "vfmod_"):
        np.testing.assert_array_equal(run(mod, name + dtype, a, b), np.zeros(64, dtype))


def test_symbolic_shape_parallel_elementwise(mod):
    for size in (1, 17, 1000):
        x = rand(size, F32)
        np.testing.assert_allclose(run(mod, "axpy", x), x * 2 + 1, rtol=1e-6)


def test_vector_loads_stores_gathers_scatters(mod):
    a = rand(64, F32)
    b, c_, e = (np.zeros(32, F32) for _ in range(3))
    s = np.zeros(64, F32)
    mod["vec_access"](a, b, c_, s, e)
    np.testing.assert_allclose(b, a[1:33] * 2)
    np.testing.assert_array_equal(c_, a[0::2])
    expect = np.full(64, -1.0, F32)
    expect[1::2] = a[:32]
    np.testing.assert_array_equal(s, expect)
    np.testing.assert_array_equal(e, a[(np.arange(32) * 7) % 64])


def test_vector_min_max_select(mod):
    x, y = rand(32, F32), rand(32, F32)
    np.testing.assert_allclose(run(mod, "vec_minmax", x, y), np.where(x > y, np.minimum(x, y) * 2, np.maximum(x, y)))
    got = run(mod, "vec_select_int", x, y, out_dtype=I32)
    np.testing.assert_array_equal(got, np.where((x > 0) & ~(y > 0.5), 1, -1))
    p, q = rng.integers(-30000, 30000, 32).astype("int16"), rng.integers(-30000, 30000, 32).astype("int16")
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(run(mod, "vec_minmax_i16", p, q), np.maximum(p, q) - np.minimum(p, q))


def test_int8_vector_cast_and_wraparound(mod):
    a = rng.integers(-128, 128, 32).astype("int8")
    np.testing.assert_array_equal(run(mod, "vec_cast_i8", a, out_dtype=I32), a.astype(I32) * 3)
    np.testing.assert_array_equal(run(mod, "vec_wrap_i8", a), a + a)
    np.testing.assert_array_equal(run(mod, "wrap_i8", a), (a + a) // np.int8(3))


def test_non_power_of_two_lanes(mod):
    x, y = rng.integers(-9, 9, 12).astype(I32), rand(12, F32)
    np.testing.assert_allclose(run(mod, "vec_lanes3", x, y, out_dtype=F32), (x // -2).astype(F32) + np.exp(y), rtol=1e-6, atol=1e-6)


def test_float16_buffers(mod):
    x = rand(32, "float16")
    np.testing.assert_array_equal(run(mod, "half_scalar", x), x * np.float16(3) + np.float16(0.1))
    y = rand(32, "float16")
    expect = np.where(x < y, x * y, np.sqrt(np.abs(x)))
    np.testing.assert_array_equal(run(mod, "half_vector", x, y), expect)


def test_bool_buffers(mod):
    x, m = rand(32, F32), rng.random(32) > 0.5
    np.testing.assert_array_equal(run(mod, "bool_scalar", x, m, out_dtype=bool), (x > 0) & ~m)
    np.testing.assert_array_equal(run(mod, "bool_vector", x, m, out_dtype=bool), (x > 0) != m)
    np.testing.assert_array_equal(run(mod, "bool_select", x, m, out_dtype=F32), np.where(m, x, -x))


def test_padded_rows_in_a_vectorized_loop(mod):
    x = rand(5 * 29, F32)
    p, q, t = np.zeros(5 * 33, F32), np.zeros(5 * 33, I32), np.zeros(5 * 33, F32)
    mod["pad_rows"](x, p, q, t)
    np.testing.assert_array_equal(p.reshape(5, 33), np.pad(x.reshape(5, 29), ((0, 0), (2, 2))))
    rows, cols = np.meshgrid(np.arange(5), np.arange(33), indexing="ij")
    np.testing.assert_array_equal(q.reshape(5, 33), (rows * cols - 40) // 3)
    flat = np.arange(5 * 33)
    np.testing.assert_array_equal(t, x[flat % 29 * 5 + flat // 29])


def test_let_and_guarded_select(mod):
    a = rand(23, F32)
    t = a + 1
    expect = (t * 2) ** 2 + t * 2 + np.append(a[1:], 0)
    np.testing.assert_allclose(run(mod, "lets", a), expect, rtol=1e-5)
    v = rand(64, F32)
    np.testing.assert_allclose(run(mod, "simd_kind", v), v * 3)


def test_vector_lets(mod):
    x = rand(32, F32)
    np.testing.assert_allclose(run(mod, "vec_lets", x), np.abs(3 * x), rtol=1e-6)


def test_parallel_threads_1_and_2_agree(mod):
    from tensorforge import runtime
    a = rand((64, 33), F32)
    before = runtime.get_num_threads()
    try:
        results = []
        for threads in (1, 2):
            runtime.set_num_threads(threads)
            results.append(run(mod, "par2d", a))
    finally:
        runtime.set_num_threads(before)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], np.tanh(a) + np.arange(64, dtype=F32)[:, None],
                               rtol=1e-6, atol=1e-6)


def test_local_and_global_allocations(mod):
    a = rand(19, F32)
    np.testing.assert_allclose(run(mod, "allocs", a), 2 * (2 * a[::-1]) + 3, rtol=1e-6)
    v = rand(64, F32)
    np.testing.assert_allclose(run(mod, "aligned_local", v), (v + 1) ** 2, rtol=1e-6)
    assert "tf_float32x16*)(vt)" in mod.source      # aligned access into the local tile


def test_a_memory_scope_the_cpu_lacks_is_an_error():
    """cache_read into "shared" (a GPU scope) does not silently build as plain memory."""
    import pytest

    import tensorforge
    from tensorforge import te

    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    io, _ = s[B].split(B.op.axis[0], factor=16)
    s[AS].compute_at(s[B], io)
    with pytest.raises(ValueError, match="memory scope 'shared'.*target kind 'c'"):
        tensorforge.build(s, [A, B], target="c")
