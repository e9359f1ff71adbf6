"""The register-blocked matmul templates (ops/schedules/cpu_matmul.py) and the packed-weight
matmul (ops/nn_dense_packed.py, graph pass alter_layout_matmul): whole graphs compiled with the
default schedules, against the graph's NumPy reference, over odd sizes, single rows, epilogues
that read the tile elementwise or re-index it, and matmuls with two run-time operands."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.pipeline import optimize
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_dense_packed import pack_columns, unpack_columns
from tensorforge.ops.schedules.cpu_matmul import panel_width, row_tile
from tensorforge.ops.testing import check_op


def _check(graph, *inputs, rtol=1e-4, atol=1e-4):
    model = tensorforge.compile(graph, target="c")
    got = model(*inputs)
    for g, w in zip(got, run_reference(graph, *inputs)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return model


def _dense_graph(m, k, n, epilogue="bias", lead=(), transpose_b=False):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    b = GraphBuilder("mm")
    x = b.input("x", (*lead, m, k), "float32")
    w = b.const(rng.standard_normal((n, k) if transpose_b else (k, n)).astype("float32"), "w")
    y = b.add1("matmul", [x, w], {"transpose_b": transpose_b} if transpose_b else None)
    outs = [y]
    if epilogue in ("bias", "bias_relu", "reshape", "two_outputs"):
        y = b.add1("add", [y, b.const(rng.standard_normal((n,)).astype("float32"), "bias")])
        outs = [y]
    if epilogue == "bias_relu":
        outs = [b.add1("relu", [y])]
    elif epilogue == "reshape":
        outs = [b.add1("transpose", [y], {"perm": tuple(range(len(lead) + 2))[::-1]})]
    elif epilogue == "two_outputs":
        outs = [y, b.add1("relu", [y])]
    x_in = rng.standard_normal((*lead, m, k)).astype("float32")
    return b.finish(outs), x_in


@pytest.mark.parametrize("m, k, n", [(1, 7, 5), (1, 64, 650), (3, 40, 100), (13, 29, 37), (35, 65, 130),
                                     (16, 32, 48), (24, 16, 64)])
def test_packed_matmul_sizes(m, k, n):
    graph, x = _dense_graph(m, k, n)
    model = _check(graph, x)
    assert any(n.op == "matmul_packed" for n in model.info["graph"].nodes)


@pytest.mark.parametrize("m, k, n, lead, epilogue", [(7, 64, 1, (), "bias_relu"), (33, 128, 3, (2,), "bias"),
                                                     (5, 48, 2, (), "two_outputs"), (1, 16, 4, (3,), "reshape")])
def test_narrow_products_run_as_dot_products_of_rows(m, k, n, lead, epilogue):
    """A constant weight of at most half a vector of columns (8 float32 lanes with AVX2) runs as
    dense: a vectorized dot product per output, epilogues as elementwise stages."""
    graph, x = _dense_graph(m, k, n, epilogue, lead)
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    for g, w in zip(model(x), run_reference(graph, x)):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    ops = [node.op for node in model.info["graph"].nodes]
    assert "dense" in ops and "matmul_packed" not in ops, ops


def test_narrow_product_steps_its_columns_together():
    """Per row of x, the dot products of all its columns step through K together: one vector
    of partial sums per column in one loop over K (not one loop, one dependent chain, per
    output), the lanes added at the end of the row."""
    graph, x = _dense_graph(6, 64, 3, "bias")
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)
    (dense,) = [str(f) for f in model.info["funcs"] if "dense" in f.name]
    loops = [line.strip() for line in dense.splitlines() if line.strip().startswith("for ")]
    assert sum(1 for line in loops if "k.outer" in line) == 1, loops      # one pass over K per row
    assert any(line.startswith("for i in range(6)") for line in loops), loops


@pytest.mark.parametrize("epilogue", ["none", "bias_relu", "reshape", "two_outputs"])
def test_packed_matmul_epilogues(epilogue):
    graph, x = _dense_graph(19, 24, 70, epilogue)
    _check(graph, x)


def test_packed_matmul_leading_axes_and_transposed_weight():
    graph, x = _dense_graph(9, 20, 33, "bias", lead=(2,), transpose_b=True)
    _check(graph, x)


@pytest.mark.parametrize("lead, m, epilogue", [((35,), 1, "bias"), ((3, 4), 2, "bias_relu"), ((5,), 3, "two_outputs")])
def test_batched_left_operand_runs_as_one_gemm(lead, m, epilogue):
    """x[..., M, K] x W (a 2-D constant) as torch.onnx.export writes nn.Linear over a sequence:
    one GEMM over all the rows, reshaped back, with its epilogue."""
    graph, x = _dense_graph(m, 24, 70, epilogue, lead=lead)
    model = _check(graph, x)
    packed = [n for n in model.info["graph"].nodes if n.op == "matmul_packed"]
    assert len(packed) == 1 and packed[0].inputs[0].shape == (int(np.prod(lead)) * m, 24)


def test_the_reshape_back_to_the_batched_shape_is_written_from_the_tile():
    """x[35, 1, K] x W + bias: the GEMM over the 35 rows writes its tiles, bias added, straight into
    the (35, 1, N) output (the reshape back only inserts a unit axis): no scratch buffer for the
    whole product and no second pass over it."""
    graph, x = _dense_graph(1, 24, 70, "bias", lead=(35,))
    model = _check(graph, x)
    assert model.source.count("int32_t k") == 1        # the input's reshape to rows is a view
    gemm = model.source[model.source.index("matmul_packed("):]
    assert "tf_alloc(" not in gemm and "free(" not in gemm
    assert "// 70" not in gemm and "/ 70" not in gemm


def test_packed_panels_are_prefetched_a_panel_ahead_when_several_row_tiles_share_them():
    """35 rows (several register tiles per panel): each k step of every tile prefetches the same
    row of the next panel; 3 rows (one tile, a plain stream) get no prefetch."""
    graph, x = _dense_graph(35, 65, 130)
    model = _check(graph, x)
    gemm = model.source[model.source.index("matmul_packed("):]
    assert "__builtin_prefetch(" in gemm
    nr = next(n for n in model.info["graph"].nodes if n.op == "matmul_packed").inputs[1].shape[-1]
    assert f"k * {nr} + {65 * nr})" in gemm                   # K rows of nr columns further on
    graph, x = _dense_graph(3, 65, 130)
    assert "__builtin_prefetch(" not in _check(graph, x).source


def test_tile_is_kept_in_a_local_buffer():
    graph, x = _dense_graph(35, 65, 130, "bias_relu")
    model = _check(graph, x)
    text = "\n".join(str(f) for f in model.info["funcs"])
    assert "'local')" in text and "ramp(" in text


@pytest.mark.parametrize("a_shape, b_shape, ta, tb", [
    ((2, 3, 17, 8), (2, 3, 8, 40), False, False),     # attention-like batched products
    ((17, 8), (3, 8, 21), False, False),              # broadcast batch
    ((4, 9, 6), (4, 13, 6), False, True),             # transposed right operand
    ((6, 5), (6, 33), True, False),
    ((5, 6), (6,), False, False),                     # matrix times vector: generic template
])
def test_matmul_two_runtime_operands(a_shape, b_shape, ta, tb):
    rng = np.random.default_rng(3)
    b = GraphBuilder("mm2")
    a, bb = b.input("a", a_shape, "float32"), b.input("b", b_shape, "float32")
    y = b.add1("relu", [b.add1("matmul", [a, bb], {"transpose_a": ta, "transpose_b": tb})])
    graph = b.finish([y])
    _check(graph, rng.standard_normal(a_shape).astype("float32"), rng.standard_normal(b_shape).astype("float32"))


def test_matmul_float64_falls_back():
    rng = np.random.default_rng(4)
    b = GraphBuilder("mm64")
    a = b.input("a", (5, 7), "float64")
    y = b.add1("matmul", [a, b.const(rng.standard_normal((7, 3)), "w", dtype="float64")])
    graph = b.finish([y])
    model = _check(graph, rng.standard_normal((5, 7)))
    assert not any(n.op == "matmul_packed" for n in model.info["graph"].nodes)


def test_matmul_packed_op_reference():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((11, 37)).astype("float32")
    wp = pack_columns(w, 16)
    assert wp.shape == (3, 11, 16) and np.all(wp[2, :, 5:] == 0)
    np.testing.assert_array_equal(unpack_columns(wp, 37), w)
    x = rng.standard_normal((2, 4, 11)).astype("float32")
    got = check_op("matmul_packed", [x, wp], {"units": 37}, rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(got, x @ w, rtol=1e-4, atol=1e-4)


def test_pass_shares_one_packed_weight():
    rng = np.random.default_rng(6)
    b = GraphBuilder("shared")
    x = b.input("x", (1, 32), "float32")
    w = b.const(rng.standard_normal((32, 32)).astype("float32"), "w")
    y = b.add1("matmul", [b.add1("matmul", [x, w]), w])
    g = optimize(b.finish([y]), "c")
    assert [n.op for n in g.nodes] == ["matmul_packed", "matmul_packed"]
    assert len(g.params) == 1


def test_tile_shapes():
    assert panel_width(1, 650, 16) == 48 and panel_width(1, 2600, 16) == 64
    assert panel_width(128, 256, 16) == 32 and panel_width(35, 10000, 16) == 32
    assert panel_width(4, 5, 16) == 16
    assert row_tile(35, 32, 16) == 12 and row_tile(1, 64, 16) == 1 and row_tile(128, 48, 16) == 8


def test_one_vector_of_columns_takes_at_most_six_rows_with_16_registers():
    """Each row of the left operand is a memory stream: with 16 registers a product of one vector
    of columns (a 5-class head on 2400 rows of 1024) takes 6 rows per tile, not the 12 its
    registers would hold (2.2x slower); with 32 registers the tile is as measured there."""
    import re

    assert row_tile(2400, 8, 8) == 6 and row_tile(35, 8, 8) == 6 and row_tile(3, 8, 8) == 3
    assert row_tile(2400, 16, 16) == 24
    graph, x = _dense_graph(40, 64, 5)
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")        # AVX2: 16 registers
    np.testing.assert_allclose(model(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-4)
    text = "\n".join(str(f) for f in model.info["funcs"])
    rows = [int(r) for r in re.findall(r"allocate\(\[(\d+), 8\], float32, 'local'\)", text)]
    assert rows and max(rows) <= 6, rows


def test_a_product_reshaped_to_a_vector_keeps_its_scratch_tile():
    """(8, K) x (K, 1) reshaped to (8,): the epilogue is a vector, not a tile of rows and columns
    (this crashed the template when the reshape-back rule asked for two axes)."""
    rng = np.random.default_rng(3)
    b = GraphBuilder("vec")
    x = b.input("x", (8, 24), "float32")
    w = b.const(rng.standard_normal((24, 1)).astype("float32"), "w")
    y = b.add1("reshape", [b.add1("matmul", [x, w])], {"shape": (8,)})
    g = b.finish([b.add1("relu", [y])])
    xs = rng.standard_normal((8, 24)).astype("float32")
    model = tensorforge.compile(g)
    np.testing.assert_allclose(model(xs)[0], np.maximum((xs @ b.params[w]).reshape(8), 0), rtol=1e-5, atol=1e-5)


def _guard_free_reductions(model) -> int:
    """How many reduction (k) loops of the model's loop programs hold no guard in their body."""
    count = 0
    for func in model.info["funcs"]:
        lines = str(func).splitlines()
        for n, line in enumerate(lines):
            if line.lstrip().startswith("for k in range("):
                indent = len(line) - len(line.lstrip())
                body = []
                for inner in lines[n + 1:]:
                    if len(inner) - len(inner.lstrip()) <= indent:
                        break
                    body.append(inner)
                count += not any(b.lstrip().startswith("if ") for b in body)
    return count


