"""Single ONNX operators as models use them, other than convolutions and products (pooling,
reductions, softmax, normalizations, layout changes, padding, gathers, element-wise math, scans,
top-k, einsum, resize) against ONNX Runtime, interleaved, at one thread: an op whose default
schedule falls off a cliff (a scalar reduction, an O(n^2) scan, a gather per element) shows up at
the top of the list, worst first.

    python benchmarks/op_sweep.py [--only SUBSTRING] [--repeat 7] [--threads 1]

Each case is a small ONNX graph (the op, sometimes with the ops a model puts around it: a GELU
written with Erf, a Greater feeding Where) on shapes of real layers; every output is checked
against ONNX Runtime (rtol/atol 1e-3) before it is timed.  Prints each case's ratio
tensorforge / ONNX Runtime, then the worst first and their geometric mean.
"""

from __future__ import annotations

import argparse

import numpy as np


def cases() -> list:
    """(name, ONNX model, feeds) of every case."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    N = helper.make_node

    def case(name, nodes, inputs, inits=(), outs=("z",)):
        kinds = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("int64"): TensorProto.INT64}
        g = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info(k, kinds[v.dtype], v.shape) for k, v in inputs.items()],
            [onnx.ValueInfoProto(name=o) for o in outs],
            list(inits),
        )
        return name, helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), inputs

    def x(*s):
        return rng.standard_normal(s).astype(np.float32)

    def c(name, arr):
        return numpy_helper.from_array(np.asarray(arr), name)

    C: list = []
    X4, X4s, X3, X2 = x(1, 64, 112, 112), x(1, 256, 28, 28), x(8, 128, 768), x(512, 1024)
    C.append(
        case(
            "MaxPool 3x3 s2 64x112",
            [N("MaxPool", ["x"], ["z"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])],
            {"x": X4},
        )
    )
    C.append(
        case(
            "AveragePool 3x3 s1 256x28",
            [N("AveragePool", ["x"], ["z"], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])],
            {"x": X4s},
        )
    )
    C.append(
        case(
            "AveragePool 2x2 s2 64x112",
            [N("AveragePool", ["x"], ["z"], kernel_shape=[2, 2], strides=[2, 2])],
            {"x": X4},
        )
    )
    C.append(case("GlobalAveragePool 64x112", [N("GlobalAveragePool", ["x"], ["z"])], {"x": X4}))
    C.append(
        case(
            "ReduceMean axes 2,3 keep",
            [N("ReduceMean", ["x", "ax"], ["z"], keepdims=1)],
            {"x": X4},
            [c("ax", np.array([2, 3], np.int64))],
        )
    )
    C.append(
        case(
            "ReduceMean axis 1 (channels)",
            [N("ReduceMean", ["x", "ax"], ["z"], keepdims=1)],
            {"x": X4},
            [c("ax", np.array([1], np.int64))],
        )
    )
    C.append(
        case(
            "ReduceSum axis 0 of 512x1024",
            [N("ReduceSum", ["x", "ax"], ["z"], keepdims=0)],
            {"x": X2},
            [c("ax", np.array([0], np.int64))],
        )
    )
    C.append(
        case(
            "ReduceMax last 8x128x768",
            [N("ReduceMax", ["x", "ax"], ["z"], keepdims=0)],
            {"x": X3},
            [c("ax", np.array([2], np.int64))],
        )
    )
    C.append(case("Softmax last 8x128x768", [N("Softmax", ["x"], ["z"], axis=-1)], {"x": X3}))
    C.append(case("Softmax axis 1 8x128x768", [N("Softmax", ["x"], ["z"], axis=1)], {"x": X3}))
    C.append(case("LogSoftmax last 512x1024", [N("LogSoftmax", ["x"], ["z"], axis=-1)], {"x": X2}))
    C.append(
        case(
            "LayerNorm 8x128x768",
            [N("LayerNormalization", ["x", "g", "b"], ["z"], axis=-1)],
            {"x": X3},
            [c("g", x(768)), c("b", x(768))],
        )
    )
    C.append(
        case(
            "InstanceNorm 64x112",
            [N("InstanceNormalization", ["x", "g", "b"], ["z"])],
            {"x": X4},
            [c("g", x(64)), c("b", x(64))],
        )
    )
    C.append(
        case(
            "GroupNorm 32 groups 256x28",
            [N("GroupNormalization", ["x", "g", "b"], ["z"], num_groups=32)],
            {"x": X4s},
            [c("g", x(32)), c("b", x(32))],
        )
    )
    C.append(
        case("Transpose 0213 8x128x12x64", [N("Transpose", ["x"], ["z"], perm=[0, 2, 1, 3])], {"x": x(8, 128, 12, 64)})
    )
    C.append(case("Transpose 0231 NCHW->NHWC 64x112", [N("Transpose", ["x"], ["z"], perm=[0, 2, 3, 1])], {"x": X4}))
    C.append(case("Transpose 10 of 512x1024", [N("Transpose", ["x"], ["z"], perm=[1, 0])], {"x": X2}))
    C.append(
        case("Concat axis1 2x 64x112", [N("Concat", ["x", "y"], ["z"], axis=1)], {"x": X4, "y": x(1, 64, 112, 112)})
    )
    C.append(
        case(
            "Slice channels 64x112 [16:48]",
            [N("Slice", ["x", "s", "e", "a"], ["z"])],
            {"x": X4},
            [c("s", np.array([16], np.int64)), c("e", np.array([48], np.int64)), c("a", np.array([1], np.int64))],
        )
    )
    C.append(
        case(
            "Slice stride 2 hw",
            [N("Slice", ["x", "s", "e", "a", "st"], ["z"])],
            {"x": X4},
            [
                c("s", np.array([0, 0], np.int64)),
                c("e", np.array([112, 112], np.int64)),
                c("a", np.array([2, 3], np.int64)),
                c("st", np.array([2, 2], np.int64)),
            ],
        )
    )
    C.append(
        case(
            "Pad reflect 64x112 +2",
            [N("Pad", ["x", "p"], ["z"], mode="reflect")],
            {"x": X4},
            [c("p", np.array([0, 0, 2, 2, 0, 0, 2, 2], np.int64))],
        )
    )
    C.append(
        case(
            "Pad edge 64x112 +1",
            [N("Pad", ["x", "p"], ["z"], mode="edge")],
            {"x": X4},
            [c("p", np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))],
        )
    )
    C.append(
        case(
            "Gather rows 30000x256 by 4096",
            [N("Gather", ["t", "i"], ["z"], axis=0)],
            {"i": rng.integers(0, 30000, (8, 512)).astype(np.int64)},
            [c("t", x(30000, 256))],
        )
    )
    C.append(
        case(
            "Gather axis1 idx",
            [N("Gather", ["x", "i"], ["z"], axis=1)],
            {"x": X4},
            [c("i", np.array([3, 1, 7, 9, 30, 2], np.int64))],
        )
    )
    C.append(
        case(
            "Where 8x128x768",
            [N("Greater", ["x", "y"], ["m"]), N("Where", ["m", "x", "y"], ["z"])],
            {"x": X3, "y": x(8, 128, 768)},
        )
    )
    C.append(case("Add bcast channel 64x112", [N("Add", ["x", "b"], ["z"])], {"x": X4}, [c("b", x(1, 64, 1, 1))]))
    C.append(case("Mul bcast row 512x1024 x 512x1", [N("Mul", ["x", "y"], ["z"])], {"x": X2, "y": x(512, 1)}))
    C.append(
        case(
            "Erf-GELU 8x128x768",
            [
                N("Div", ["x", "s"], ["d"]),
                N("Erf", ["d"], ["e"]),
                N("Add", ["e", "one"], ["f"]),
                N("Mul", ["x", "f"], ["g"]),
                N("Mul", ["g", "h"], ["z"]),
            ],
            {"x": X3},
            [c("s", np.float32(1.4142135)), c("one", np.float32(1.0)), c("h", np.float32(0.5))],
        )
    )
    C.append(case("Tanh 8x128x768", [N("Tanh", ["x"], ["z"])], {"x": X3}))
    C.append(case("Sigmoid 8x128x768", [N("Sigmoid", ["x"], ["z"])], {"x": X3}))
    C.append(case("HardSwish 64x112", [N("HardSwish", ["x"], ["z"])], {"x": X4}))
    C.append(case("Exp 8x128x768", [N("Exp", ["x"], ["z"])], {"x": X3}))
    C.append(case("Pow x^2 8x128x768", [N("Pow", ["x", "p"], ["z"])], {"x": X3}, [c("p", np.float32(2.0))]))
    C.append(case("Sqrt abs 8x128x768", [N("Abs", ["x"], ["a"]), N("Sqrt", ["a"], ["z"])], {"x": X3}))
    C.append(
        case("CumSum axis last 512x1024", [N("CumSum", ["x", "a"], ["z"])], {"x": X2}, [c("a", np.array(1, np.int64))])
    )
    C.append(
        case(
            "TopK 5 last 512x1024",
            [N("TopK", ["x", "k"], ["z", "zi"], axis=-1)],
            {"x": X2},
            [c("k", np.array([5], np.int64))],
            outs=("z", "zi"),
        )
    )
    C.append(case("ArgMax last 512x1024", [N("ArgMax", ["x"], ["z"], axis=-1)], {"x": X2}))
    C.append(
        case("Tile 2x2 256x28", [N("Tile", ["x", "r"], ["z"])], {"x": X4s}, [c("r", np.array([1, 1, 2, 2], np.int64))])
    )
    C.append(
        case(
            "Expand 1x768 -> 1024x768",
            [N("Expand", ["x", "s"], ["z"])],
            {"x": x(1, 768)},
            [c("s", np.array([1024, 768], np.int64))],
        )
    )
    C.append(
        case(
            "Einsum bhqd,bhkd->bhqk",
            [N("Einsum", ["a", "b"], ["z"], equation="bhqd,bhkd->bhqk")],
            {"a": x(1, 12, 128, 64), "b": x(1, 12, 128, 64)},
        )
    )
    C.append(
        case(
            "BatchNorm 64x112",
            [N("BatchNormalization", ["x", "g", "b", "m", "v"], ["z"])],
            {"x": X4},
            [c("g", x(64)), c("b", x(64)), c("m", x(64)), c("v", np.abs(x(64)) + 0.5)],
        )
    )
    C.append(
        case(
            "Split 3 axis last 8x128x2304",
            [N("Split", ["x"], ["z", "z1", "z2"], axis=-1, num_outputs=3)],
            {"x": x(8, 128, 2304)},
            outs=("z", "z1", "z2"),
        )
    )
    C.append(case("LpNormalization 512x1024", [N("LpNormalization", ["x"], ["z"], axis=-1, p=2)], {"x": X2}))
    C.append(
        case(
            "MatMul 3D bcast 8x128x768 @ 768x768",
            [N("MatMul", ["x", "w"], ["z"])],
            {"x": X3},
            [c("w", x(768, 768) * 0.03)],
        )
    )
    C.append(
        case(
            "Conv depthwise 5x5 s1 256x28",
            [N("Conv", ["x", "w"], ["z"], group=256, pads=[2, 2, 2, 2])],
            {"x": X4s},
            [c("w", x(256, 1, 5, 5))],
        )
    )
    C.append(
        case(
            "Conv 7x7 s2 3->64 224",
            [N("Conv", ["x", "w"], ["z"], strides=[2, 2], pads=[3, 3, 3, 3])],
            {"x": x(1, 3, 224, 224)},
            [c("w", x(64, 3, 7, 7) * 0.1)],
        )
    )
    C.append(
        case(
            "Conv1d k3 256->256 L=1000",
            [N("Conv", ["x", "w"], ["z"], pads=[1, 1])],
            {"x": x(1, 256, 1000)},
            [c("w", x(256, 256, 3) * 0.03)],
        )
    )
    # products and convolutions whose second operand is a run-time input (Gemm's transB on an
    # input as attention writes Q K^T, dynamic filters)
    C.append(
        case(
            "Gemm transB run-time 512x768 x 1024x768",
            [N("Gemm", ["a", "b"], ["z"], transB=1)],
            {"a": x(512, 768), "b": x(1024, 768)},
        )
    )
    C.append(
        case(
            "Conv run-time weight 3x3 64->64 56",
            [N("Conv", ["x", "w"], ["z"], pads=[1, 1, 1, 1])],
            {"x": x(1, 64, 56, 56), "w": x(64, 64, 3, 3) * 0.05},
        )
    )
    C.append(
        case(
            "ConvTranspose run-time weight 4x4 s2 64->32 28",
            [N("ConvTranspose", ["x", "w"], ["z"], strides=[2, 2], pads=[1, 1, 1, 1])],
            {"x": x(1, 64, 28, 28), "w": x(64, 32, 4, 4) * 0.05},
        )
    )
    C.append(case("PRelu 64x112", [N("PRelu", ["x", "s"], ["z"])], {"x": X4}, [c("s", x(64, 1, 1))]))
    C.append(case("LeakyRelu 64x112", [N("LeakyRelu", ["x"], ["z"], alpha=0.1)], {"x": X4}))
    C.append(
        case(
            "Clip 0..6 64x112",
            [N("Clip", ["x", "lo", "hi"], ["z"])],
            {"x": X4},
            [c("lo", np.float32(0)), c("hi", np.float32(6))],
        )
    )
    C.append(
        case(
            "MaxPool 2x2 s2 ceil 256x28 odd",
            [N("MaxPool", ["x"], ["z"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)],
            {"x": x(1, 256, 27, 27)},
        )
    )
    C.append(
        case(
            "ReduceL2 axis last 512x1024",
            [N("ReduceL2", ["x", "ax"], ["z"], keepdims=1)],
            {"x": X2},
            [c("ax", np.array([1], np.int64))],
        )
    )
    C.append(
        case(
            "Resize nearest x2 NHWC-ish 1x3x256x256",
            [N("Resize", ["x", "", "sc"], ["z"], mode="nearest")],
            {"x": x(1, 3, 256, 256)},
            [c("sc", np.array([1, 1, 2, 2], np.float32))],
        )
    )
    C.append(
        case(
            "Cast f->i64->f",
            [N("Cast", ["x"], ["i"], to=TensorProto.INT64), N("Cast", ["i"], ["z"], to=TensorProto.FLOAT)],
            {"x": X3},
        )
    )
    return C


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="run the cases whose name contains this")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import _sweep
    chosen = [c for c in cases() if args.only in c[0]]
    if not chosen:
        print(f"no case matches {args.only!r}")
        return 1
    _sweep.report(_sweep.run(chosen, args.threads, args.repeat), args.threads, 2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
