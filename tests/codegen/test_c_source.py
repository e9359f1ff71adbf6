"""What the C printer prints for hand-built PrimFuncs, and the errors it gives (no compiler run)."""
import numpy as np
import pytest

from tensorforge.codegen.c import codegen_c
from tensorforge.codegen.c_like import CodegenError
from tensorforge.ir import expr as E
from tensorforge.tir import nodes as N

F32 = "float32"


def loop(var, extent, body, kind=N.SERIAL, start=0, annotations=()):
    return N.For(var, E.convert(start), E.convert(extent), kind, body, annotations=annotations)


def load(buf, *index):
    return N.BufferLoad(buf, tuple(E.convert(i) for i in index))


def store(buf, value, *index):
    return N.BufferStore(buf, E.convert(value), tuple(E.convert(i) for i in index))


def source(*funcs):
    return codegen_c(list(funcs)).text


def function_text(text, name):
    start = text.index(f"int32_t {name}(")
    return text[start:text.index("\n}\n", start) + 3]


def test_elementwise_function_text():
    n = E.Var("n")
    A, B = N.Buffer("A", (n,), F32), N.Buffer("B", (n,), F32)
    i = E.Var("i")
    f = N.PrimFunc("add_one", (A, B), loop(i, n, store(B, load(A, i) + 1.0, i)), (n,))
    assert function_text(source(f), "add_one") == (
        "int32_t add_one(const float* restrict A, float* restrict B, int32_t n) {\n"
        "  for (int64_t i = 0; i < n; ++i) {\n"
        "    B[i] = A[i] + 1.0f;\n"
        "  }\n"
        "  return 0;\n"
        "}\n")


