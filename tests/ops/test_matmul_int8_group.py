"""`matmul_integer_vnni.cpu`: an int8 matrix product with its requantizing epilogue, compiled as a
graph on the CPU's int8 dot-product unit (skipped on CPUs without one), against the references."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.pipeline import optimize
from tensorforge.graph.reference import run_reference
from tensorforge.ops import x86_intrin as X

pytestmark = pytest.mark.skipif(X.int8_unit() is None, reason="this CPU has no int8 dot-product unit (VNNI, AMX)")


def _graph(m: int, k: int, n: int, relu_floor: bool):
    rng = np.random.default_rng(m * 1000 + k + n)
    b = GraphBuilder("qmm")
    a = b.input("a", (m, k), "uint8")
    w = b.const(rng.integers(-128, 128, (k, n)).astype(np.int8), "w")
    acc = b.add1("matmul_integer", [a, w, b.const(np.array(100, np.uint8)), b.const(np.zeros(n, np.int8))])
    acc = b.add1("add", [acc, b.const(rng.integers(-5000, 5000, n).astype(np.int32))])
    mult = b.const((rng.uniform(0.5, 2.0, n) / (k * 64)).astype(np.float32))
    y = b.add1("requantize", [acc, mult, b.const(np.array(128, np.uint8))], {"axis": -1, "dtype": "uint8"})
    if relu_floor:
        y = b.add1("maximum", [y, b.const(np.array(128, np.uint8))])
    return b.finish([y])


@pytest.mark.parametrize("m, k, n", [(1, 64, 16), (7, 100, 40), (33, 256, 96), (64, 128, 64)])
@pytest.mark.parametrize("relu_floor", [False, True])
def test_int8_product_with_epilogue(m, k, n, relu_floor):
    graph = _graph(m, k, n, relu_floor)
    assert "matmul_integer_vnni" in [node.op for node in optimize(graph, "c").nodes]
    model = tensorforge.compile(graph, target="c")
    assert "vpdpbusd" in model.source or "tdpbusd" in model.source
    a = np.random.default_rng(1).integers(0, 256, (m, k)).astype(np.uint8)
    np.testing.assert_array_equal(model(a)[0], run_reference(graph, a)[0])


@pytest.mark.parametrize("kernel, strides, padding", [((3, 3), (1, 1), (1, 1, 1, 1)), ((1, 1), (2, 2), (0, 0, 0, 0)),
                                                      ((3, 3), (2, 2), (0, 1, 1, 0))])
def test_int8_convolution_as_a_product(kernel, strides, padding):
    rng = np.random.default_rng(5)
    b = GraphBuilder("qconv")
    x = b.input("x", (1, 8, 9, 9), "uint8")
    w = b.const(rng.integers(-128, 128, (24, 8) + kernel).astype(np.int8))
    acc = b.add1("conv_integer", [x, w, b.const(np.array(120, np.uint8)), b.const(np.zeros(24, np.int8))],
                 {"strides": strides, "padding": padding})
    y = b.add1("requantize", [acc, b.const(np.full(24, 1 / 2048, np.float32)), b.const(np.array(128, np.uint8))],
               {"axis": 1, "dtype": "uint8"})
    graph = b.finish([y])
    ops = [node.op for node in optimize(graph, "c").nodes]
    assert "im2col" in ops and "matmul_integer_vnni" in ops and "conv_integer" not in ops
    model = tensorforge.compile(graph, target="c")
    xv = rng.integers(0, 256, (1, 8, 9, 9)).astype(np.uint8)
    np.testing.assert_array_equal(model(xv)[0], run_reference(graph, xv)[0])


def test_batched_rows_become_one_product():
    rng = np.random.default_rng(8)
    b = GraphBuilder("qbatched")
    a = b.input("a", (2, 5, 64), "uint8")
    w = b.const(rng.integers(-128, 128, (64, 32)).astype(np.int8))
    graph = b.finish([b.add1("matmul_integer", [a, w, b.const(np.array(3, np.uint8)), None])])
    assert [n.op for n in optimize(graph, "c").nodes] == ["reshape", "matmul_integer_vnni", "reshape"]
    av = rng.integers(0, 256, (2, 5, 64)).astype(np.uint8)
    np.testing.assert_array_equal(tensorforge.compile(graph, target="c")(av)[0], run_reference(graph, av)[0])


@pytest.mark.parametrize("channels", [40, 64])
def test_conv_result_transposed_back_in_cache_blocks(channels):
    """The requantized conv result goes back to (N, M, OH, OW) with the channel loop blocked by a
    cache line of the product (its inner part just outside the innermost width loop), also when
    the block does not divide the channels, and stays exact."""
    rng = np.random.default_rng(channels)
    b = GraphBuilder("qconv_t")
    x = b.input("x", (1, 16, 10, 12), "uint8")
    w = b.const(rng.integers(-128, 128, (channels, 16, 1, 1)).astype(np.int8))
    acc = b.add1("conv_integer", [x, w, b.const(np.array(7, np.uint8)), b.const(np.zeros(channels, np.int8))])
    mult = b.const(rng.uniform(1 / 4096, 1 / 1024, channels).astype(np.float32))
    graph = b.finish([b.add1("requantize", [acc, mult, b.const(np.array(128, np.uint8))],
                             {"axis": 1, "dtype": "uint8"})])
    model = tensorforge.compile(graph, target="c")
    lines = [ln.strip() for ln in model.source.splitlines() if ln.strip().startswith("for (")]
    block = [k for k, ln in enumerate(lines) if ln.startswith("for (int64_t i1_outer")]
    assert block, "the channel loop of the transposing epilogue is not blocked"
    nest = lines[block[0]:block[0] + 4]      # channel blocks, rows, channels in the block, width
    names = [re.sub(r"_\d+$", "", ln.split()[2]) for ln in nest]      # (a _1 where a name repeats)
    assert names == ["i1_outer", "i2", "i1_inner", "i3"], nest
    xv = rng.integers(0, 256, (1, 16, 10, 12)).astype(np.uint8)
    np.testing.assert_array_equal(model(xv)[0], run_reference(graph, xv)[0])


def test_requantize_before_a_reshuffle_runs_on_the_tile():
    """A batched product requantized, then split into heads (reshape + transpose, as attention
    does): the requantize runs on the register tile and only the 8-bit result is reshuffled,
    instead of storing the int32 product whole and requantizing in the reshuffling loop."""
    rng = np.random.default_rng(12)
    b = GraphBuilder("qheads")
    a = b.input("a", (1, 8, 64), "uint8")
    w = b.const(rng.integers(-128, 128, (64, 32)).astype(np.int8))
    acc = b.add1("matmul_integer", [a, w, b.const(np.array(3, np.uint8)), None])
    mult = b.const(rng.uniform(1 / 4096, 1 / 1024, 32).astype(np.float32))
    q = b.add1("requantize", [acc, mult, b.const(np.array(128, np.uint8))], {"axis": -1, "dtype": "uint8"})
    heads = b.add1("transpose", [b.add1("reshape", [q], {"shape": (1, 8, 4, 8)})], {"perm": (0, 2, 1, 3)})
    graph = b.finish([heads])
    model = tensorforge.compile(graph, target="c")
    allocs = re.findall(r"\((\w+)\*\)tf_alloc", model.source)
    assert "int32_t" not in allocs and "uint8_t" in allocs, allocs
    av = rng.integers(0, 256, (1, 8, 64)).astype(np.uint8)
    np.testing.assert_array_equal(model(av)[0], run_reference(graph, av)[0])


def test_wide_tiles_only_where_no_narrow_width_divides_the_panels():
    from tensorforge.ops.schedules.cpu_matmul_int8_group import nv_choices
    assert nv_choices(625, 4, 32) == ([1, 5], 5)        # 10000 columns of 16
    assert nv_choices(625, 4, 16) == ([1, 5], 5)        # AVX-VNNI: 3 * 5 + 1 <= 16
    assert nv_choices(7, 4, 16) == ([1], 1)             # 7 wide leaves no room for two rows
    assert nv_choices(7, 4, 32) == ([1, 7], 7)
    assert nv_choices(8, 4, 32) == ([1, 2, 4], 4)       # a narrow width divides: as before
    assert nv_choices(625, 4, None) == ([1], 1)         # AMX tiles: at most 4, no wide ones
    assert nv_choices(6, 2, 32) == ([1, 2, 3], 2)
