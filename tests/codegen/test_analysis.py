"""The printers' structural checks and the legalization rewrite."""
from tensorforge.codegen.analysis import is_multiple_of, is_nonneg, plain_division_ok, stored_params
from tensorforge.codegen.legalize import legalize
from tensorforge.ir import expr as E
from tensorforge.tir import nodes as N

i, n, x = E.Var("i"), E.Var("n"), E.Var("x")
known = {i, n}


def test_nonneg_is_sound_and_structural():
    assert is_nonneg(i * 4 + n // 2, known)
    assert is_nonneg((x - 3) % 4, known)               # floor remainder by a positive divisor
    assert is_nonneg(E.Max(x, i), known) and not is_nonneg(E.Min(x, i), known)
    assert not is_nonneg(i - 1, known) and not is_nonneg(x, known)
    assert is_nonneg(E.Cast("int64", i), known)
    u = E.Var("u", "uint32")
    assert not is_nonneg(E.Cast("int32", u), known)    # 2**31 and above wrap negative
    assert is_nonneg(E.Cast("int64", u), known)
    assert is_nonneg(E.Ramp(i * 8, E.const(1), 8), known)
    assert is_nonneg(E.Let(x, i + 1, x * 2), known) and not is_nonneg(E.Let(x, i - 1, x), known)


def test_plain_division_needs_index_divisors():
    A = N.Buffer("A", (4,), "int32")
    assert plain_division_ok(i, E.const(4), known)
    assert not plain_division_ok(i, E.Cast("int32", N.BufferLoad(N.Buffer("U", (4,), "uint8"), (i,))), known)
    assert not plain_division_ok(i - 1, E.const(4), known)
    assert not plain_division_ok(i, N.BufferLoad(A, (i,)), known)


def test_multiple_of():
    assert is_multiple_of(i * 16 + n * 32, 16)
    assert not is_multiple_of(i * 16 + 1, 16)
    assert is_multiple_of(E.const(0), 8)


def test_stored_params():
    A, B = N.Buffer("A", (4,), "float32"), N.Buffer("B", (4,), "float32")
    f = N.PrimFunc("f", (A, B), N.BufferStore(B, N.BufferLoad(A, (i,)), (i,)))
    assert stored_params(f) == (False, True)


def test_legalize_half_arithmetic_and_broadcasts():
    H = N.Buffer("H", (8,), "float16")
    load = N.BufferLoad(H, (E.Ramp(E.const(0), E.const(1), 8),))
    body = N.BufferStore(H, E.Mul(load, E.Broadcast(E.const(2.0, "float16"), 8)),
                         (E.Ramp(E.const(0), E.const(1), 8),))
    out = legalize(N.PrimFunc("h", (H,), body)).body
    assert isinstance(out.value, E.Cast) and out.value.dtype == "float16x8"
    assert out.value.value.dtype == "float32x8"
    F = N.Buffer("F", (8,), "float32")
    floads = N.BufferLoad(F, (E.Ramp(E.const(0), E.const(1), 8),))
    mixed = N.BufferStore(F, E.Add(floads, E.const(1.0)), (E.Ramp(E.const(0), E.const(1), 8),))
    out = legalize(N.PrimFunc("m", (F,), mixed)).body
    assert isinstance(out.value.b, E.Broadcast) and out.value.b.lanes == 8
    untouched = N.PrimFunc("u", (F,), N.BufferStore(F, E.const(1.0), (E.const(0),)))
    assert legalize(untouched) is untouched
