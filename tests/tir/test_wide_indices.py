"""Index arithmetic past int32: buffers of 2^31 elements or more and offsets of 2^31 are indexed in
int64, with no wrap-around, while ordinary kernels keep int32 indices.

The property test lowers schedules of elementwise kernels over shapes on both sides of 2^31
elements and evaluates every index and comparison of the loop program at sample points with
C's semantics (each int32 operation wraps): the result must equal exact arithmetic, and a store
that its guards allow must land inside its buffer.  Nothing of that size is allocated there;
one real run reads the last row of a 2^31-element array that is never written (lazily zeroed
pages, a few MiB resident)."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge import te
from tensorforge.ir import dtype as dt
from tensorforge.ir import expr as E
from tensorforge.tir import nodes as N

INT32_MAX = 2 ** 31 - 1


def _wrap(value: int, dtype: str) -> int:
    if dt.is_bool(dtype) or not dt.is_integer(dtype):
        return value
    bits = dt.bits(dtype)
    value &= (1 << bits) - 1
    return value - (1 << bits) if dt.is_int(dtype) and value >> (bits - 1) else value


def _eval(e, env: dict, wrap: bool):
    """The value of integer/boolean expression `e`; with `wrap`, every operation wraps to its dtype."""
    w = (lambda v: _wrap(v, e.dtype)) if wrap else (lambda v: v)
    if isinstance(e, E.IntImm):
        return w(e.value)
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Cast):
        return w(_eval(e.value, env, wrap))
    if isinstance(e, E.CmpOp):
        a, b = _eval(e.a, env, wrap), _eval(e.b, env, wrap)
        return {E.LT: a < b, E.LE: a <= b, E.GT: a > b, E.GE: a >= b, E.EQ: a == b, E.NE: a != b,
                E.And: a and b, E.Or: a or b}[type(e)]
    if isinstance(e, E.Not):
        return not _eval(e.a, env, wrap)
    if isinstance(e, E.Select):
        return _eval(e.true_value if _eval(e.condition, env, wrap) else e.false_value, env, wrap)
    a, b = _eval(e.a, env, wrap), _eval(e.b, env, wrap)
    ops = {E.Add: lambda: a + b, E.Sub: lambda: a - b, E.Mul: lambda: a * b, E.FloorDiv: lambda: a // b,
           E.FloorMod: lambda: a % b, E.Min: lambda: min(a, b), E.Max: lambda: max(a, b),
           E.Div: lambda: int(a / b) if b else 0}
    return w(ops[type(e)]())


def _accesses(stmt, loops=(), guards=()):
    """(loops [(var, extent)], guards, buffer, index) of every buffer access under `stmt`."""
    if isinstance(stmt, N.For):
        yield from _accesses(stmt.body, loops + ((stmt.loop_var, stmt.min, stmt.extent),), guards)
    elif isinstance(stmt, N.IfThenElse):
        yield from _accesses(stmt.then_case, loops, guards + (stmt.condition,))
        if stmt.else_case is not None:
            yield from _accesses(stmt.else_case, loops, guards + (E.Not(stmt.condition),))
    elif isinstance(stmt, N.SeqStmt):
        for s in stmt.seq:
            yield from _accesses(s, loops, guards)
    elif isinstance(stmt, (N.Allocate, N.LetStmt, N.AttrStmt)):
        yield from _accesses(stmt.body, loops, guards)
    elif isinstance(stmt, N.BufferStore):
        yield loops, guards, stmt.buffer, stmt.indices[0], True
        yield from _loads(stmt.value, loops, guards)


def _loads(e, loops, guards):
    if isinstance(e, N.BufferLoad):
        yield loops, guards, e.buffer, e.indices[0], False
        return
    for f in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(e, f, None)
        if isinstance(sub, E.Expr):
            yield from _loads(sub, loops, guards)
    for sub in getattr(e, "args", ()):
        yield from _loads(sub, loops, guards)


def _numel(buf) -> int:
    return int(np.prod([d.value for d in buf.shape], dtype=object))


def check_indices(func, rng) -> None:
    for loops, guards, buf, index, _is_store in _accesses(func.body):
        for point in ("max", "min", "rand", "rand"):
            env = {}
            for var, mn, ext in loops:
                lo = _eval(mn, env, False)
                hi = lo + _eval(ext, env, False) - 1
                env[var] = {"max": hi, "min": lo}.get(point) or int(rng.integers(lo, hi + 1))
            for g in guards:
                assert _eval(g, env, True) == _eval(g, env, False), f"guard {g} wraps at {point}"
            exact = _eval(index, env, False)
            assert _eval(index, env, True) == exact, f"{buf.name}[{index}] wraps at {point}"
            if all(_eval(g, env, False) for g in guards):
                assert 0 <= exact < _numel(buf), f"{buf.name}[{index}] = {exact} is out of bounds"


def _schedule(shape, dtype, how, factor):
    A = te.placeholder(shape, dtype, name="A")
    B = te.compute(shape, lambda *i: A[i] + te.const(1, dtype), name="B")
    s = te.create_schedule(B.op)
    axes = list(s[B].op.axis)
    if how == "fuse":
        s[B].split(s[B].fuse(*axes), factor=factor)
    elif how == "split_outer":
        s[B].split(axes[0], factor=factor)
    elif how == "split_inner":
        s[B].split(axes[-1], factor=factor)
    return tensorforge.lower(s, [A, B])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.one_of(st.integers(1, 70000), st.sampled_from([65535, 65536, 65537, 131072])),
       cols=st.sampled_from([1, 3, 4096, 32768, 32769, 65536]),
       lead=st.sampled_from([(), (2,), (3,)]),
       dtype=st.sampled_from(["int8", "float32"]),
       how=st.sampled_from(["none", "fuse", "split_outer", "split_inner"]),
       factor=st.sampled_from([3, 64, 4096, 5000]),
       seed=st.integers(0, 1000))
def test_no_index_wraps_and_every_guarded_store_is_in_bounds(rows, cols, lead, dtype, how, factor, seed):
    func = _schedule(lead + (rows, cols), dtype, how, factor)
    check_indices(func, np.random.default_rng(seed))


def test_large_offsets_are_int64_and_small_kernels_keep_int32():
    A = te.placeholder((2 ** 31 + 10,), "int8", name="A")
    B = te.compute((10,), lambda i: A[i + 2 ** 31], name="B")
    func = tensorforge.lower(te.create_schedule(B.op), [A, B])
    check_indices(func, np.random.default_rng(0))
    assert "int64(2147483648)" in str(func) and "-2147483648" not in str(func)
    small = _schedule((64, 48), "float32", "fuse", 64)
    assert "int64" not in str(small)
    big = _schedule((65537, 32768), "int8", "fuse", 4096)
    assert "int64" in str(big) and "-2147483648" not in str(big)


def test_reading_past_2_31_elements_runs():
    rows, cols = 65537, 32768                                  # 2^31 + 32768 int8 elements
    A = te.placeholder((rows, cols), "int8", name="A")
    B = te.compute((cols,), lambda j: A[rows - 1, j] + A[0, j], name="B")
    C = te.placeholder((2 ** 31 + 16,), "int8", name="C")
    D = te.compute((16,), lambda i: C[i + 2 ** 31], name="D")
    f = tensorforge.build(te.create_schedule(B.op), [A, B])
    g = tensorforge.build(te.create_schedule(D.op), [C, D])
    a = np.zeros((rows, cols), "int8")                         # calloc: pages appear when touched
    a[-1] = np.arange(cols) % 100
    a[0] = 1
    b = np.full(cols, -1, "int8")
    f(a, b)
    np.testing.assert_array_equal(b, np.arange(cols) % 100 + 1)
    c = np.zeros(2 ** 31 + 16, "int8")
    c[-16:] = np.arange(16) + 5
    d = np.full(16, -1, "int8")
    g(c, d)
    np.testing.assert_array_equal(d, np.arange(16) + 5)
