"""precision="bf16": graph/passes/lower_precision, the matmul_bf16 op and its vdpbf16ps template,
and whole models against their float32 compile (relative L2 error, top-1)."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.frontend import from_onnx
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes.lower_precision import ROUNDED, VDPBF16PS, lower_precision, lower_precision_units
from tensorforge.graph.reference import run_reference
from tensorforge.ops.testing import check_op
from tensorforge.ops.x86_bf16 import has_bf16_unit, pack_b_bf16
from tensorforge.target import Target
from tensorforge.testing import models

ml_dtypes = pytest.importorskip("ml_dtypes")
needs_unit = pytest.mark.skipif(not has_bf16_unit(), reason="this CPU has no AVX-512 BF16 (vdpbf16ps)")


def _small_graph():
    rng = np.random.default_rng(0)
    b = GraphBuilder("g")
    b.fold_constants = False
    x = b.input("x", (1, 3, 8, 8), "float32")
    y = b.add1("conv2d", [x, b.const(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))],
               {"padding": (1, 1, 1, 1)})
    y = b.add1("reshape", [b.add1("relu", [y])], {"shape": (1, 256)})
    return b.finish([b.add1("dense", [y, b.const(rng.standard_normal((10, 256)).astype(np.float32))])])


def test_fp32_is_the_default_and_unknown_precisions_are_refused():
    graph = _small_graph()
    assert lower_precision(graph, Target.parse("c")) is graph
    with pytest.raises(ValueError, match="precision must be one of fp32, bf16"):
        tensorforge.compile(graph, precision="fp8")


def test_bf16_rounds_the_operands_of_products_only():
    graph = _small_graph()
    lowered, units = lower_precision_units(graph, Target.parse("c -mcpu=x86-64-v4"), "bf16")   # no unit lookup
    assert units == {ROUNDED: 2}
    ops = [n.op for n in lowered.nodes]
    assert ops == ["cast", "cast", "conv2d", "relu", "reshape", "cast", "cast", "dense"]
    w = lowered.params[lowered.nodes[2].inputs[1]]
    np.testing.assert_array_equal(w, w.astype(ml_dtypes.bfloat16).astype(np.float32))
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    want = run_reference(graph, x)[0]
    got = run_reference(lowered, x)[0]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def test_matmul_bf16_reference():
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((5, 70)).astype(np.float32), rng.standard_normal((70, 20)).astype(np.float32)
    got = check_op("matmul_bf16", [x, pack_b_bf16(w)], {"units": 20}, rtol=1e-5, atol=1e-5)[0]
    bf = ml_dtypes.bfloat16
    np.testing.assert_allclose(got, x.astype(bf).astype(np.float32) @ w.astype(bf).astype(np.float32),
                               rtol=1e-5, atol=1e-5)


@needs_unit
@pytest.mark.parametrize("m, k, n", [(1, 64, 16), (7, 100, 40), (64, 256, 128)])
def test_matmul_bf16_on_vdpbf16ps_with_epilogue(m, k, n):
    rng = np.random.default_rng(3)
    b = GraphBuilder("g")
    x = b.input("x", (m, k), "float32")
    y = b.add1("matmul_bf16", [x, b.const(pack_b_bf16(rng.standard_normal((k, n)).astype(np.float32)))], {"units": n})
    y = b.add1("relu", [b.add1("add", [y, b.const(rng.standard_normal(n).astype(np.float32))])])
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c")
    assert "vdpbf16ps" in model.source
    xv = rng.standard_normal((m, k)).astype(np.float32)
    np.testing.assert_allclose(model(xv)[0], run_reference(graph, xv)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", ["dqn", "bert_encoder"])
def test_models_in_bf16_agree_with_fp32(name):
    model, inputs = models.get(name)
    graph = from_onnx(model)
    fp32 = tensorforge.compile(graph, target="c")
    bf16 = tensorforge.compile(graph, target="c", precision="bf16")
    units = bf16.info["precision_units"]
    assert sum(units.values()) > 0 and (VDPBF16PS in units) == has_bf16_unit()
    a, b = fp32(*inputs.values())[0], bf16(*inputs.values())[0]
    assert np.linalg.norm(a - b) / np.linalg.norm(a) < 1e-2
    assert fp32.info["precision_units"] == {}


def _amx_bf16_schedule():
    from tensorforge import te
    from tensorforge.ops import x86_bf16 as B
    a = te.placeholder((32, 64), "bfloat16", name="A")
    bp = te.placeholder((2, 32, 16, 2), "bfloat16", name="Bp")
    r = te.reduce_axis((0, 64), name="k")
    c = te.compute((32, 32), lambda i, j: te.sum(
        a[i, r].astype("float32") * bp[j // 16, r // 2, j % 16, r % 2].astype("float32"), axis=r), name="C")
    s = te.create_schedule(c.op)
    io, ii = s[c].split(c.op.axis[0], factor=16)
    s[c].tensorize(ii, B.amx_bf16_block(2, 64))
    return s, [a, bp, c]


def test_amx_bf16_kernel_compiles_everywhere():
    """The AMX bf16 source (tile config, tileloadd, tdpbf16ps, tilestored, the permission request)
    goes through the C compiler on any x86 machine; it runs only where the CPU has AMX bf16."""
    from tensorforge.codegen.c import codegen_c
    from tensorforge.ops.x86_bf16 import has_amx_bf16
    from tensorforge.runtime.compile import compile_source
    s, args = _amx_bf16_schedule()
    target = Target.parse("c")
    source = codegen_c([tensorforge.lower(s, args)], target).text
    for word in ("_tile_loadconfig", "_tile_loadd", "_tile_dpbf16ps", "_tile_stored", "0x1023"):
        assert word in source
    try:
        compile_source(source, ["-O2", "-fPIC", "-shared", "-fopenmp", "-std=gnu11"])
    except Exception as e:       # the compiler is too old to know AMX
        if "amx" in str(e).lower() and "unknown" in str(e).lower():
            pytest.skip(f"the C compiler does not know AMX: {e}")
        raise
    if not has_amx_bf16():
        with pytest.raises(RuntimeError, match="amx-bf16, amx-tile, which this CPU does not have"):
            tensorforge.build(s, args)
        return
    rng = np.random.default_rng(4)
    av = rng.standard_normal((32, 64)).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((64, 32)).astype(np.float32)
    got = np.full((32, 32), np.nan, np.float32)
    tensorforge.build(s, args)(av, pack_b_bf16(w), got)
    want = av.astype(np.float32) @ w.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