@pytest.mark.parametrize("a_shape, b_shape", [((100, 160), (160, 196)),         # columns: 12 panels and a tail
                                              ((4, 70, 64), (4, 64, 100)),       # a batch of such products
                                              ((4, 70, 64), (4, 64, 60))])       # padded to 64: the slice's tail
def test_column_tail_of_a_runtime_right_operand_leaves_the_main_tiles_unguarded(monkeypatch, a_shape, b_shape):
    """On two cores the column panels (or the batch) are the parallel loop; the tail panel's
    guard must not stay inside every register tile, where it kept the C compiler from holding the
    tile in registers (a 100x160x196 product ran at 2 GFLOP/s)."""
    import tensorforge.target as target_mod
    monkeypatch.setattr(target_mod, "_host_num_cores", lambda: 2)
    rng = np.random.default_rng(5)
    b = GraphBuilder("mm_tail")
    a, bb = b.input("a", a_shape, "float32"), b.input("b", b_shape, "float32")
    graph = b.finish([b.add1("matmul", [a, bb])])
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v3")
    assert any("parallel" in str(f) for f in model.info["funcs"])
    assert _guard_free_reductions(model) >= 1
    if len(a_shape) == 3:       # the batch alone is the parallel loop, the tail panel outside it
        assert all("for i0 in range(4):  # parallel" in str(f) for f in model.info["funcs"] if "matmul" in f.name)
    ins = [rng.standard_normal(a_shape).astype("float32"), rng.standard_normal(b_shape).astype("float32")]
    np.testing.assert_allclose(model(*ins)[0], run_reference(graph, *ins)[0], rtol=1e-4, atol=1e-4)


