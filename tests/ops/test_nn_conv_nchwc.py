"""The blocked conv (conv2d_nchwc + nchwc_to_nchw): the op against its reference, and whole
conv + bias + relu (+ residual) graphs compiled through alter_layout and the register-blocked
template against the NumPy references."""
import re

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.passes import conv_as_tap_planes as tap_planes
from tensorforge.graph.reference import run_reference
from tensorforge.ops.nn_conv_nchwc import pack_weight, to_nchw, to_nchwc, unpack_weight
from tensorforge.ops.testing import check_op


def test_pack_roundtrip():
    w = np.arange(32 * 3 * 2 * 2, dtype="float32").reshape(32, 3, 2, 2)
    assert np.array_equal(unpack_weight(pack_weight(w, 16)), w)


def test_ops_against_reference():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 9, 11)).astype("float32")
    wp = pack_weight(rng.standard_normal((32, 5, 3, 3)).astype("float32"), 16)
    (y,) = check_op("conv2d_nchwc", [x, wp], {"strides": (2, 1), "padding": (1, 0, 1, 2)}, rtol=1e-4, atol=1e-4)
    check_op("nchwc_to_nchw", [y])


@pytest.mark.parametrize("c,f,hw,k,stride,pad,residual", [
    (3, 64, 23, 7, 2, 3, False),      # a ResNet stem: odd width, tail tiles
    (16, 32, 14, 3, 1, 1, True),      # conv + bias + residual add + relu in one kernel
    (8, 48, 9, 1, 2, 0, False),       # 1x1, stride 2, 48 channels = 3 blocks of 16
    (3, 32, 32, 3, 1, 1, True),       # 32x32 planes of 4 KiB: the tiles staged through a row buffer
])
def test_compiled_conv_graph(c, f, hw, k, stride, pad, residual):
    rng = np.random.default_rng(1)
    b = GraphBuilder("conv")
    x = b.input("x", (1, c, hw, hw), "float32")
    w = b.const(rng.standard_normal((f, c, k, k)).astype("float32") * 0.1, "w")
    bias = b.const(rng.standard_normal((f, 1, 1)).astype("float32"), "bias")
    y = b.add1("conv2d", [x, w], {"strides": (stride, stride), "padding": (pad,) * 4, "dilations": (1, 1),
                                  "groups": 1})
    y = b.add1("add", [y, bias])
    if residual:
        skip = b.input("skip", y.shape, "float32")
        y = b.add1("add", [y, skip])
    g = b.finish([b.add1("relu", [y])])
    model = tensorforge.compile(g, opt_level=2)       # the direct conv (3 makes 3x3 ones Winograd)
    assert any(st.get("symbol", "").find("conv2d_nchwc") >= 0 for st in model.spec.steps)
    inputs = [rng.standard_normal(v.shape).astype("float32") for v in g.inputs]
    np.testing.assert_allclose(model(*inputs)[0], run_reference(g, *inputs)[0], rtol=1e-4, atol=1e-4)


