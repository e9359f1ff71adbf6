"""Before/expected tests for the loop-IR passes in tir/pipeline.py (simplify has its own file,
test_simplify_pass.py): hand-written input and expected PrimFuncs, compared with
`structural_equal`; each rewrite is also run on the reference interpreter, before and after, to
show that it keeps the program's meaning."""
from __future__ import annotations

import numpy as np
import pytest

from tensorforge.arith import structural_equal
from tensorforge.ir import expr as E
from tensorforge.ir.expr import Broadcast, Call, Ramp, Var, const
from tensorforge.ir.functor import substitute
from tensorforge.tir import interp
from tensorforge.tir import nodes as N
from tensorforge.tir.lane_offsets import shuffled_runs
from tensorforge.tir.passes.flatten_storage import flatten_storage
from tensorforge.tir.passes.partition_loops import partition_loops
from tensorforge.tir.passes.unroll_loops import unroll_loops
from tensorforge.tir.passes.unswitch_selects import MAX_COPIES, unswitch_selects
from tensorforge.tir.passes.vectorize_loops import vectorize_loops
from tensorforge.tir.passes.widen_indices import widen_indices
from tensorforge.tir.pipeline import pass_list

i, j, k = Var("i"), Var("j"), Var("k")
A = N.Buffer("A", (8, 16), "float32")
B = N.Buffer("B", (8, 16), "float32")
X = N.Buffer("X", (60,), "float32")
Y = N.Buffer("Y", (60,), "float32")


def loop(var, extent, body, kind=N.SERIAL, start=0) -> N.For:
    return N.For(var, E.convert(start), E.convert(extent), kind, body)


def load(buf, *idx):
    return N.BufferLoad(buf, tuple(E.convert(x) for x in idx))


def store(buf, value, *idx):
    return N.BufferStore(buf, E.convert(value), tuple(E.convert(x) for x in idx))


def check(pass_fn, before: N.PrimFunc, want_body: N.Stmt) -> N.PrimFunc:
    got = pass_fn(before)
    want = before.with_body(want_body)
    assert structural_equal(got, want), f"got:\n{got}\nexpected:\n{want}"
    return got


def same_results(before: N.PrimFunc, after: N.PrimFunc, seed: int = 0) -> None:
    """Both programs, run on the interpreter from the same inputs, write the same outputs
    (outputs start as NaN, so an element one of them skips shows)."""
    rng = np.random.default_rng(seed)
    inputs = [rng.standard_normal(tuple(int(d.value) for d in b.shape)).astype(b.dtype) for b in before.params]
    runs = []
    for f in (before, after):
        arrays = [a.copy() for a in inputs]
        arrays[-1][...] = np.nan
        interp.run(f, *arrays)
        runs.append(arrays[-1])
    assert not np.isnan(runs[0]).any()
    np.testing.assert_array_equal(runs[1], runs[0])


def test_every_pipeline_pass_has_a_before_expected_test():
    tested = {"simplify", "partition_loops", "flatten_storage", "vectorize_loops", "unroll_loops",
              "widen_indices", "unswitch_selects"}
    assert {name for name, _ in pass_list()} == tested


# -- widen_indices --------------------------------------------------------------------------------

def test_widen_indices_rebuilds_an_offset_past_int32_in_int64():
    """65537 x 32768 int8 elements: i * 32768 + j reaches 2^31 + 32767, so the offset is
    computed in int64 (the int32 loop variables cast, the constant widened)."""
    n = 65537 * 32768
    big_a, big_b = N.Buffer("A", (n,), "int8"), N.Buffer("B", (n,), "int8")
    offset = i * 32768 + j
    before = N.PrimFunc("f", (big_a, big_b), loop(i, 65537, loop(j, 32768, store(
        big_b, load(big_a, offset) + const(1, "int8"), offset))))
    wide = E.cast(i, "int64") * const(32768, "int64") + E.cast(j, "int64")
    want = loop(i, 65537, loop(j, 32768, store(big_b, load(big_a, wide) + const(1, "int8"), wide)))
    check(widen_indices, before, want)


