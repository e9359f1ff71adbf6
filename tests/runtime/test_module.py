"""Module: calling kernels, argument checks before entering C, threads, timing, nd arrays."""
import numpy as np
import pytest

from tensorforge import runtime
from tensorforge.backends import cpu
from tensorforge.ir import expr as E
from tensorforge.runtime import module as module_mod
from tensorforge.runtime import ndarray as nd
from tensorforge.tir import nodes as N

F32 = "float32"
n, m = E.Var("n"), E.Var("m")
i, j = E.Var("i"), E.Var("j")


def loop(var, extent, body, kind=N.SERIAL):
    return N.For(var, E.const(0), E.convert(extent), kind, body)


def _funcs():
    # scale(X: float32[n, 4], Y: float32[n, 4], Z: int32[3]): Y = 2 X, Z[k] = k
    X, Y, Z = N.Buffer("X", (n, 4), F32), N.Buffer("Y", (n, 4), F32), N.Buffer("Z", (3,), "int32")
    body = N.seq(loop(i, n * 4, N.BufferStore(Y, N.BufferLoad(X, (i,)) * 2.0, (i,)), N.PARALLEL),
                 loop(j, 3, N.BufferStore(Z, j, (j,))))
    scale = N.PrimFunc("scale", (X, Y, Z), body, (n,))
    # concat(P: float32[n], Q: float32[m], R: float32[n + m])
    P, Q, R = N.Buffer("P", (n,), F32), N.Buffer("Q", (m,), F32), N.Buffer("R", (n + m,), F32)
    concat = N.PrimFunc("concat", (P, Q, R), N.seq(
        loop(i, n, N.BufferStore(R, N.BufferLoad(P, (i,)), (i,))),
        loop(i, m, N.BufferStore(R, N.BufferLoad(Q, (i,)), (n + i,)))), (n, m))
    # hog(A: float32[n]): allocates n*n*n floats on the heap, which fails for n = 2**20
    A = N.Buffer("A", (n,), F32)
    T = N.Buffer("T", (n, n, n), F32, scope=N.GLOBAL)
    hog = N.PrimFunc("hog", (A,), N.Allocate(T, N.BufferStore(A, N.BufferLoad(T, (E.const(0),)), (E.const(0),))), (n,))
    return [scale, concat, hog]


@pytest.fixture(scope="module")
def mod():
    return cpu.build(_funcs(), "c")


def args(rows=5):
    return (np.arange(rows * 4, dtype=F32).reshape(rows, 4), np.zeros((rows, 4), F32), np.zeros(3, "int32"))


def test_call_by_name_and_results(mod):
    x, y, z = args()
    mod["scale"](x, y, z)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(z, [0, 1, 2])
    p, q, r = np.ones(3, F32), np.full(2, 2.0, F32), np.zeros(5, F32)
    mod.get_function("concat")(p, q, r)
    np.testing.assert_array_equal(r, [1, 1, 1, 2, 2])
    assert mod.function_names == ["scale", "concat", "hog"]
    assert "int32_t concat(const float* restrict P, const float* restrict Q, float* restrict R, " \
           "int32_t n, int32_t m)" in mod.source


def test_module_call_and_unknown_name(mod):
    with pytest.raises(TypeError, match=r"3 functions \(scale, concat, hog\); pick one"):
        mod(*args())
    with pytest.raises(KeyError, match="no function 'nope'.*scale, concat, hog"):
        mod["nope"]
    single = cpu.build([_funcs()[0]])
    x, y, z = args(2)
    single(x, y, z)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("case,error,pattern", [
    ("count", TypeError, r"scale\(\) takes 3 array arguments \(X, Y, Z\), got 2"),
    ("list", TypeError, r"argument 0 \('X'\) must be a NumPy array or tensorforge.nd array, got list"),
    ("dtype", TypeError, r"argument 1 \('Y'\) has dtype float64, expected float32"),
    ("ndim", ValueError, r"argument 1 \('Y'\) has 1 dimensions \(20,\), expected 2: \(5, 4\)"),
    ("const_dim", ValueError, r"argument 2 \('Z'\) has shape \(4,\), expected \(3,\)"),
    ("var_dim", ValueError, r"argument 1 \('Y'\) has shape \(6, 4\), but its dimension 0 is n, "
                            r"which an earlier argument set to 5"),
    ("strided", ValueError, r"argument 0 \('X'\) is not C-contiguous"),
    ("readonly", ValueError, r"argument 1 \('Y'\) is written by the kernel but is read-only"),
    ("alias", ValueError, r"argument 1 \('Y'\) is written by the kernel and is also passed"),
])
def test_bad_arguments_raise_before_the_call(mod, case, error, pattern):
    x, y, z = args()
    y[:] = -7.0
    if case == "count":
        bad = (x, y)
    elif case == "list":
        bad = (x.tolist(), y, z)
    elif case == "dtype":
        bad = (x, y.astype("float64"), z)
    elif case == "ndim":
        bad = (x, y.reshape(-1), z)
    elif case == "const_dim":
        bad = (x, y, np.zeros(4, "int32"))
    elif case == "var_dim":
        bad = (x, np.zeros((6, 4), F32), z)
    elif case == "strided":
        bad = (np.zeros((5, 8), F32)[:, ::2], y, z)
    elif case == "readonly":
        y.flags.writeable = False
        bad = (x, y, z)
    else:
        bad = (y, y, z)
    with pytest.raises(error, match=pattern):
        mod["scale"](*bad)
    assert (y == -7.0).all()          # the kernel never ran