def test_matmul_packed_chunk_of_the_reduction():
    """k_offset: a partial product over x[..., k_offset:k_offset + K]; a chunk that does not fit
    the reduced axis is an error, as is a shorter weight without k_offset."""
    from tensorforge.ops.registry import OpError
    rng = np.random.default_rng(7)
    w = rng.standard_normal((12, 20)).astype("float32")
    x = rng.standard_normal((5, 30)).astype("float32")
    got = check_op("matmul_packed", [x, pack_columns(w, 16)], {"units": 20, "k_offset": 9}, rtol=1e-4, atol=1e-4)[0]
    np.testing.assert_allclose(got, x[:, 9:21] @ w, rtol=1e-4, atol=1e-4)
    with pytest.raises(OpError, match="does not fit"):
        check_op("matmul_packed", [x, pack_columns(w, 16)], {"units": 20, "k_offset": 19})
    with pytest.raises(OpError, match="disagree"):
        check_op("matmul_packed", [x, pack_columns(w, 16)], {"units": 20})


def test_a_deep_product_with_many_rows_runs_in_chunks_of_the_reduction():
    """A weight whose (K x nr) panel takes more than half the L2 cache is cut along K into
    chunks packed on their own; the partial products add up in order, the last one with the
    epilogue; fewer rows keep one product."""
    from tensorforge.graph.passes.alter_layout_matmul import CHUNK_MIN_ROWS, reduction_chunks
    from tensorforge.target import Target
    target = Target.parse("c")
    nr = panel_width(128, 48, target.simd_lanes("float32"))
    k = target.l2_cache_bytes // (4 * nr) + 8           # a panel of about the whole L2
    cuts = reduction_chunks(k, nr, 128, target)
    assert cuts and all(c % 8 == 0 for c in cuts) and 4 * nr * max(np.diff([0, *cuts, k])) <= target.l2_cache_bytes // 2
    assert reduction_chunks(k, nr, CHUNK_MIN_ROWS - 1, target) == []
    graph, x = _dense_graph(128, k, 48, epilogue="bias_relu")
    model = _check(graph, x, rtol=1e-3, atol=1e-3)
    products = [n for n in model.info["graph"].nodes if n.op == "matmul_packed"]
    assert [n.attrs["k_offset"] for n in products] == [0, *cuts]
    assert sum(n.inputs[1].shape[1] for n in products) == k
    labels = [label for label, _ in model.profile(x, repeat=1)]
    assert any("matmul_packed+add+add+relu" in label for label in labels)