def test_widen_indices_keeps_offsets_that_fit_in_int32():
    body = loop(i, 8, loop(j, 16, store(B, load(A, i * 16 + j) * 2.0, i * 16 + j)))
    before = N.PrimFunc("f", (A, B), body)
    check(widen_indices, before, body)


# -- flatten_storage ------------------------------------------------------------------------------

def test_flatten_storage_makes_row_major_offsets():
    before = N.PrimFunc("f", (A, B), loop(i, 8, loop(j, 16, store(B, load(A, i, j) * 2.0, i, j))))
    want = loop(i, 8, loop(j, 16, store(B, load(A, i * 16 + j) * 2.0, i * 16 + j)))
    same_results(before, check(flatten_storage, before, want))


def test_flatten_storage_of_three_dimensions_and_flat_accesses():
    C = N.Buffer("C", (2, 3, 4), "float32")
    D = N.Buffer("D", (24,), "float32")
    body = loop(i, 2, loop(j, 3, loop(k, 4, store(D, load(C, i, j, k), (i * 3 + j) * 4 + k))))
    before = N.PrimFunc("f", (C, D), body)
    want = loop(i, 2, loop(j, 3, loop(k, 4, store(D, load(C, (i * 3 + j) * 4 + k), (i * 3 + j) * 4 + k))))
    same_results(before, check(flatten_storage, before, want))


def test_flatten_storage_keeps_one_dimensional_accesses():
    body = loop(i, 60, store(Y, load(X, i) + 1.0, i))
    before = N.PrimFunc("f", (X, Y), body)
    check(flatten_storage, before, body)


# -- unswitch_selects -----------------------------------------------------------------------------

def _concat_rows(sources: int, rows_per: int = 2, width: int = 16):
    """out[r, x] = relu(source r // rows_per, row r % rows_per), the rows the outer (parallel)
    loop and each row a vectorized loop: a concat's select chain on the row."""
    r, x = Var("r"), Var("x")
    srcs = [N.Buffer(f"S{s}", (rows_per * width,), "float32") for s in range(sources)]
    out = N.Buffer("O", (sources * rows_per * width,), "float32")

    def pick(s):
        value = load(srcs[s], (r - s * rows_per) * width + x)
        return value if s == sources - 1 else E.Select(r < (s + 1) * rows_per, value, pick(s + 1))

    def row(value):
        relu = E.Select(value < 0.0, const(0.0, "float32"), value)
        return loop(x, width, store(out, relu, r * width + x), N.VECTORIZED)

    return r, srcs, out, row, pick


def test_unswitch_selects_gives_each_source_of_a_concat_its_own_row_loop():
    r, srcs, out, row, pick = _concat_rows(3)
    before = N.PrimFunc("f", (*srcs, out), loop(r, 6, row(pick(0)), N.PARALLEL))
    x = Var("x")
    one = [load(srcs[s], (r - s * 2) * 16 + x) for s in range(3)]
    want = loop(r, 6, N.IfThenElse(r < 2, row(one[0]), N.IfThenElse(r < 4, row(one[1]), row(one[2]))),
                N.PARALLEL)
    got = unswitch_selects(before)
    # the row loops are rebuilt: compare with their loop variable renamed to the expected one
    assert str(got.body).replace(" ", "") == str(want).replace(" ", ""), f"got:\n{got}\nexpected:\n{want}"
    same_results(before, got)