def test_chunks_of_the_weights_serve_every_image():
    """A conv whose block weights outgrow L2 runs its reduction in chunks; with several images,
    each chunk serves every image's row before the next is read (the block loop parallel, the
    chunk loop around the image loop), instead of streaming the weights once per image."""
    rng = np.random.default_rng(6)
    b = GraphBuilder("conv")
    x = b.input("x", (3, 1024, 80), "float32")
    w = b.const(rng.standard_normal((32, 1024, 64)).astype("float32") * 0.01, "w")
    g = b.finish([b.add1("relu", [b.add1("conv1d", [x, w], {"padding": (0, 0)})])])
    model = tensorforge.compile(g, target="c -mcpu=x86-64-v3")
    (conv,) = [str(f) for f in model.info["funcs"] if "conv" in f.name]
    loops = [line.strip() for line in conv.splitlines() if line.strip().startswith("for ")]
    chunk = next(k for k, line in enumerate(loops) if line.startswith("for rc.outer"))
    assert loops[chunk + 1].startswith(("for i0 in range(3)", "for i in range(3)")), loops   # the image loop
    xs = rng.standard_normal((3, 1024, 80)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


def test_planes_that_share_l1_sets_are_staged():
    """NCHW planes of a multiple of 4 KiB put one column's channel lines into one L1 set: the
    tiles then go through a local row buffer copied out by channel rows (in the C source)."""
    from tensorforge.ops.schedules.cpu_conv2d_nchwc import planes_share_l1_sets
    assert planes_share_l1_sets((1, 64, 224, 224), 16) and planes_share_l1_sets((1, 64, 32, 32), 8)
    assert not planes_share_l1_sets((1, 64, 225, 225), 16) and not planes_share_l1_sets((1, 64, 56, 56), 16)
    assert not planes_share_l1_sets((1, 64, 112, 112), 16)          # 4 sets of 4 lines
    rng = np.random.default_rng(2)
    for hw, staged in ((32, True), (30, False)):
        b = GraphBuilder("conv")
        x = b.input("x", (1, 3, hw, hw), "float32")
        w = b.const(rng.standard_normal((16, 3, 3, 3)).astype("float32"), "w")
        g = b.finish([b.add1("conv2d", [x, w], {"strides": (1, 1), "padding": (1,) * 4, "dilations": (1, 1),
                                                "groups": 1})])
        model = tensorforge.compile(g, target="c -mcpu=x86-64-v3", opt_level=2)
        assert ("nchw_local[" in model.source) == staged
        xv = rng.standard_normal((1, 3, hw, hw)).astype("float32")
        np.testing.assert_allclose(model(xv)[0], run_reference(g, xv)[0], rtol=1e-4, atol=1e-4)


def test_rows_of_4k_go_through_the_buffer_in_pieces():
    """A 1-D conv over 1024 positions: its NCHW output planes share L1 sets, and so would the
    rows of a (B x 1024) buffer (8.2x ONNX Runtime's time for 48 -> 256 channels, groups 2):
    the buffer holds BUFFER_PIECE positions of the B channels at a time.  (96 input channels per
    group: with 24, windows of 144 values for 256 filters run as alter_layout_im2col's product
    per group instead.)"""
    from tensorforge.ops.schedules.cpu_conv2d_nchwc import BUFFER_PIECE
    rng = np.random.default_rng(3)
    b = GraphBuilder("conv")
    x = b.input("x", (1, 192, 1, 1024), "float32")
    w = b.const((rng.standard_normal((256, 96, 1, 3)) / 16).astype("float32"), "w")
    g = b.finish([b.add1("relu", [b.add1("conv2d", [x, w], {"strides": (1, 1), "padding": (0, 1, 0, 1),
                                                             "dilations": (1, 1), "groups": 2})])])
    model = tensorforge.compile(g, target="c")
    found = re.search(r"float nchw_local\[(\d+)\]", model.source)      # on the stack: a piece of the row
    assert found and int(found.group(1)) <= 32 * 2 * BUFFER_PIECE, found
    xv = rng.standard_normal((1, 192, 1, 1024)).astype("float32")
    np.testing.assert_allclose(model(xv)[0], run_reference(g, xv)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("hw", [
    6,      # a padded row of 8 columns, at most one vector on any x86: unrolled, one copy per column
    70,     # 72 columns, wider than four vectors: split into vectors and a tail
])
def test_padded_input_copy_walks_planes_and_rows(hw):
    """The conv's zero-padded input copy loops over (image, channel) planes and rows, so its
    indices need no div/mod; a narrow row is unrolled."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("conv")
    x = b.input("x", (1, 3, hw, hw), "float32")
    w = b.const(rng.standard_normal((16, 3, 3, 3)).astype("float32"), "w")
    g = b.finish([b.add1("conv2d", [x, w], {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1),
                                            "groups": 1})])
    model = tensorforge.compile(g)
    xs = rng.standard_normal((1, 3, hw, hw)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)
    copies = [line.strip() for line in model.source.splitlines() if line.strip().startswith("pad[")]
    assert copies and not any("/" in c or "%" in c for c in copies)
    if hw == 6:
        assert len(copies) == hw + 2


# -- blocked input (data_layout NCHW<b>c) and the layout transforms --------------------------------
def test_layout_transforms_against_reference_and_each_other():
    x = np.random.default_rng(3).standard_normal((2, 24, 5, 3)).astype("float32")
    (blocked,) = check_op("nchw_to_nchwc", [x], {"block": 8})
    assert blocked.shape == (2, 3, 5, 3, 8) and np.array_equal(blocked[:, 1, :, :, 2], x[:, 10])
    (back,) = check_op("nchwc_to_nchw", [blocked])
    assert np.array_equal(back, x) and np.array_equal(to_nchw(to_nchwc(x, 4)), x)


@pytest.mark.parametrize("shape,block,transposed", [
    ((2, 32, 3, 16), 16, True),       # two images, blocks of 16 as two 8x8 blocks per 8 columns
    ((1, 16, 4, 8), 8, True),
    ((1, 16, 5, 7), 8, False),        # rows of 7: element by element
])
def test_nchw_to_nchwc_transposes_8x8_blocks(shape, block, transposed):
    """A standalone nchw_to_nchwc with rows and blocks of multiples of 8 runs as 8x8 blocks
    transposed in registers (ops/x86_transpose.py); the same values either way."""
    b = GraphBuilder("t")
    x = b.input("x", shape, "float32")
    g = b.finish([b.add1("nchw_to_nchwc", [x], {"block": block})])
    model = tensorforge.compile(g, target="c -mcpu=x86-64-v3")
    assert ("tf_transpose8x8_f32(" in model.source) == transposed
    xs = np.random.default_rng(4).standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(model(xs)[0], to_nchwc(xs, block))


@pytest.mark.parametrize("shape,perm,blocked", [
    ((64, 40), (1, 0), True),                      # a 2-D transpose
    ((48, 32), (1, 0), True),                      # multiples of 16: 16 x 16 tiles of four blocks
    ((1, 32, 2, 48), (0, 2, 3, 1), True),
    ((2, 16, 3, 8), (0, 2, 3, 1), True),           # NCHW -> NHWC
    ((2, 3, 8, 16), (0, 3, 1, 2), True),           # NHWC -> NCHW
    ((4, 8, 16), (2, 0, 1), True),
    ((2, 8, 3, 16), (0, 2, 1, 3), False),          # the innermost axis stays: rows are copied
    ((16, 12), (1, 0), False),                     # 12 is no multiple of 8
])
def test_transpose_moving_the_innermost_axis_runs_8x8_blocks(shape, perm, blocked):
    """A transpose of a graph input that moves the innermost axis, both moved axes multiples of
    8, runs as 8x8 blocks transposed in registers; the same values either way."""
    b = GraphBuilder("t")
    x = b.input("x", shape, "float32")
    model = tensorforge.compile(b.finish([b.add1("transpose", [x], {"perm": perm})]), target="c -mcpu=x86-64-v3")
    assert ("tf_transpose8x8_f32(" in model.source) == blocked
    xs = np.random.default_rng(5).standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(model(xs)[0], np.transpose(xs, perm))


@pytest.mark.parametrize("shape,repeats,rows", [
    ((1, 4, 5, 28), (1, 1, 2, 2), True),           # rows of 28 copied twice: 3 vectors and a tail
    ((2, 3, 16), (1, 2, 3), True),
    ((2, 3, 5), (1, 2, 4), False),                 # rows shorter than a vector: the flat loop
    ((2, 3, 16), (2, 1, 1), False),                # the innermost axis is not repeated
])
def test_tile_repeating_the_innermost_axis_copies_rows(shape, repeats, rows):
    """A tile that repeats the innermost axis runs its last axis split by the input row's length,
    each copy reading the row with unit stride; the same values either way."""
    b = GraphBuilder("t")
    x = b.input("x", shape, "float32")
    model = tensorforge.compile(b.finish([b.add1("tile", [x], {"repeats": repeats})]), target="c -mcpu=x86-64-v3")
    # the flat loop works out each element's place in the input row with a remainder by its length
    assert (f"% {shape[-1]}" in model.source) != rows or repeats[-1] == 1
    xs = np.random.default_rng(6).standard_normal(shape).astype("float32")
    np.testing.assert_array_equal(model(xs)[0], np.tile(xs, repeats))


def test_elementwise_work_before_blocked_channels_runs_as_rows_and_8x8_blocks():
    """Element-wise work on NCHW data whose result goes to blocked channels (a group norm's scale,
    shift and SiLU before a conv) is computed as rows of 8 positions into a local buffer and
    written as 8x8 register-transposed blocks, not as a gather of B channel planes per vector.
    The same values."""
    rng = np.random.default_rng(9)
    c, hw = 32, 16
    b = GraphBuilder("rows")
    x = b.input("x", (1, c, hw, hw), "float32")
    y = b.add1("add", [b.add1("mul", [x, b.const(rng.standard_normal((1, c, 1, 1)).astype("float32"), "g")]),
                       b.const(rng.standard_normal((1, c, 1, 1)).astype("float32"), "beta")])
    y = b.add1("mul", [y, b.add1("sigmoid", [y])])
    w = b.const(rng.standard_normal((c, c, 3, 3)).astype("float32") * 0.1, "w")
    y = b.add1("conv2d", [y, w], {"strides": (1, 1), "padding": (1, 1, 1, 1), "dilations": (1, 1), "groups": 1})
    graph = b.finish([y])
    model = tensorforge.compile(graph, target="c -mcpu=x86-64-v4")
    kernel = model.source[model.source.index("nchw_to_nchwc("):]
    kernel = kernel[:kernel.index("\n}\n")]
    assert "tf_transpose8x8_f32(" in kernel and "gather" not in kernel
    xs = rng.standard_normal((1, c, hw, hw)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(graph, xs)[0], rtol=1e-3, atol=1e-3)


def _shuffle_graph(c: int, hw: int, transpose_plane: bool):
    """concat of two (1, c, hw, hw) inputs, then a channel shuffle (view, transpose, view), plus
    a per-channel bias; with transpose_plane the plane's two axes are swapped as well."""
    b = GraphBuilder("shuffle")
    x, y = b.input("x", (1, c, hw, hw), "float32"), b.input("y", (1, c, hw, hw), "float32")
    cat = b.add1("concat", [x, y], {"axis": 1})
    five = b.add1("reshape", [cat], {"shape": (1, 2, c, hw, hw)})
    moved = b.add1("transpose", [five], {"perm": (0, 2, 1, 4, 3) if transpose_plane else (0, 2, 1, 3, 4)})
    flat = b.add1("reshape", [moved], {"shape": (1, 2 * c, hw, hw)})
    bias = b.const(np.arange(2 * c, dtype="float32").reshape(1, 2 * c, 1, 1), "bias")
    return b.finish([b.add1("add", [flat, bias])])


@pytest.mark.parametrize("c,hw,transpose_plane,rows", [
    (6, 14, False, True),      # planes of 14 x 14 read as rows of 196: 12 vectors and a tail
    (6, 7, False, True),       # 7 x 7: rows of 49
    (6, 14, True, False),      # the plane transposed: no row of 196 in memory, the flat loop
    (6, 3, False, False),      # a plane shorter than two vectors: the flat loop
])
def test_short_planes_read_as_rows_run_as_rows(c, hw, transpose_plane, rows):
    """An injective stage whose last axis is short and no multiple of the vector width runs its
    last two axes as one row when every read walks memory as the plane does (a concat and
    channel shuffle): no division of a flat index per element.  The same values either way."""
    model = tensorforge.compile(_shuffle_graph(c, hw, transpose_plane), target="c -mcpu=x86-64-v4")
    assert (f"% {hw})" not in model.source and f"/ {hw})" not in model.source) == rows
    rng = np.random.default_rng(7)
    x, y = (rng.standard_normal((1, c, hw, hw)).astype("float32") for _ in range(2))
    cat = np.concatenate([x, y], 1).reshape(1, 2, c, hw, hw)
    cat = cat.transpose(0, 2, 1, 4, 3) if transpose_plane else cat.transpose(0, 2, 1, 3, 4)
    want = cat.reshape(1, 2 * c, hw, hw) + np.arange(2 * c, dtype="float32").reshape(1, 2 * c, 1, 1)
    np.testing.assert_array_equal(model(x, y)[0], want)


@pytest.mark.parametrize("c,bi,f,bo,k,stride,pad", [
    (32, 16, 32, 16, 3, (1, 1), (1, 1, 1, 1)),
    (16, 8, 48, 16, 3, (2, 1), (1, 0, 1, 2)),     # input block != output block, uneven padding
    (64, 32, 32, 32, 1, (2, 2), (0, 0, 0, 0)),    # 1x1 stride 2: no padding stage at all
])
def test_blocked_input_against_reference(c, bi, f, bo, k, stride, pad):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, c, 9, 11)).astype("float32")
    wp = pack_weight(rng.standard_normal((f, c, k, k)).astype("float32"), bo)
    attrs = {"strides": stride, "padding": pad, "data_layout": f"NCHW{bi}c"}
    (y,) = check_op("conv2d_nchwc", [to_nchwc(x, bi), wp], attrs, rtol=1e-4, atol=1e-4)
    (want,) = check_op("conv2d_nchwc", [x, wp], {"strides": stride, "padding": pad}, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_blocked_input_errors_name_the_layout():
    from tensorforge.ops.registry import OpError, TensorType, get
    conv = get("conv2d_nchwc")
    with pytest.raises(OpError, match="NCHW16c"):
        conv.infer_types([TensorType((1, 2, 5, 5, 8), "float32"), TensorType((1, 16, 3, 3, 16), "float32")],
                         {"data_layout": "NCHW16c"})
    with pytest.raises(OpError, match="data_layout"):
        conv.infer_types([TensorType((1, 16, 5, 5), "float32"), TensorType((1, 16, 3, 3, 16), "float32")],
                         {"data_layout": "NHWC"})


@pytest.mark.parametrize("c,hw,k,stride,residual", [
    (32, 14, 3, 1, True),       # conv + bias + residual + relu on blocked data, one kernel
    (64, 9, 1, 2, False),       # 1x1 stride 2 (a ResNet downsample), odd width
])
def test_compiled_blocked_conv_chain(c, hw, k, stride, residual):
    """conv -> bias -> relu -> conv (+ residual) -> relu: the second conv reads the first one's
    blocked output, and its epilogue runs in the blocked layout."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("chain")
    x = b.input("x", (1, c, hw, hw), "float32")

    def conv(h, cout, kk, s, name):
        w = b.const(rng.standard_normal((cout, h.shape[1], kk, kk)).astype("float32") * 0.1, name)
        h = b.add1("conv2d", [h, w], {"strides": (s, s), "padding": (kk // 2,) * 4, "dilations": (1, 1),
                                      "groups": 1})
        return b.add1("add", [h, b.const(rng.standard_normal((cout, 1, 1)).astype("float32"), name + "_b")])

    h = b.add1("relu", [conv(x, c, 3, 1, "w1")])
    y = conv(h, c, k, stride, "w2")
    if residual:
        y = b.add1("add", [y, h])
    g = b.finish([b.add1("relu", [y])])
    model = tensorforge.compile(g, opt_level=2)       # the direct conv (3 makes 3x3 ones Winograd)
    ops = [n.op for n in model.info["graph"].nodes]
    assert ops.count("nchwc_to_nchw") == 1 and "nchw_to_nchwc" not in ops
    assert any(n.attrs.get("data_layout", "NCHW") != "NCHW" for n in model.info["graph"].nodes)
    xs = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,f,groups,bi,bo,k,stride,dil", [
    (32, 64, 2, 0, 16, 3, (1, 1), (1, 1)),       # NCHW input, 2 groups of 16 -> 32
    (64, 64, 4, 16, 16, 3, (1, 1), (2, 2)),      # blocked input, 4 groups, dilated
    (48, 96, 3, 8, 16, 1, (2, 2), (1, 1)),       # 3 groups of 16 -> 32, input blocks of 8
])
def test_grouped_against_reference(c, f, groups, bi, bo, k, stride, dil):
    """Each output block reads only its group's input channels, NCHW or blocked."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, c, 9, 11)).astype("float32")
    w = rng.standard_normal((f, c // groups, k, k)).astype("float32")
    attrs = {"strides": stride, "padding": (k // 2 * dil[0],) * 4, "dilations": dil, "groups": groups}
    data = to_nchwc(x, bi) if bi else x
    if bi:
        attrs["data_layout"] = f"NCHW{bi}c"
    (y,) = check_op("conv2d_nchwc", [data, pack_weight(w, bo)], attrs, rtol=1e-4, atol=1e-4)
    from tensorforge.ops.nn_conv import conv_reference
    want = conv_reference(x, w, stride, attrs["padding"], dil, groups)
    np.testing.assert_allclose(to_nchw(y), want, rtol=1e-4, atol=1e-4)


def test_grouped_errors_name_the_groups():
    from tensorforge.ops.registry import OpError, TensorType, get
    conv = get("conv2d_nchwc")
    with pytest.raises(OpError, match="groups 3"):
        conv.infer_types([TensorType((1, 32, 5, 5), "float32"), TensorType((2, 16, 3, 3, 16), "float32")],
                         {"groups": 3})
    with pytest.raises(OpError, match="whole blocks"):        # input blocks of 16 straddle groups of 8
        conv.infer_types([TensorType((1, 2, 5, 5, 16), "float32"), TensorType((2, 8, 3, 3, 16), "float32")],
                         {"groups": 4, "data_layout": "NCHW16c"})


@pytest.mark.parametrize("c,f,groups,k,dil", [
    (64, 128, 2, 3, 1),       # two groups of 32 -> 64, after a conv with blocks of 32
    (64, 48, 2, 3, 2),        # 24 output channels per group: half-vector blocks, dilated
])
def test_compiled_grouped_conv_is_blocked(c, f, groups, k, dil):
    """A grouped conv takes the blocked template (not the generic NCHW conv) and, after a
    blocked conv, reads its blocked output."""
    rng = np.random.default_rng(7)
    b = GraphBuilder("grouped")
    x = b.input("x", (1, c, 12, 10), "float32")
    w1 = b.const(rng.standard_normal((c, c, 1, 1)).astype("float32") * 0.1, "w1")
    h = b.add1("relu", [b.add1("conv2d", [x, w1], {"strides": (1, 1), "padding": (0,) * 4, "dilations": (1, 1),
                                                   "groups": 1})])
    w2 = b.const(rng.standard_normal((f, c // groups, k, k)).astype("float32") * 0.1, "w2")
    y = b.add1("conv2d", [h, w2], {"strides": (1, 1), "padding": (k // 2 * dil,) * 4, "dilations": (dil, dil),
                                   "groups": groups})
    g = b.finish([b.add1("relu", [y])])
    model = tensorforge.compile(g, opt_level=3)
    nodes = model.info["graph"].nodes
    # (a 3x3 one whose groups are whole blocks becomes a grouped Winograd conv, blocked too)
    grouped = [n for n in nodes if n.op in ("conv2d_nchwc", "conv2d_winograd_nchwc") and n.attrs.get("groups") == groups]
    assert len(grouped) == 1 and not any(n.op == "conv2d" for n in nodes), [n.op for n in nodes]
    assert grouped[0].attrs.get("data_layout", "NCHW") != "NCHW"
    xs = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,f,k,stride,dil", [
    (32, 4, (64, 1), (4, 1), (1, 1)),     # a tall kernel with few filters (a pitch estimator's kind)
    (12, 7, (3, 3), (1, 1), (2, 2)),      # 7 filters: padded to a half-vector block
    (5, 33, (5, 5), (1, 1), (1, 1)),      # 33 filters: padded to 48, three blocks of 16
    (8, 1, (7, 1), (1, 1), (1, 1)),       # one filter
])
def test_few_filters_are_padded_to_a_block(c, f, k, stride, dil, monkeypatch):
    """A conv whose filters do not fill half a vector runs blocked on zero-padded filters, the
    padding sliced off (no im2col copy of overlapping windows), and equals the reference.  (At
    stride 1, AVX-512 runs up to 7 filters as tap planes instead, AVX2 up to 3: conv_as_tap_planes,
    turned off here so that this path is tested on every host.)"""
    monkeypatch.setattr(tap_planes, "TAP_LANE_SHARE", float("inf"))
    rng = np.random.default_rng(8)
    b = GraphBuilder("few")
    x = b.input("x", (1, c, 40, 9), "float32")
    w = b.const(rng.standard_normal((f, c, *k)).astype("float32") * 0.1, "w")
    pad = (k[0] // 2 * dil[0], k[1] // 2 * dil[1]) * 2
    y = b.add1("conv2d", [x, w], {"strides": stride, "padding": pad, "dilations": dil, "groups": 1})
    y = b.add1("add", [y, b.const(rng.standard_normal((f, 1, 1)).astype("float32"), "bias")])
    g = b.finish([b.add1("relu", [y])])
    model = tensorforge.compile(g, opt_level=2)
    ops = [n.op for n in model.info["graph"].nodes]
    assert "conv2d_nchwc" in ops and "im2col" not in ops and "conv2d" not in ops, ops
    # with several blocks the tile goes through the bias, the activation and the cut to NCHW
    # from registers: no blocked output in memory read back by a pass of its own (a cut inside
    # the only block keeps that pass: the tile stays a whole vector of filters)
    (conv,) = [n for n in model.info["graph"].nodes if n.op == "conv2d_nchwc"]
    assert ("tf_alloc(sizeof(float), 5," not in model.source) == (conv.outputs[0].shape[1] > 1)
    assert not re.search(r"\bconv2d_nchwc\w*\[[^\]]*\] = 0\.0f;", model.source)   # no scalar accumulators
    xs = rng.standard_normal(x.shape).astype("float32")
    got = model(xs)[0]
    assert got.shape == run_reference(g, xs)[0].shape
    np.testing.assert_allclose(got, run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


def test_one_filter_over_long_rows_splits_its_rows_over_the_threads():
    """A 16 -> 1 channel conv on one image runs on the generic NCHW template (alter_layout's
    rows_conv); its single (image, filter) plane gives the thread pool one iteration, so the
    tiles of rows join the parallel loop (cpu_conv_rows: 4 rows of 40 positions per tile, 24
    rows in 6 tiles), after the padded input's rows (the pad stage, on the pool as well)."""
    rng = np.random.default_rng(11)
    b = GraphBuilder("rows")
    x = b.input("x", (1, 16, 24, 40), "float32")
    w = b.const(rng.standard_normal((1, 16, 3, 3)).astype("float32"), "w")
    g = b.finish([b.add1("relu", [b.add1("conv2d", [x, w], {"strides": (1, 1), "padding": (1,) * 4,
                                                             "dilations": (1, 1), "groups": 1})])])
    model = tensorforge.compile(g, target="c")
    assert [n.op for n in model.info["graph"].nodes] == ["conv2d", "relu"]
    (func,) = [str(f) for f in model.info["funcs"]]
    parallel = [line.strip() for line in func.splitlines() if line.strip().endswith("# parallel")]
    assert parallel == ["for i0.i1.fused.i2.fused in range(416):  # parallel",
                        "for i0.i1.fused.i2.outer.fused in range(6):  # parallel"], parallel
    assert "conv2d = allocate([1, 1, 4, 40], float32, 'local')" in func
    xs = rng.standard_normal((1, 16, 24, 40)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


def test_pointwise_few_filters_stay_a_gemm():
    """A 1x1 conv with 7 filters copies nothing in im2col: it stays one GEMM."""
    rng = np.random.default_rng(9)
    b = GraphBuilder("pointwise")
    x = b.input("x", (1, 16, 10, 10), "float32")
    w = b.const(rng.standard_normal((7, 16, 1, 1)).astype("float32"), "w")
    g = b.finish([b.add1("conv2d", [x, w], {"strides": (1, 1), "padding": (0,) * 4, "dilations": (1, 1),
                                            "groups": 1})])
    model = tensorforge.compile(g, opt_level=2)
    assert "conv2d_nchwc" not in [n.op for n in model.info["graph"].nodes]
    xs = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,c,f,groups,k,stride,dil", [
    ("conv2d", 34, 66, 2, (9, 1), (2, 1), (1, 2)),     # 33 filters per group: padded to 48 in each
    ("conv2d", 12, 28, 4, (3, 7), (1, 2), (1, 2)),     # 7 per group: padded to 8 in each of 4 groups
    ("conv1d", 24, 32, 4, (16,), (2,), (1,)),          # a grouped conv1d: blocked as height 1
    ("conv1d", 12, 7, 1, (64,), (1,), (2,)),           # a tall conv1d with 7 filters
])
def test_grouped_and_1d_convs_run_blocked(op, c, f, groups, k, stride, dil, monkeypatch):
    """Filters padded per group (the padding sliced off per group) and conv1d as a conv2d of
    height 1: blocked, equal to the reference (conv_as_tap_planes off, as above)."""
    monkeypatch.setattr(tap_planes, "TAP_LANE_SHARE", float("inf"))
    rng = np.random.default_rng(10)
    b = GraphBuilder("g")
    size = (30, 11) if op == "conv2d" else (90,)
    x = b.input("x", (2, c, *size), "float32")
    w = b.const(rng.standard_normal((f, c // groups, *k)).astype("float32") * 0.1, "w")
    pad = tuple(kk // 2 * d for kk, d in zip(k, dil)) * 2
    y = b.add1(op, [x, w], {"strides": stride, "padding": pad, "dilations": dil, "groups": groups})
    g = b.finish([b.add1("relu", [y])])
    model = tensorforge.compile(g, opt_level=2)
    ops = [n.op for n in model.info["graph"].nodes]
    assert "conv2d_nchwc" in ops and op not in ops and "im2col" not in ops, ops
    xs = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


# -- output blocks narrower than the weight's (graph/passes/alter_layout_half_blocks.py) ----------

def _half_block_weight(rng, f: int, c: int, block: int) -> np.ndarray:
    w = rng.standard_normal((f, c, 1, 1)).astype("float32") * 0.1
    padded = np.concatenate([w, np.zeros((-f % block, c, 1, 1), "float32")])
    return w, pack_weight(padded, block)


@pytest.mark.parametrize("c,bi,f,hw,images,block", [
    (144, 16, 24, (14, 14), 1, 16),     # 3 blocks of 8 from 2 of 16 (a tail)
    (144, 16, 24, (14, 14), 1, 32),     # MobileNetV2's projection: 3 blocks of 8 from 1 of 32
    (32, 8, 40, (5, 9), 2, 16),         # 5 blocks of 8, two images, positions that no tile divides
    (16, 16, 32, (7, 7), 1, 16),        # whole pairs of blocks
])
def test_half_blocks_from_whole_vectors_against_reference(c, bi, f, hw, images, block):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((images, c, *hw)).astype("float32")
    w, wp = _half_block_weight(rng, f, c, block)
    attrs = {"data_layout": f"NCHW{bi}c", "out_block": 8, "filters": f}
    (y,) = check_op("conv2d_nchwc", [to_nchwc(x, bi), wp], attrs, rtol=1e-4, atol=1e-4)
    (want,) = check_op("conv2d_nchwc", [to_nchwc(x, bi), pack_weight(w, 8)], {"data_layout": f"NCHW{bi}c"},
                       rtol=1e-4, atol=1e-4)
    assert y.shape == (images, f // 8, *hw, 8)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)


def test_half_block_errors_name_what_does_not_fit():
    from tensorforge.ops.registry import OpError, TensorType, get
    conv = get("conv2d_nchwc")
    x = TensorType((1, 1, 5, 5, 16), "float32")
    with pytest.raises(OpError, match="filters 40 do not fit"):
        conv.infer_types([x, TensorType((2, 16, 1, 1, 16), "float32")],
                         {"data_layout": "NCHW16c", "out_block": 8, "filters": 40})
    with pytest.raises(OpError, match="out_block 6"):
        conv.infer_types([x, TensorType((2, 16, 1, 1, 16), "float32")],
                         {"data_layout": "NCHW16c", "out_block": 6, "filters": 24})
    with pytest.raises(OpError, match="1x1, stride-1"):
        conv.infer_types([x, TensorType((2, 16, 3, 3, 16), "float32")],
                         {"data_layout": "NCHW16c", "padding": (1, 1, 1, 1), "out_block": 8, "filters": 24})


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("f,residual,block", [(24, True, 32), (24, False, 16), (40, False, 16)])
def test_compiled_half_blocks_store_each_piece_of_the_tile(f, residual, block, threads):
    """The template's tile computes whole blocks and stores them as the output's narrower ones,
    with the bias and a residual add fused (the last block holds fewer blocks of 8)."""
    from tensorforge.runtime.module import get_num_threads, set_num_threads
    rng = np.random.default_rng(12)
    _, wp = _half_block_weight(rng, f, 32, block)
    b = GraphBuilder("half")
    x = b.input("x", (1, 2, 10, 10, 16), "float32")
    y = b.add1("conv2d_nchwc", [x, b.const(wp, "w")],
               {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1), "data_layout": "NCHW16c",
                "out_block": 8, "filters": f})
    y = b.add1("add", [y, b.const(rng.standard_normal((1, f // 8, 1, 1, 8)).astype("float32"), "bias")])
    ins = [x]
    if residual:
        r = b.input("r", (1, f // 8, 10, 10, 8), "float32")
        ins.append(r)
        y = b.add1("add", [y, r])
    g = b.finish([y])
    model = tensorforge.compile(g, target="c", opt_level=0)
    arrays = [rng.standard_normal(v.shape).astype("float32") for v in ins]
    before = get_num_threads()
    set_num_threads(threads)
    try:
        got = model(*arrays)[0]
    finally:
        set_num_threads(before)
    np.testing.assert_allclose(got, run_reference(g, *arrays)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op,c,f,groups,size,blocked_input", [
    ("conv2d", 12, 12, 2, (30, 11), False),     # 6 filters per group
    ("conv1d", 64, 128, 4, (90,), False),       # a grouped pointwise conv1d (the generic conv before)
    ("conv2d", 32, 64, 2, (9, 10), True),       # fed by a blocked conv: stays blocked
])
def test_grouped_pointwise_convs_between_nchw_values_are_one_product_per_group(op, c, f, groups, size, blocked_input):
    rng = np.random.default_rng(13)
    b = GraphBuilder("g")
    x = b.input("x", (2, c, *size), "float32")
    h = x
    conv = {"strides": (1,) * len(size), "padding": (0,) * 2 * len(size), "dilations": (1,) * len(size)}
    if blocked_input:
        w0 = b.const(rng.standard_normal((c, c, 3, 3)).astype("float32") * 0.1, "w0")
        h = b.add1("relu", [b.add1("conv2d", [x, w0], {**conv, "padding": (1, 1, 1, 1), "groups": 1})])
    w = b.const(rng.standard_normal((f, c // groups, *(1,) * len(size))).astype("float32") * 0.1, "w")
    g = b.finish([b.add1("relu", [b.add1(op, [h, w], {**conv, "groups": groups})])])
    model = tensorforge.compile(g, opt_level=2)
    ops = [n.op for n in model.info["graph"].nodes]
    if blocked_input:
        assert ops.count("conv2d_nchwc") == 2 and "matmul" not in ops, ops
    else:
        gemm = next(n for n in model.info["graph"].nodes if n.op == "matmul")
        assert gemm.inputs[0].shape == (groups, f // groups, c // groups) and op not in ops, ops
    xs = rng.standard_normal(x.shape).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c, f, h, w, k, stride, dilation, groups, epilogue", [
    (17, 1, 61, 56, (9, 1), 1, 1, 1, True),     # a prime height (61): full tiles and a shorter last one
    (5, 2, 20, 37, (3, 3), 1, 1, 1, False),     # rows of 2 vectors and a remainder, no epilogue
    (6, 3, 15, 90, (3, 5), 2, 1, 1, True),      # stride 2
    (8, 4, 18, 40, (3, 3), 1, 2, 2, True),      # dilation 2, 2 groups of 2 filters
])
def test_few_filters_run_in_tiles_of_rows(c, f, h, w, k, stride, dilation, groups, epilogue):
    """Convs that stay in NCHW with few filters (rows_conv) run in register tiles of several
    output rows (ops/schedules/cpu_conv_rows.py): the same values as the reference."""
    rng = np.random.default_rng(h * w + c)
    b = GraphBuilder("conv_rows")
    x = b.input("x", (1, c, h, w), "float32")
    wt = b.const((rng.standard_normal((f, c // groups, *k)) / np.sqrt(c * k[0] * k[1])).astype("float32"), "w")
    pads = (k[0] // 2 * dilation, k[1] // 2 * dilation) * 2
    y = b.add1("conv2d", [x, wt], {"strides": (stride, stride), "padding": pads, "dilations": (dilation, dilation),
                                   "groups": groups})
    if epilogue:
        y = b.add1("relu", [b.add1("add", [y, b.const(rng.standard_normal((f, 1, 1)).astype("float32"), "b")])])
    g = b.finish([y])
    model = tensorforge.compile(g)
    funcs = "\n".join(str(fn) for fn in model.info["funcs"])
    tiles = re.findall(r"conv2d(?:\.local)? = allocate\(\[1, 1, (\d+), \d+\], float32, 'local'\)", funcs)
    assert tiles and int(tiles[0]) > 1, funcs[:400]
    xs = rng.standard_normal((1, c, h, w)).astype("float32")
    np.testing.assert_allclose(model(xs)[0], run_reference(g, xs)[0], rtol=1e-4, atol=1e-4)
