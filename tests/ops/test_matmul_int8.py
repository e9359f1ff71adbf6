"""The x86 int8 intrinsics (ops/x86_intrin.py) and the `matmul_int8.cpu` template: bit-exact
against NumPy for shapes with tails, on every int8 unit this CPU has; AMX kernels are checked
through the reference interpreter (which runs the pattern) and compiled everywhere, run only
on a CPU with AMX."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorforge
from tensorforge import te
from tensorforge.ops import x86_intrin as X
from tensorforge.ops.schedules import get_tunable
from tensorforge.ops.schedules.cpu_matmul_int8 import available_units, matmul_int8_workload, pack_b_vnni, reference
from tensorforge.runtime.compile import compile_source
from tensorforge.target import Target
from tensorforge.tir import interp

HAVE = X.host_features()
UNITS = available_units()
VNNI_UNITS = [u for u in UNITS if u != "amx"]
TARGET = Target.parse("c")
needs_vnni = pytest.mark.skipif(not VNNI_UNITS, reason="this CPU has neither AVX-512 VNNI nor AVX-VNNI")


def operands(m, n, k, lanes, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k), dtype=np.uint8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    return a, pack_b_vnni(b, lanes), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)


def test_pack_and_reference_agree_with_numpy():
    a, bp, expect = operands(5, 37, 70, 16)
    assert bp.shape == (3, 64 // 4 * 2, 16, 4)
    np.testing.assert_array_equal(reference(a, bp, n=37), expect)
    # lane l of group g of panel p holds b[4g:4g+4, 16p + l]
    b = np.random.default_rng(1).integers(-128, 128, (8, 20), dtype=np.int8)
    bp = pack_b_vnni(b, 16)
    np.testing.assert_array_equal(bp[1, 1, 2], b[4:8, 18])
    assert (bp[1, 1, 4:] == 0).all()        # columns past 20 are zero padding


def test_template_is_registered_and_tunable():
    t = get_tunable("matmul_int8.cpu")
    assert t is not None and t.reference is reference


@pytest.mark.parametrize("unit", ["avx512vnni", "avxvnni", "amx"])
def test_every_unit_matches_numpy_in_the_interpreter(unit):
    """The interpreter runs each intrinsic's pattern over the bound regions: the matching and
    binding of every unit are checked on any machine."""
    m, n, k = (20, 40, 130) if unit == "amx" else (7, 24, 20)
    s, (A, Bp, C) = matmul_int8_workload(m, n, k, TARGET, unit=unit)
    func = tensorforge.lower(s, [A, Bp, C])
    assert f"tensorized: {'amx' if unit == 'amx' else 'vnni'}" in str(func)
    a, bp, expect = operands(m, n, k, X.LANES[unit])
    got = np.full((m, n), -3, np.int32)
    interp.run(func, a, bp, got)
    np.testing.assert_array_equal(got, expect)


@needs_vnni
@pytest.mark.parametrize("unit", VNNI_UNITS or ["none"])
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 40), n=st.integers(1, 80), k=st.integers(1, 200), seed=st.integers(0, 3))
def test_compiled_kernel_is_bit_exact(unit, m, n, k, seed):
    s, (A, Bp, C) = matmul_int8_workload(m, n, k, TARGET, unit=unit)
    mod = tensorforge.build(s, [A, Bp, C])
    a, bp, expect = operands(m, n, k, X.LANES[unit], seed)
    got = np.full((m, n), -3, np.int32)
    mod(a, bp, got)
    np.testing.assert_array_equal(got, expect)


@needs_vnni
@pytest.mark.parametrize("knobs", [dict(mr=1, nv=1, kb=64), dict(mr=3, nv=2, kb=64, order="rows"),
                                   dict(mr=8, nv=4, kb=256)])
def test_knobs_keep_results_exact(knobs):
    from tensorforge.te.space import ConfigSpace
    m, n, k = 17, 70, 256
    unit = VNNI_UNITS[0]
    space = ConfigSpace()
    matmul_int8_workload(m, n, k, TARGET, cfg=space, unit=unit)
    values = {"unit": unit, "order": "panels", **knobs}
    cfg = space.get(next(i for i in range(len(space)) if all(
        space.get(i)[name].val == v for name, v in values.items())))
    s, (A, Bp, C) = matmul_int8_workload(m, n, k, TARGET, cfg=cfg, unit=unit)
    a, bp, expect = operands(m, n, k, X.LANES[unit], seed=5)
    got = np.full((m, n), -3, np.int32)
    tensorforge.build(s, [A, Bp, C])(a, bp, got)
    np.testing.assert_array_equal(got, expect)


@pytest.mark.skipif("avx512vnni" not in HAVE, reason="this CPU has no AVX-512 VNNI")
def test_single_instruction_dot_on_a_plain_matmul():
    A = te.placeholder((3, 12), "uint8", name="A")
    B = te.placeholder((2, 3, 16, 4), "int8", name="B")        # (N/16, K/4, 16, 4)
    r = te.reduce_axis((0, 12), name="r")
    C = te.compute((3, 32), lambda i, j: te.sum(
        A[i, r].astype("int32") * B[j // 16, r // 4, j % 16, r % 4].astype("int32"), axis=r), name="C")
    s = te.create_schedule(C.op)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=16)
    ro, ri = s[C].split(r, factor=4)
    s[C].reorder(i, jo, ro, ji, ri)
    s[C].tensorize(ji, X.vnni_dot(16))
    mod = tensorforge.build(s, [A, B, C])
    assert "_mm512_dpbusd_epi32" in mod.source
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (3, 12), dtype=np.uint8)
    b = rng.integers(-128, 128, (12, 32), dtype=np.int8)
    got = np.full((3, 32), 4, np.int32)
    mod(a, np.ascontiguousarray(pack_b_vnni(b, 16)[:, :3]), got)
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def test_amx_kernel_compiles_everywhere():
    """The AMX source (tile config, tileloadd, tdpbusd, tilestored, the permission request)
    goes through the C compiler on any x86 machine; the target attribute enables the ISA."""
    from tensorforge.codegen.c import codegen_c
    s, (A, Bp, C) = matmul_int8_workload(32, 32, 128, TARGET, unit="amx")
    func = tensorforge.lower(s, [A, Bp, C])
    source = codegen_c([func], TARGET).text
    for word in ("_tile_loadconfig", "_tile_loadd", "_tile_dpbusd", "_tile_stored", "0x1023"):
        assert word in source
    try:
        compile_source(source, ["-O2", "-fPIC", "-shared", "-fopenmp", "-std=gnu11"])
    except Exception as e:       # the compiler is too old to know AMX
        if "amx" in str(e).lower() and "unknown" in str(e).lower():
            pytest.skip(f"the C compiler does not know AMX: {e}")
        raise


@pytest.mark.skipif({"amx-tile", "amx-int8"} <= HAVE, reason="this CPU has AMX")
def test_amx_build_is_refused_without_amx():
    s, (A, Bp, C) = matmul_int8_workload(16, 16, 64, TARGET, unit="amx")
    with pytest.raises(RuntimeError, match="amx-int8, amx-tile, which this CPU does not have"):
        tensorforge.build(s, [A, Bp, C])


@pytest.mark.skipif(not {"amx-tile", "amx-int8"} <= HAVE, reason="this CPU has no AMX (amx_tile, amx_int8)")
@pytest.mark.parametrize("shape", [(16, 16, 64), (50, 70, 300)])
def test_amx_kernel_is_bit_exact(shape):
    m, n, k = shape
    s, (A, Bp, C) = matmul_int8_workload(m, n, k, TARGET, unit="amx")
    a, bp, expect = operands(m, n, k, 16)
    got = np.full((m, n), -3, np.int32)
    tensorforge.build(s, [A, Bp, C])(a, bp, got)
    np.testing.assert_array_equal(got, expect)


def test_missing_unit_is_a_clear_error():
    with pytest.raises(RuntimeError, match="uses avx512vnni, which this CPU does not have"):
        X.check_features(("avx512vnni",), "kernel k", features=frozenset({"avxvnni"}))
    assert X.int8_unit(frozenset({"avxvnni"})) == "avxvnni"
    assert X.int8_unit(frozenset({"avx512f", "avx512vnni", "amx-tile", "amx-int8"})) == "amx"
    assert X.int8_unit(frozenset()) is None