def test_unswitch_selects_leaves_data_choices_and_long_chains_alone():
    r, x = Var("r"), Var("x")
    value = load(A, r * 16 + x)
    relu = N.PrimFunc("f", (A, B), loop(r, 8, loop(x, 16, store(
        B, E.Select(value < 0.0, const(0.0, "float32"), value), r * 16 + x), N.VECTORIZED)))
    assert unswitch_selects(relu) is relu                     # the condition reads memory
    scalar_loops = N.PrimFunc("f", (A, B), loop(r, 8, loop(x, 16, store(
        B, E.Select(r < 4, load(A, r * 16 + x), const(0.0, "float32")), r * 16 + x))))
    assert unswitch_selects(scalar_loops) is scalar_loops     # no vectorized loop to free
    r2, srcs, out, row, pick = _concat_rows(MAX_COPIES + 1, rows_per=1)
    long = N.PrimFunc("f", (*srcs, out), loop(r2, MAX_COPIES + 1, row(pick(0)), N.PARALLEL))
    assert unswitch_selects(long) is long                     # more copies than MAX_COPIES


# -- partition_loops ------------------------------------------------------------------------------

def test_partition_loops_peels_the_guarded_tail():
    # A split of 60 by 16: the guard holds for io in [0, 3); in the peeled io = 3 iteration the
    # inner loop is split again, the guard holding for ii in [0, 12).
    io, ii = Var("io"), Var("ii")
    copy = store(Y, load(X, io * 16 + ii), io * 16 + ii)
    guarded = N.IfThenElse(io * 16 + ii < 60, copy)
    before = N.PrimFunc("f", (X, Y), loop(io, 4, loop(ii, 16, guarded)))
    want = N.seq(loop(io, 3, loop(ii, 16, copy)),
                 loop(io, 1, N.seq(loop(ii, 12, copy), loop(ii, 4, guarded, start=12)), start=3))
    same_results(before, check(partition_loops, before, want))


def test_partition_loops_branches_a_parallel_loop_on_its_guard():
    # the iterations stay in one parallel loop; those that pass the guard run its body without it
    io, ii = Var("io"), Var("ii")
    copy = store(Y, load(X, io * 16 + ii), io * 16 + ii)
    guarded = N.IfThenElse(io * 16 + ii < 60, copy)
    parallel = N.PrimFunc("f", (X, Y), loop(io, 4, loop(ii, 16, guarded), kind=N.PARALLEL))
    # the one tail iteration (io = 3) is split again, its guard holding for ii in [0, 12)
    last = {io: const(3)}
    tail = N.seq(loop(ii, 12, substitute(copy, last)), loop(ii, 4, substitute(guarded, last), start=12))
    want = loop(io, 4, N.IfThenElse(io < 3, loop(ii, 16, copy), tail), kind=N.PARALLEL)
    same_results(parallel, check(partition_loops, parallel, want))


def test_partition_loops_splits_a_loop_over_a_shape_variable_at_its_last_whole_vector():
    """A kernel for any size (shape_generic.py): a split of n by 16 leaves the guard
    io * 16 + ii < n.  It holds for io < n // 16, so the serial loop becomes a head without it
    and a tail with it, and a parallel loop branches on io < n // 16 (at least 0: the split
    never ran a negative count of iterations, and neither may its head)."""
    n, io, ii = Var("n", "int64"), Var("io", "int64"), Var("ii", "int64")
    xs, ys = N.Buffer("X", (n,), "float32"), N.Buffer("Y", (n,), "float32")
    copy = store(ys, load(xs, io * 16 + ii), io * 16 + ii)
    guarded = N.IfThenElse(io * 16 + ii < n, copy)
    end = E.Max(E.FloorDiv(n, const(16, "int64")), const(0, "int64"))
    extent = (n + 15) // 16
    serial = N.PrimFunc("f", (xs, ys), loop(io, extent, loop(ii, 16, guarded)))
    want = N.seq(N.For(io, E.convert(0), end, N.SERIAL, loop(ii, 16, copy)),
                 N.For(io, end, extent - end, N.SERIAL, loop(ii, 16, guarded)))
    parallel = N.PrimFunc("f", (xs, ys), loop(io, extent, loop(ii, 16, guarded), kind=N.PARALLEL))
    branched = loop(io, extent, N.IfThenElse(io < end, loop(ii, 16, copy), loop(ii, 16, guarded)), kind=N.PARALLEL)
    # a guard whose bound is not the loop's own (E // c may pass the loop's end): the head stops
    # at the loop's end too
    m = Var("m", "int64")
    check(partition_loops, N.PrimFunc("f", (xs, ys), loop(io, m, loop(ii, 16, guarded))),
                  N.seq(N.For(io, E.convert(0), E.Max(E.Min(E.FloorDiv(n, const(16, "int64")), m), const(0, "int64")),
                              N.SERIAL, loop(ii, 16, copy)),
                        N.For(io, E.Max(E.Min(E.FloorDiv(n, const(16, "int64")), m), const(0, "int64")),
                              m - E.Max(E.Min(E.FloorDiv(n, const(16, "int64")), m), const(0, "int64")), N.SERIAL,
                              loop(ii, 16, guarded))))
    for before, expected in ((serial, want), (parallel, branched)):
        after = check(partition_loops, before, expected)
        for size in (37, 48, 5):
            x = np.arange(size, dtype="float32")
            y = np.full(size, np.nan, "float32")
            interp.run(after, x, y)
            np.testing.assert_array_equal(y, x)


