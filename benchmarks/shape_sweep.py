"""Default schedules on shapes nobody tuned for: random single-op models (Conv with odd channel
counts, tall 1-D kernels, tiny images, groups, dilations, strides; ConvTranspose; MatMul with
batch axes and odd sizes, with a constant weight or two run-time operands as in attention)
against ONNX Runtime, interleaved, at one thread.  Prints each
case's ratio tensorforge / ONNX Runtime, worst first, and their geometric mean: a default that only
suits the paper's shapes shows up at the top.

    python benchmarks/shape_sweep.py [--cases 40] [--seed 0] [--repeat 15] [--threads 1]
    python benchmarks/shape_sweep.py --large           # fixed convs on large images instead
    python benchmarks/shape_sweep.py --upsampling      # fixed up-sampling layers instead

--large runs a fixed list of convs on large images, NCHW in and out, where the caches decide:
Winograd's transformed input outgrowing L2, channel planes of a multiple of 4 KiB (64x64,
224x224: their lines share L1 sets), stems and 1-channel inputs writing NCHW.

--upsampling runs the layers decoders and segmentation heads grow images with: transposed convs
(a U-Net's 2x2 stride 2, FCN's 4x4 stride 4, DCGAN's 4x4 stride 2 with and without padding),
Resize (nearest, bilinear half-pixel and align-corners, bicubic) and DepthToSpace (a pixel
shuffle), each followed by a ReLU.

Each model's output is checked against ONNX Runtime (rtol/atol 1e-3) before it is timed.
"""
from __future__ import annotations

import argparse
import math

import numpy as np


def _conv_case(rng, transpose: bool = False):
    """(description, ONNX model, feeds) of a random Conv or ConvTranspose."""
    rank = int(rng.choice([1, 2, 2, 2]))
    groups = int(rng.choice([1, 1, 1, 2, 4])) if not transpose else 1
    cin = groups * int(rng.choice([1, 3, 5, 8, 12, 17, 24, 32, 48, 64, 96]))
    cout = groups * int(rng.choice([1, 4, 7, 16, 24, 33, 64, 100, 128]))
    if rank == 1:
        kernel = (int(rng.choice([1, 3, 5, 16, 64, 256])),)
        size = (int(rng.choice([64, 250, 1024, 4000])),)
    else:
        kh = int(rng.choice([1, 1, 3, 3, 5, 7, 64]))
        kernel = (kh, 1 if kh == 64 else int(rng.choice([1, 3, 3, 5, 7])))
        size = (int(rng.choice([4, 7, 14, 28, 56, 96, 300])) if kh != 64 else 512, int(rng.choice([1, 7, 14, 28, 56])))
    stride = tuple(int(rng.choice([1, 1, 2, 4])) if k > 1 or rng.random() < 0.3 else 1 for k in kernel)
    if any(s > 1 for s in stride) and min(size) < 8:
        stride = (1,) * rank
    dilation = tuple(int(rng.choice([1, 1, 1, 2])) if not transpose else 1 for _ in kernel)
    pads = [k // 2 * d for k, d in zip(kernel, dilation)] * 2
    span = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    if any(s + 2 * (p) < sp for s, p, sp in zip(size, pads, span)):
        size = tuple(max(s, sp) for s, sp in zip(size, span))
    x = rng.standard_normal((1, cin, *size)).astype(np.float32)
    wshape = (cin, cout // groups, *kernel) if transpose else (cout, cin // groups, *kernel)
    w = (rng.standard_normal(wshape) / math.sqrt(cin * np.prod(kernel))).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    op = "ConvTranspose" if transpose else "Conv"
    text = (f"{op} {cin}->{cout} k{'x'.join(map(str, kernel))} s{'x'.join(map(str, stride))} "
            f"d{'x'.join(map(str, dilation))} g{groups} on {'x'.join(map(str, size))}")
    return text, _conv_relu(op, x, w, b, strides=list(stride), pads=pads, dilations=list(dilation),
                            group=groups), {"x": x}


def _conv_relu(op: str, x, w, b, **attrs):
    """The ONNX model relu(op(x, w, b)) with the weights as initializers."""
    from onnx import TensorProto, helper, numpy_helper
    nodes = [helper.make_node(op, ["x", "w", "b"], ["y"], **attrs), helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _matmul_case(rng):
    from onnx import TensorProto, helper, numpy_helper
    batch = [int(rng.choice([1, 2, 4, 12]))] if rng.random() < 0.4 else []
    m = int(rng.choice([1, 3, 17, 35, 64, 128, 200, 512]))
    k = int(rng.choice([7, 33, 64, 100, 256, 650, 768, 1024]))
    n = int(rng.choice([1, 5, 18, 64, 100, 255, 512, 1000, 3072]))
    x = rng.standard_normal((*batch, m, k)).astype(np.float32)
    w = (rng.standard_normal((k, n)) / math.sqrt(k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Add", ["y", "b"], ["z"])]
    g = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    text = f"MatMul {'x'.join(map(str, x.shape))} @ {k}x{n} + bias"
    return text, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"x": x}


def _runtime_matmul_case(rng):
    """A product of two run-time operands: attention's scores (Q K^T) and context (P V) with odd
    sequence lengths, batch axes of heads."""
    from onnx import TensorProto, helper
    heads = [int(rng.choice([1, 4, 12]))] if rng.random() < 0.7 else []
    m = int(rng.choice([1, 7, 50, 77, 128, 197]))
    k = int(rng.choice([32, 64, 77, 197]))
    n = int(rng.choice([7, 50, 64, 77, 196, 197]))
    a = rng.standard_normal((*heads, m, k)).astype(np.float32)
    b = rng.standard_normal((*heads, k, n)).astype(np.float32)
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["z"])], "case",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, a.shape),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, b.shape)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    text = f"MatMul {'x'.join(map(str, a.shape))} @ {'x'.join(map(str, b.shape))} (run-time operands)"
    return text, helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"a": a, "b": b}


