"""Small float ONNX models (a CNN and an MLP) and their QDQ-quantized forms, made by ONNX
Runtime's quantize_static (per-channel int8 weights, uint8 activations) as deployed models are."""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper


class _Weights:
    def __init__(self, seed: int):
        self.rng, self.inits = np.random.default_rng(seed), []

    def __call__(self, *shape: int, scale: float | None = None) -> str:
        s = scale if scale is not None else (2.0 / max(1, int(np.prod(shape[1:])))) ** 0.5
        name = f"p{len(self.inits)}"
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    def shape_const(self, shape: tuple) -> str:
        """An int64 initializer holding `shape` (a Reshape's target)."""
        name = f"p{len(self.inits)}"
        self.inits.append(numpy_helper.from_array(np.array(shape, np.int64), name))
        return name


def cnn(seed: int = 0):
    """Conv-Relu, strided Conv-Relu, global average pool, Gemm: input x (1, 3, 16, 16)."""
    p = _Weights(seed)
    nodes = [
        helper.make_node("Conv", ["x", p(8, 3, 3, 3), p(8, scale=0.1)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", p(16, 8, 3, 3), p(16, scale=0.1)], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", p(10, 16), p(10, scale=0.1)], ["y"], transB=1),
    ]
    return _model(nodes, p, (1, 3, 16, 16), (1, 10))


def mobile(seed: int = 0):
    """MobileNet's blocks: Conv-Relu, depthwise Conv-Relu, 1x1 Conv-Relu, strided depthwise
    Conv-Relu (24 channels, not a whole vector), global average pool, Gemm: input x (1, 3, 15, 15)."""
    p = _Weights(seed)
    nodes = [
        helper.make_node("Conv", ["x", p(16, 3, 3, 3), p(16, scale=0.1)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", p(16, 1, 3, 3), p(16, scale=0.1)], ["d1"], pads=[1, 1, 1, 1], group=16),
        helper.make_node("Relu", ["d1"], ["r2"]),
        helper.make_node("Conv", ["r2", p(24, 16, 1, 1), p(24, scale=0.1)], ["c2"]),
        helper.make_node("Relu", ["c2"], ["r3"]),
        helper.make_node("Conv", ["r3", p(24, 1, 3, 3), p(24, scale=0.1)], ["d2"], pads=[1, 1, 1, 1], strides=[2, 2],
                         group=24),
        helper.make_node("Relu", ["d2"], ["r4"]),
        helper.make_node("GlobalAveragePool", ["r4"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", p(10, 24), p(10, scale=0.1)], ["y"], transB=1),
    ]
    return _model(nodes, p, (1, 3, 15, 15), (1, 10))


def residual(seed: int = 0):
    """ResNet's stem and block: Conv-Relu, MaxPool 3x3/2, Conv-Relu-Conv plus the pooled input,
    Relu, then a Conv plus the block's output again (a residual operand from NCHW data: the
    quantized block output feeds the next block both ways), global average pool, Gemm: input x
    (1, 3, 16, 16)."""
    p = _Weights(seed)
    nodes = [
        helper.make_node("Conv", ["x", p(16, 3, 3, 3), p(16, scale=0.1)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["m"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["m", p(16, 16, 3, 3), p(16, scale=0.1)], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", p(16, 16, 3, 3), p(16, scale=0.1)], ["c3"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c3", "m"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", p(10, 16), p(10, scale=0.1)], ["y"], transB=1),
    ]
    return _model(nodes, p, (1, 3, 16, 16), (1, 10))


def input_residual(seed: int = 0):
    """Conv plus the model's own input (quantized in NCHW, not made by a conv), Relu, global
    average pool, Gemm: input x (1, 8, 12, 12)."""
    p = _Weights(seed)
    nodes = [
        helper.make_node("Conv", ["x", p(8, 8, 3, 3), p(8, scale=0.1)], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "x"], ["s1"]),
        helper.make_node("Relu", ["s1"], ["r1"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", p(10, 8), p(10, scale=0.1)], ["y"], transB=1),
    ]
    return _model(nodes, p, (1, 8, 12, 12), (1, 10))


def mlp(seed: int = 0):
    """MatMul-Add-Relu twice, then MatMul: input x (4, 32)."""
    p = _Weights(seed)
    nodes = [
        helper.make_node("MatMul", ["x", p(32, 64)], ["m1"]), helper.make_node("Add", ["m1", p(64, scale=0.1)], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", p(64, 48)], ["m2"]), helper.make_node("Add", ["m2", p(48, scale=0.1)], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("MatMul", ["r2", p(48, 10)], ["y"]),
    ]
    return _model(nodes, p, (4, 32), (4, 10))


def projection(seed: int = 0):
    """A language model's head: the (seq, 1, hidden) states reshaped to rows, MatMul-Add onto
    80 words (5 vectors of 16: no width 2..4 divides the panels), reshaped back to (seq, 1, 80):
    input x (12, 1, 24)."""
    p = _Weights(seed)
    rows, back = p.shape_const((12, 24)), p.shape_const((12, 1, 80))
    nodes = [
        helper.make_node("Reshape", ["x", rows], ["h"]),
        helper.make_node("MatMul", ["h", p(24, 80)], ["m"]), helper.make_node("Add", ["m", p(80, scale=0.1)], ["a"]),
        helper.make_node("Reshape", ["a", back], ["y"]),
    ]
    return _model(nodes, p, (12, 1, 24), (12, 1, 80))


def attention(seed: int = 0):
    """One self-attention of 2 heads as an exporter writes it: Q, K and V projections of x
    (1, 24, 32), split into heads (Reshape, Transpose), scores Q K^T scaled and softmaxed, P V,
    the heads put back together (Transpose, Reshape), an output projection."""
    p = _Weights(seed)
    heads, seq, dim, hd = 2, 24, 32, 16
    split, merge = p.shape_const((1, seq, heads, hd)), p.shape_const((1, seq, dim))
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", p(dim, dim)], [f"{name}_p"]),
                  helper.make_node("Add", [f"{name}_p", p(dim, scale=0.1)], [f"{name}_b"]),
                  helper.make_node("Reshape", [f"{name}_b", split], [f"{name}_s"]),
                  helper.make_node("Transpose", [f"{name}_s"], [f"{name}_h"],
                                   perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    p.inits.append(numpy_helper.from_array(np.array(hd ** 0.5, np.float32), "sqrt_d"))
    nodes += [helper.make_node("MatMul", ["q_h", "k_h"], ["scores"]),
              helper.make_node("Div", ["scores", "sqrt_d"], ["scaled"]),
              helper.make_node("Softmax", ["scaled"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", "v_h"], ["ctx"]),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx_t", merge], ["ctx_m"]),
              helper.make_node("MatMul", ["ctx_m", p(dim, dim)], ["y"])]
    return _model(nodes, p, (1, seq, dim), (1, seq, dim))


def _model(nodes, p: _Weights, in_shape: tuple, out_shape: tuple):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, in_shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)], p.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def quantized(model, path_dir, in_shape: tuple) -> str:
    """Path of `model` quantized by onnxruntime.quantization.quantize_static (QDQ, per-channel)."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"x": np.random.default_rng(i).standard_normal(in_shape).astype(np.float32)}
                                 for i in range(8)])

        def get_next(self):
            return next(self.batches, None)

    src, dst = str(path_dir / "float.onnx"), str(path_dir / "qdq.onnx")
    onnx.save(model, src)
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return dst