def test_partition_loops_peels_every_guard_off_the_main_part():
    # 650 units in 41 blocks of 16, the blocks in 2 parallel chunks of 21 (an LSTM step's
    # schedule): a block guard (chunk * 21 + block < 41) and, inside it, a unit guard.  The first
    # chunk passes both guards and runs without them.  In the second, the block loop's head
    # [0, 20) drops the block guard and is split again by the unit guard, which holds for every
    # block in [0, 19): the main part has no guard at all.
    po, bo, ii = Var("po"), Var("bo"), Var("ii")
    src, dst = N.Buffer("P", (650,), "float32"), N.Buffer("Q", (650,), "float32")
    unit = po * 336 + bo * 16 + ii
    copy = store(dst, load(src, unit), unit)
    unit_guard = N.IfThenElse(unit < 650, copy)
    block_guard = N.IfThenElse(po * 21 + bo < 41, loop(ii, 16, unit_guard))
    before = N.PrimFunc("f", (src, dst), loop(po, 2, loop(bo, 21, block_guard), kind=N.PARALLEL))
    second = {po: const(1)}
    copy1, unit_guard1, block_guard1 = (substitute(x, second) for x in (copy, unit_guard, block_guard))
    want = loop(po, 2, N.IfThenElse(po < 1, loop(bo, 21, loop(ii, 16, copy)), N.seq(
        loop(bo, 19, loop(ii, 16, copy1)),
        loop(bo, 1, N.seq(loop(ii, 10, copy1), loop(ii, 6, unit_guard1, start=10)), start=19),
        loop(bo, 1, block_guard1, start=20))), kind=N.PARALLEL)
    same_results(before, check(partition_loops, before, want))


def test_partition_loops_splits_a_serial_loop_where_its_clamps_are_one_operand():
    """An edge pad's row: lane ii of vector io reads P[min(max(io * 4 + ii - 1, 0), 13)].  On the
    middle vectors io in [1, 3) both clamps are their first operand; the head and the tail keep
    them."""
    io, ii = Var("io"), Var("ii")
    src, dst = N.Buffer("P", (14,), "float32"), N.Buffer("Q", (16,), "float32")
    clamped = E.Min(E.Max(io * 4 + ii - 1, const(0)), const(13))
    body = loop(ii, 4, store(dst, load(src, clamped), io * 4 + ii), N.VECTORIZED)
    before = N.PrimFunc("f", (src, dst), loop(io, 4, body))
    plain = loop(ii, 4, store(dst, load(src, io * 4 + ii - 1), io * 4 + ii), N.VECTORIZED)
    want = N.seq(loop(io, 1, body), loop(io, 2, plain, start=1), loop(io, 1, body, start=3))
    same_results(before, check(partition_loops, before, want))