def test_shape_expressions_and_nd_arrays(mod):
    p, q = nd.array(np.ones(2, F32)), nd.array(np.zeros(3, F32))
    r = nd.empty((5,), F32)
    mod["concat"](p, q, r)
    np.testing.assert_array_equal(r.numpy(), [1, 1, 0, 0, 0])
    with pytest.raises(ValueError, match=r"argument 2 \('R'\) has dimension 0 of size 4, expected \(5,\)"):
        mod["concat"](p, q, nd.empty(4, F32))


def test_nonzero_status_raises(mod):
    with pytest.raises(RuntimeError, match="hog failed with status 1: a heap allocation"):
        mod["hog"](np.zeros(2 ** 20, F32))
    mod["hog"](np.zeros(2, F32))       # small sizes allocate fine


def test_uninferable_shape_var_rejected_at_build():
    A = N.Buffer("A", (n * 2,), F32)
    f = N.PrimFunc("k", (A,), loop(i, n, N.BufferStore(A, E.const(1.0), (i,))), (n,))
    with pytest.raises(ValueError, match="shape variable.*n are not a dimension"):
        cpu.build([f])


def test_thread_count_settings(mod, monkeypatch):
    before = runtime.get_num_threads()
    try:
        runtime.set_num_threads(2)
        assert runtime.get_num_threads() == 2
        import ctypes
        assert ctypes.c_int32.in_dll(mod._lib, "tf_num_threads").value == 2
        for bad in (0, -1, 1.5, "2"):
            with pytest.raises(ValueError, match="positive integer"):
                runtime.set_num_threads(bad)
        monkeypatch.setattr(module_mod, "_num_threads", None)
        monkeypatch.setenv("TENSORFORGE_NUM_THREADS", "3")
        assert runtime.get_num_threads() == 3
    finally:
        runtime.set_num_threads(before)


_PROBE = """
import os, sys
from tensorforge.backends import cpu
from tensorforge.ir import expr as E
from tensorforge.tir import nodes as N
A = N.Buffer("A", (4,), "float32")
cpu.build([N.PrimFunc("probe", (A,), N.BufferStore(A, E.const(1.0), (E.const(0),)))])
print(os.environ.get("OMP_WAIT_POLICY"), os.environ.get("GOMP_SPINCOUNT"))
"""


@pytest.mark.parametrize("user_value,expect", [(None, "None None"), ("ACTIVE", "ACTIVE None"),
                                               ("PASSIVE", "PASSIVE None")])
def test_openmp_settings_are_left_to_the_user(user_value, expect):
    """tensorforge's loops run on its own pool, so it writes no libgomp setting into the
    environment that other OpenMP libraries of the process would read."""
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    if user_value:
        env["OMP_WAIT_POLICY"] = user_value
    out = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                         check=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.stdout.strip() == expect


def test_kernel_names_that_clash_with_c_names(mod):
    A = N.Buffer("A", (4,), F32)
    funcs = [N.PrimFunc(name, (A,), loop(i, 4, N.BufferStore(A, E.Cast(F32, i) + k, (i,))))
             for k, name in enumerate(["main", "abs", "free", "tf_alloc", "my-op.1"])]
    built = cpu.build(funcs)
    for k, name in enumerate(["main", "abs", "free", "tf_alloc", "my-op.1"]):
        a = np.zeros(4, F32)
        built[name](a)
        np.testing.assert_array_equal(a, np.arange(4) + k)
    assert "int32_t main_kernel(" in built.source and "int32_t my_op_1(" in built.source


def test_time_evaluator(mod):
    x, y, z = args(64)
    timings = mod.time_evaluator("scale", number=5, repeat=4)(x, y, z)
    assert len(timings) == 4 and all(t > 0 for t in timings)
    slow = mod.time_evaluator("scale", number=1, repeat=1, min_repeat_ms=5)(x, y, z)
    assert len(slow) == 1
    with pytest.raises(TypeError, match="takes 3 array arguments"):
        mod.time_evaluator("scale")(x)


def test_ndarray_basics():
    a = nd.array(np.arange(6, dtype="int16").reshape(2, 3))
    assert a.shape == (2, 3) and a.dtype == "int16" and a.data_ptr % 64 == 0
    copy = a.numpy()
    copy[0, 0] = 99
    assert a.numpy()[0, 0] == 0
    e = nd.empty((3, 5), "float16")
    assert e.shape == (3, 5) and e.dtype == "float16" and e.data_ptr % 64 == 0
    e.copyfrom(np.ones((3, 5)))
    np.testing.assert_array_equal(np.asarray(e), np.ones((3, 5), "float16"))
    assert nd.empty(0, F32).shape == (0,)
    with pytest.raises(ValueError, match="unsupported dtype"):
        nd.empty((2,), "complex64")
    with pytest.raises(ValueError, match="does not match"):
        e.copyfrom(np.ones(3))


def test_shape_variable_types():
    for dtype, ok, bad in (("int64", 300, None), ("int8", 100, 200)):
        v = E.Var("n", dtype)
        A = N.Buffer("A", (v,), F32)
        k = E.Var("k", dtype)
        f = N.PrimFunc("fill", (A,), N.For(k, E.const(0, dtype), v, N.SERIAL,
                                           N.BufferStore(A, E.const(2.0), (k,))), (v,))
        built = cpu.build([f])
        a = np.zeros(ok, F32)
        built(a)
        assert (a == 2).all()
        if bad:
            with pytest.raises(ValueError, match=f"shape variable n={bad} does not fit {dtype}"):
                built(np.zeros(bad, F32))