def test_floor_division_plain_only_when_operands_nonnegative():
    n = E.Var("n")
    A = N.Buffer("A", (n,), "int32")
    i = E.Var("i")
    body = N.seq(store(A, i // 4 + i % 4, i),            # loop var from 0: a shift and a mask
                 store(A, (i - 8) // 4, i),              # may be negative: floor helper
                 store(A, n // 2 + (i * 3 + n) % 5, i),  # shape vars are >= 0
                 store(A, i // 6 + i % 6, i))            # not a power of two: plain / and %
    text = source(N.PrimFunc("fd", (A,), loop(i, n, body), (n,)))
    # by a power of two, on the unsigned type (the C compiler cannot see that (int32_t)i >= 0)
    assert "A[i] = (int32_t)((uint32_t)(int32_t)i >> 2) + (int32_t)((uint32_t)(int32_t)i & 3u);" in text
    assert "A[i] = tf_floordiv_int32((int32_t)i - 8, 4);" in text
    assert "A[i] = (int32_t)((uint32_t)n >> 1) + ((int32_t)i * 3 + n) % 5;" in text
    assert "A[i] = (int32_t)i / 6 + (int32_t)i % 6;" in text
    j = E.Var("j")
    neg = source(N.PrimFunc("neg", (A,), loop(j, 4, store(A, j // 2, j), start=-4), (n,)))
    assert "tf_floordiv_int32((int32_t)j, 2)" in neg


def test_loop_variables_are_64_bit_except_with_data():
    # A row copy into a zero-padded row, the lanes guarded by a condition affine in x: indices
    # and condition are 64-bit (the C compiler then emits a masked contiguous load, not a
    # gather).  An int32 value that mixes the loop variables with loaded data keeps the IR's
    # int32 arithmetic exactly: the variables are read as int32 there.
    X, P = N.Buffer("X", (4 * 30,), F32), N.Buffer("P", (4 * 32,), F32)
    Q, D = N.Buffer("Q", (4 * 32,), "int32"), N.Buffer("D", (4 * 32,), "int32")
    r, x = E.Var("r"), E.Var("x")
    inside = E.And(E.LE(E.const(1), x), E.LT(x, E.const(31)))
    body = N.seq(store(P, E.Select(inside, load(X, r * 30 + x - 1), E.const(0.0)), r * 32 + x),
                 store(Q, r * x - 5, r * 32 + x),
                 store(Q, load(D, r * 32 + x) * 3 + x, r * 32 + x))
    text = source(N.PrimFunc("pad", (X, P, Q, D), loop(r, 4, loop(x, 32, body, N.VECTORIZED))))
    assert "for (int64_t r = 0; r < 4; ++r)" in text and "for (int64_t x = 0; x < 32; ++x)" in text
    assert "P[r * 32 + x] = 1 <= x && x < 31 ? X[r * 30 + x - 1] : 0.0f;" in text
    assert "Q[r * 32 + x] = r * x - 5;" in text
    assert "Q[r * 32 + x] = D[r * 32 + x] * 3 + (int32_t)x;" in text


def test_index_not_affine_in_the_inner_loop_stays_32_bit():
    # Its lanes are computed one by one (a gather): 32-bit lanes are twice as many per vector.
    A, B = N.Buffer("A", (64,), F32), N.Buffer("B", (64,), F32)
    o, i = E.Var("o"), E.Var("i")
    body = store(B, load(A, (o * 16 + i) % 64 // 4 + (o * 16 + i) // 64 * 16), o * 16 + i)
    text = source(N.PrimFunc("t", (A, B), loop(o, 4, loop(i, 16, body, N.VECTORIZED))))
    assert ("B[o * 16 + i] = A[(int32_t)((uint32_t)(int32_t)((uint32_t)((int32_t)o * 16 + (int32_t)i) & 63u) >> 2) + "
            in text)
    # ... while a division of an outer loop's variable alone is loop-invariant: 64-bit.
    outer = store(B, load(A, o // 2 * 16 + i), o * 16 + i)
    text = source(N.PrimFunc("u", (A, B), loop(o, 4, loop(i, 16, outer, N.VECTORIZED))))
    assert "B[o * 16 + i] = A[(int64_t)((uint64_t)o >> 1) * 16 + i];" in text


def test_only_outermost_parallel_loop_gets_the_pragma():
    A = N.Buffer("A", (64,), F32)
    i, j = E.Var("i"), E.Var("j")
    f = N.PrimFunc("p", (A,), loop(i, 8, loop(j, 8, store(A, 1.0, i * 8 + j), N.PARALLEL), N.PARALLEL))
    text = source(f)
    assert text.count("#pragma omp parallel for num_threads(tf_num_threads) schedule(static)") == 1
    assert text.index("#pragma omp parallel") < text.index("for (int64_t i")


def test_no_openmp_construct_inside_a_simd_loop():
    A = N.Buffer("A", (64,), F32)
    i, j = E.Var("i"), E.Var("j")
    f = N.PrimFunc("p", (A,), loop(i, 8, loop(j, 8, store(A, 1.0, i * 8 + j), N.PARALLEL), N.VECTORIZED))
    text = source(f)
    assert text.count("#pragma omp") == 1 and "#pragma omp simd\n  for (int64_t i" in text


def test_thread_binding_is_rejected():
    A = N.Buffer("A", (64,), F32)
    i = E.Var("i")
    f = N.PrimFunc("k", (A,), N.For(i, E.const(0), E.const(64), N.THREAD_BINDING,
                                     store(A, 1.0, i), thread_tag="threadIdx.x"))
    with pytest.raises(CodegenError, match="bind is for GPU targets"):
        source(f)


def test_unflattened_access_is_rejected():
    A = N.Buffer("A", (4, 4), F32)
    i = E.Var("i")
    f = N.PrimFunc("k", (A,), loop(i, 4, store(A, 1.0, i, i)))
    with pytest.raises(CodegenError, match="'A' has 2 indices.*flatten"):
        source(f)


def test_unknown_scope_and_unbound_variable_are_rejected():
    A = N.Buffer("A", (4,), F32)
    T = N.Buffer("T", (4,), F32, scope="texture")
    i = E.Var("i")
    with pytest.raises(CodegenError, match="memory scope 'texture'"):
        source(N.PrimFunc("k", (A,), N.Allocate(T, loop(i, 4, store(T, 1.0, i)))))
    m = E.Var("m")
    with pytest.raises(CodegenError, match="variable 'm' is used but not bound"):
        source(N.PrimFunc("k", (A,), loop(i, m, store(A, 1.0, i))))
    with pytest.raises(CodegenError, match="two functions are named 'k'"):
        f = N.PrimFunc("k", (A,), loop(i, 4, store(A, 1.0, i)))
        source(f, f)


def test_variables_with_the_same_name_get_distinct_c_names():
    A = N.Buffer("A", (16,), F32)
    outer, inner = E.Var("i"), E.Var("i")
    text = source(N.PrimFunc("k", (A,), loop(outer, 4, loop(inner, 4, store(A, 1.0, outer * 4 + inner)))))
    assert "for (int64_t i = 0;" in text and "for (int64_t i_1 = 0;" in text
    assert "A[i * 4 + i_1] = 1.0f;" in text
    weird = N.Buffer("float", (16,), F32)   # a C keyword as a buffer name
    assert "float* restrict v_float" in source(N.PrimFunc("w", (weird,), loop(outer, 16, store(weird, 1.0, outer))))


@pytest.mark.parametrize("value,dtype,text", [
    (0.1, "float32", "0.1f"), (0.1, "float64", "0.1"), (1.0, "float32", "1.0f"),
    (1e-30, "float32", "1e-30f"), (float("inf"), "float32", "INFINITY"),
    (-float("inf"), "float64", "-(double)INFINITY"), (float("nan"), "float32", "NAN"),
    (0.1, "float16", "(tf_float16)0.099975586f"),
])
def test_float_literals_are_exact(value, dtype, text):
    A = N.Buffer("A", (1,), dtype)
    assert f"A[0] = {text};" in source(N.PrimFunc("k", (A,), store(A, E.const(value, dtype), 0)))
    if np.isfinite(value) and dtype != "float16":
        parsed = np.dtype(dtype).type(float(text.rstrip("f")))   # as C parses it at that precision
        assert parsed == np.dtype(dtype).type(value)


@pytest.mark.parametrize("value,dtype,text", [
    (-2 ** 31, "int32", "(-2147483647 - 1)"), (5, "int64", "INT64_C(5)"), (7, "uint32", "7u"),
    (-3, "int8", "(int8_t)-3"), (True, "bool", "true"),
])
def test_integer_literals(value, dtype, text):
    A = N.Buffer("A", (1,), dtype)
    assert f"A[0] = {text};" in source(N.PrimFunc("k", (A,), store(A, E.const(value, dtype), 0)))


def test_vectorized_loop_kind_and_pragma_annotations():
    A, B = N.Buffer("A", (64,), F32), N.Buffer("B", (1,), F32)
    i = E.Var("i")
    simd = source(N.PrimFunc("k", (A,), loop(i, 64, store(A, 2.0, i), N.VECTORIZED)))
    assert "#pragma omp simd\n  for (int64_t i" in simd
    reduction = source(N.PrimFunc("r", (A, B), loop(i, 64, store(B, load(B, 0) + load(A, i), 0), N.VECTORIZED)))
    assert "omp simd" not in reduction and "left scalar" in reduction
    annotated = source(N.PrimFunc("a", (A,), loop(i, 64, store(A, 2.0, i), annotations=(
        ("pragma_unroll", 4), ("pragma_ivdep", 1), ("pragma_mystery", 2)))))
    assert "#pragma GCC unroll 4" in annotated and "#pragma GCC ivdep" in annotated
    assert "/* pragma_mystery = 2 */" in annotated


def test_allocation_placement():
    A = N.Buffer("A", (64,), F32)
    i = E.Var("i")
    small = N.Buffer("small", (64,), F32, scope=N.LOCAL)
    big = N.Buffer("big", (64 * 1024,), F32, scope=N.LOCAL)
    glob = N.Buffer("glob", (64,), F32, scope=N.GLOBAL)
    text = source(N.PrimFunc("k", (A,), N.seq(*[
        N.Allocate(b, loop(i, 64, store(b, 1.0, i))) for b in (small, big, glob)])))
    assert "float small[64] __attribute__((aligned(64)));" in text
    assert "float* restrict big = (float*)tf_alloc(sizeof(float), 1, (const int64_t[]){65536});" in text
    assert "free(glob);" in text and "int32_t tf_status = 0;" in text and "return tf_status;" in text


def test_vector_typedefs_emitted_once():
    A, B = N.Buffer("A", (64,), F32), N.Buffer("B", (64,), F32)
    j = E.Var("j")
    idx = E.Ramp(j * 16, E.const(1), 16)
    f = N.PrimFunc("v", (A, B), loop(j, 4, store(B, load(A, idx) + load(A, idx), idx)))
    text = source(f, N.PrimFunc("w", (A, B), f.body))
    assert text.count("typedef float tf_float32x16 __attribute__((vector_size(64)));") == 1
    assert "aligned(4), may_alias" in text


def test_parallel_loops_go_to_the_thread_pool_through_one_hidden_shim():
    """A library with a parallel loop defines the OpenMP entry points GCC calls, once (in the
    first translation unit), hidden; one without parallel loops has no shim."""
    from tensorforge.codegen.c import POOL_SHIM
    A = N.Buffer("A", (64,), F32)
    i = E.Var("i")
    par = N.PrimFunc("par", (A,), loop(i, 64, store(A, 1.0, i), N.PARALLEL))
    ser = N.PrimFunc("ser", (A,), loop(i, 64, store(A, 2.0, i)))
    whole = codegen_c([par, ser], units=2)
    assert whole.text.count(POOL_SHIM) == 1
    assert 'visibility("hidden"))) void GOMP_parallel' in POOL_SHIM
    assert [u.count(POOL_SHIM) for u in whole.units] == [1, 0]
    assert POOL_SHIM not in source(ser)


def test_two_guarded_stores_per_iteration_are_kept_from_the_vectorizer():
    """A 2-column image's padding is a loop whose body stores two elements loaded under a range
    of the loop variable; GCC 12 tuned for AVX-512 cores vectorizes it with a wrong mask (two of
    the padded image's elements zero: a conv after it was off by 0.16).  The printer puts an empty
    asm statement in such a loop, and the model computes what the reference does; found by the
    random-model campaign (tensorforge/testing/random_models.py)."""
    import numpy as np

    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.graph.reference import run_reference
    rng = np.random.default_rng(0)
    b = GraphBuilder("two_columns")
    x = b.input("x", (1, 1, 5, 2), "float32")
    conv = {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1}
    y = b.add1("conv2d", [x, b.const(rng.standard_normal((1, 1, 3, 3)).astype(np.float32), name="w1")], conv)
    y = b.add1("add", [y, b.const(np.float32(0.25), name="bias")])
    z = b.add1("conv2d", [y, b.const(rng.standard_normal((32, 1, 3, 3)).astype(np.float32), name="w2")],
               {**conv, "strides": (2, 2)})
    graph = b.finish([z])
    model = tensorforge.compile(graph, target="c -mcpu=native")
    data = rng.standard_normal((1, 1, 5, 2)).astype(np.float32)
    np.testing.assert_allclose(model(data)[0], run_reference(graph, data)[0], rtol=1e-5, atol=1e-5)
    assert '__asm__ volatile("");' in model.source