def test_partition_loops_leaves_an_if_with_an_else():
    io, ii = Var("io"), Var("ii")
    other = N.IfThenElse(io * 16 + ii < 60, store(Y, const(1.0), ii), store(Y, const(2.0), ii))
    with_else = N.PrimFunc("f", (X, Y), loop(io, 4, loop(ii, 16, other)))
    check(partition_loops, with_else, with_else.body)            # an if with an else stays


# -- vectorize_loops ------------------------------------------------------------------------------

def test_vectorize_loops_turns_the_loop_into_ramps_and_broadcasts():
    io, v = Var("io"), Var("v")
    body = loop(io, 15, loop(v, 4, store(Y, load(X, io * 4 + v) * 2.0 + load(X, io), io * 4 + v), N.VECTORIZED))
    before = N.PrimFunc("f", (X, Y), body)
    lanes = Ramp(io * 4 + 0, const(1), 4)
    value = load(X, lanes) * Broadcast(const(2.0), 4) + Broadcast(load(X, io), 4)
    want = loop(io, 15, N.BufferStore(Y, value, (lanes,)))
    same_results(before, check(vectorize_loops, before, want))


def test_vectorize_loops_rounds_a_vector_and_keeps_other_calls_scalar():
    """A rounding call (a requantizing epilogue's) becomes one call on the vector; exp stays in
    a scalar loop, which `omp simd` maps onto the vector math library."""
    io, v = Var("io"), Var("v")
    rounded = loop(io, 15, loop(v, 4, store(Y, Call("float32", "round", (load(X, io * 4 + v) * 2.5,)), io * 4 + v),
                                N.VECTORIZED))
    before = N.PrimFunc("f", (X, Y), rounded)
    lanes = Ramp(io * 4 + 0, const(1), 4)
    want = loop(io, 15, N.BufferStore(Y, Call("float32x4", "round", (load(X, lanes) * Broadcast(const(2.5), 4),)),
                                      (lanes,)))
    same_results(before, check(vectorize_loops, before, want))
    exp = loop(v, 4, store(Y, Call("float32", "exp", (load(X, v),)), v), N.VECTORIZED)
    check(vectorize_loops, N.PrimFunc("f", (X, Y), exp), exp)


def test_vectorize_loops_keeps_a_scalar_loop_where_no_vector_form_is_safe():
    v = Var("v")
    lane_condition = loop(v, 4, N.IfThenElse(v < 2, store(Y, const(1.0), v)), N.VECTORIZED)
    one_address = loop(v, 4, store(Y, load(X, v), 0), N.VECTORIZED)
    odd_lanes = loop(v, 3, store(Y, load(X, v), v), N.VECTORIZED)
    for body in (lane_condition, one_address, odd_lanes):
        check(vectorize_loops, N.PrimFunc("f", (X, Y), body), body)