def _fixed_conv(cin: int, cout: int, k: int, stride: int, hw: int, seed: int = 0):
    """(description, ONNX model, feeds) of a square conv + relu, padding k // 2."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, cin, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, k, k)) / math.sqrt(cin * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    model = _conv_relu("Conv", x, w, b, strides=[stride] * 2, pads=[k // 2] * 4)
    return f"Conv {cin}->{cout} k{k}x{k} s{stride} on {hw}x{hw}", model, {"x": x}


# (input channels, output channels, kernel, stride, image size)
LARGE = [(64, 64, 3, 1, 224), (64, 64, 3, 1, 225), (32, 32, 3, 1, 320), (16, 16, 3, 1, 512),
         (128, 128, 3, 1, 112), (64, 32, 3, 1, 256), (3, 64, 3, 1, 224), (3, 64, 3, 1, 225),
         (3, 32, 3, 2, 224), (1, 32, 3, 1, 128), (1, 96, 3, 1, 64), (32, 32, 3, 2, 128),
         (64, 64, 1, 1, 256), (32, 3, 3, 1, 256)]


def large_cases() -> list:
    return [_fixed_conv(*spec) for spec in LARGE]


def _fixed_conv_transpose(cin: int, cout: int, k: int, stride: int, pad: int, hw: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, cin, hw, hw)).astype(np.float32)
    w = (rng.standard_normal((cin, cout, k, k)) / math.sqrt(cin * k * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    model = _conv_relu("ConvTranspose", x, w, b, strides=[stride] * 2, pads=[pad] * 4)
    return f"ConvTranspose {cin}->{cout} k{k}x{k} s{stride} p{pad} on {hw}x{hw}", model, {"x": x}


def _fixed_resize(channels: int, hw: int, scale: int, mode: str, ctm: str = "half_pixel", seed: int = 0):
    from onnx import TensorProto, helper, numpy_helper
    x = np.random.default_rng(seed).standard_normal((1, channels, hw, hw)).astype(np.float32)
    scales = numpy_helper.from_array(np.array([1, 1, scale, scale], np.float32), "scales")
    nodes = [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode=mode, coordinate_transformation_mode=ctm),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [scales])
    return (f"Resize {mode} {ctm} x{scale} of {channels}x{hw}x{hw}",
            helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"x": x})


def _fixed_depth_to_space(channels: int, hw: int, block: int, mode: str = "CRD", seed: int = 0):
    from onnx import TensorProto, helper
    x = np.random.default_rng(seed).standard_normal((1, channels * block * block, hw, hw)).astype(np.float32)
    nodes = [helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=block, mode=mode),
             helper.make_node("Relu", ["y"], ["z"])]
    g = helper.make_graph(nodes, "case", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    return (f"DepthToSpace {mode} block {block} to {channels}x{hw * block}x{hw * block}",
            helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), {"x": x})


def upsampling_cases() -> list:
    return [_fixed_conv_transpose(128, 64, 2, 2, 0, 64), _fixed_conv_transpose(256, 128, 2, 2, 0, 32),
            _fixed_conv_transpose(64, 32, 2, 2, 0, 128), _fixed_conv_transpose(64, 21, 4, 4, 0, 32),
            _fixed_conv_transpose(256, 128, 4, 2, 1, 16), _fixed_conv_transpose(64, 32, 4, 2, 0, 32),
            _fixed_resize(64, 64, 2, "nearest"), _fixed_resize(256, 32, 2, "nearest"),
            _fixed_resize(64, 64, 2, "linear"), _fixed_resize(64, 64, 2, "linear", "align_corners"),
            _fixed_resize(21, 64, 4, "linear"), _fixed_resize(32, 64, 2, "cubic"),
            _fixed_depth_to_space(16, 64, 2), _fixed_depth_to_space(3, 128, 3, "DCR")]


def cases(count: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        r = rng.random()
        if r < 0.25:
            out.append(_matmul_case(rng))
        elif r < 0.35:
            out.append(_runtime_matmul_case(rng))
        else:
            out.append(_conv_case(rng, transpose=r > 0.87))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--large", action="store_true", help="the fixed convs on large images (LARGE) instead")
    ap.add_argument("--upsampling", action="store_true", help="the fixed up-sampling layers instead")
    args = ap.parse_args(argv)
    import _sweep
    chosen = large_cases() if args.large else upsampling_cases() if args.upsampling else cases(args.cases, args.seed)
    _sweep.report(_sweep.run(chosen, args.threads, max(1, args.repeat // 3)), args.threads, 1.2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