def test_vectorize_loops_reads_a_depth_to_space_as_runs_under_a_relu():
    """Lane v of an interleave reads X[b + (v % 2) * 30 + v // 2]: a vector index of floor
    divisions that reads two runs of 4 (tir/lane_offsets.py), and the ReLU's select reads under
    its condition the loads the condition reads.  Without the runs the loop stays scalar."""
    io, v = Var("io"), Var("v")
    X, Y = N.Buffer("X", (64,), "float32"), N.Buffer("Y", (64,), "float32")
    x = load(X, io * 4 + v % 2 * 30 + v // 2)
    relu = E.Select(x < const(0.0), const(0.0), x)
    before = N.PrimFunc("f", (X, Y), loop(io, 8, loop(v, 8, store(Y, relu, io * 8 + v), N.VECTORIZED)))
    lanes = Ramp(const(0), const(1), 8)
    two = Broadcast(const(2), 8)
    index = Broadcast(io * 4, 8) + E.FloorMod(lanes, two) * Broadcast(const(30), 8) + E.FloorDiv(lanes, two)
    xv = load(X, index)
    want = loop(io, 8, N.BufferStore(Y, E.Select(xv < Broadcast(const(0.0), 8), Broadcast(const(0.0), 8), xv),
                                     (Ramp(io * 8 + 0, const(1), 8),)))
    after = vectorize_loops(before)
    same_results(before, after)
    got_store = after.body.body
    assert structural_equal(got_store.indices, want.body.indices)
    (got_index,) = got_store.value.true_value.indices if isinstance(got_store.value.true_value, N.BufferLoad) \
        else got_store.value.false_value.indices
    (got_base, got_runs), (want_base, want_runs) = shuffled_runs(got_index), shuffled_runs(index)
    assert structural_equal(got_base, want_base) and got_runs == want_runs
    assert want_runs.length == 4 and want_runs.starts == (0, 30)
    # lanes at distances that are no runs (pairs of lanes on every third element), or a select
    # whose arm loads what the condition does not read: the loop stays scalar
    strided = loop(v, 8, store(Y, load(X, v // 2 * 3), v), N.VECTORIZED)
    other = loop(v, 8, store(Y, E.Select(load(X, v % 2 * 30 + v // 2) < const(0.0), load(X, v), const(1.0)), v),
                 N.VECTORIZED)
    for body in (strided, other):
        check(vectorize_loops, N.PrimFunc("f", (X, Y), body), body)


# -- unroll_loops ---------------------------------------------------------------------------------

def test_unroll_loops_copies_the_body_per_iteration():
    io, u = Var("io"), Var("u")
    body = loop(io, 20, loop(u, 3, store(Y, load(X, io * 3 + u) + 1.0, io * 3 + u), N.UNROLLED, start=0))
    before = N.PrimFunc("f", (X, Y), body)
    copies = [store(Y, load(X, io * 3 + const(c)) + 1.0, io * 3 + const(c)) for c in range(3)]
    want = loop(io, 20, N.seq(*copies))
    same_results(before, check(unroll_loops, before, want))


def test_unroll_loops_resolves_selects_on_the_unrolled_index():
    u = Var("u")
    pick = E.Select(u < 1, load(X, u), E.Select(u < 2, const(5.0), load(X, u) * 3.0))
    body = loop(u, 3, store(Y, pick, u), N.UNROLLED, start=1)
    want = N.seq(store(Y, const(5.0), const(1)), store(Y, load(X, const(2)) * 3.0, const(2)),
                 store(Y, load(X, const(3)) * 3.0, const(3)))
    check(unroll_loops, N.PrimFunc("f", (X, Y), body), want)


def test_unroll_loops_leaves_long_and_serial_loops():
    u = Var("u")
    long = loop(u, 200, store(Y, load(X, u // 4), u // 4), N.UNROLLED)
    serial = loop(u, 3, store(Y, load(X, u), u))
    for body in (long, serial):
        check(unroll_loops, N.PrimFunc("f", (X, Y), body), body)
    short = N.PrimFunc("f", (X, Y), loop(u, 8, store(Y, load(X, u), u), N.UNROLLED))
    assert structural_equal(unroll_loops(short, max_extent=4), short)


@pytest.mark.parametrize("name", ["partition_loops", "flatten_storage", "vectorize_loops", "unroll_loops",
                                  "widen_indices"])
def test_passes_are_idempotent(name):
    fn = next(f for n, f in pass_list() if n == name)
    io, ii = Var("io"), Var("ii")
    inner = N.IfThenElse(io * 16 + ii < 60, store(Y, load(X, io * 16 + ii), io * 16 + ii))
    before = N.PrimFunc("f", (X, Y), loop(io, 4, loop(ii, 16, inner, N.VECTORIZED)))
    once = fn(before)
    assert structural_equal(fn(once), once)
