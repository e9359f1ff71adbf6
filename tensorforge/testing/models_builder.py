"""A small helper that writes ONNX models in code: the model zoo's common vocabulary.

`OnnxModelBuilder` collects nodes and initializers, names every value, draws seeded random
weights with realistic scales (He init for conv/dense layers, batch norm with non-trivial running
statistics) and returns an `onnx.ModelProto` that passes `onnx.checker`.  Each layer helper takes
the name of its input value and returns the name of its output value, so a network reads as a
straight line of calls.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

OPSET = 17


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover
        raise ImportError("the model zoo builds ONNX models and needs the onnx package: pip install onnx") from None
    return onnx


class OnnxModelBuilder:
    """Accumulates one ONNX graph; `finish` returns the model."""

    def __init__(self, name: str, seed: int = 0):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.inputs: list = []
        self._count: dict[str, int] = {}

    # -- names, inputs and constants ------------------------------------------------------------
    def fresh(self, base: str) -> str:
        k = self._count.get(base, 0)
        self._count[base] = k + 1
        return base if k == 0 else f"{base}_{k}"

    def input(self, name: str, shape: Sequence[int], dtype=np.float32) -> str:
        onnx = _onnx()
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        self.inputs.append(onnx.helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def const(self, array: np.ndarray, base: str = "const") -> str:
        """An initializer holding `array` (kept in its dtype)."""
        from onnx import numpy_helper
        name = self.fresh(base)
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def normal(self, shape: Sequence[int], std: float, base: str, mean: float = 0.0) -> str:
        return self.const(self.rng.normal(mean, std, size=shape).astype(np.float32), base)

    def uniform(self, shape: Sequence[int], bound: float, base: str) -> str:
        return self.const(self.rng.uniform(-bound, bound, size=shape).astype(np.float32), base)

    def ints(self, values: Sequence[int], base: str) -> str:
        return self.const(np.asarray(values, dtype=np.int64), base)

    # -- nodes ----------------------------------------------------------------------------------
    def node(self, op_type: str, inputs: Sequence[str], base: str | None = None, num_outputs: int = 1,
             **attrs) -> str | list[str]:
        """Append one node; returns its output name (a list when `num_outputs` > 1)."""
        onnx = _onnx()
        base = base or op_type.lower()
        outs = [self.fresh(base if num_outputs == 1 else f"{base}_out{k}") for k in range(num_outputs)]
        self.nodes.append(onnx.helper.make_node(op_type, list(inputs), outs, name=self.fresh(f"{base}_node"),
                                                **attrs))
        return outs[0] if num_outputs == 1 else outs

    # -- layers ---------------------------------------------------------------------------------
    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, pad: int = 0, group: int = 1,
             bias: bool = False, base: str = "conv", gain: float = 2.0) -> str:
        """Conv2d with He-initialized weights (std = sqrt(gain / fan_in))."""
        fan_in = cin // group * k * k
        w = self.normal((cout, cin // group, k, k), float(np.sqrt(gain / fan_in)), f"{base}_w")
        inputs = [x, w]
        if bias:
            inputs.append(self.uniform((cout,), 0.1, f"{base}_b"))
        return self.node("Conv", inputs, base, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad, pad, pad, pad], group=group)

    def conv_transpose(self, x: str, cin: int, cout: int, k: int, stride: int, pad: int,
                       base: str = "deconv", gain: float = 2.0) -> str:
        """ConvTranspose2d; each output sees about cin * (k / stride)^2 inputs, the fan-in used."""
        fan_in = cin * (k / stride) ** 2
        w = self.normal((cin, cout, k, k), float(np.sqrt(gain / fan_in)), f"{base}_w")
        return self.node("ConvTranspose", [x, w], base, kernel_shape=[k, k], strides=[stride, stride],
                         pads=[pad, pad, pad, pad])

    def batch_norm(self, x: str, c: int, base: str = "bn", gamma_scale: float = 1.0) -> str:
        """Inference batch norm with non-trivial affine parameters and running statistics."""
        gamma = self.const((gamma_scale * self.rng.uniform(0.5, 1.5, c)).astype(np.float32), f"{base}_gamma")
        beta = self.const(self.rng.normal(0.0, 0.1, c).astype(np.float32), f"{base}_beta")
        mean = self.const(self.rng.normal(0.0, 0.1, c).astype(np.float32), f"{base}_mean")
        var = self.const(self.rng.uniform(0.5, 1.5, c).astype(np.float32), f"{base}_var")
        return self.node("BatchNormalization", [x, gamma, beta, mean, var], base, epsilon=1e-5)

    def dense(self, x: str, cin: int, cout: int, base: str = "fc", gain: float = 2.0) -> str:
        """Gemm with the weight stored [out, in] (transB=1), like torch.nn.Linear exports."""
        w = self.normal((cout, cin), float(np.sqrt(gain / cin)), f"{base}_w")
        b = self.uniform((cout,), 0.1, f"{base}_b")
        return self.node("Gemm", [x, w, b], base, transB=1)

    def linear(self, x: str, cin: int, cout: int, base: str = "linear", std: float = 0.02) -> str:
        """MatMul + Add on the last axis (transformer style), weight stored [in, out]."""
        w = self.normal((cin, cout), std, f"{base}_w")
        b = self.normal((cout,), std, f"{base}_b")
        return self.node("Add", [self.node("MatMul", [x, w], f"{base}_mm"), b], base)

    def relu(self, x: str) -> str:
        return self.node("Relu", [x], "relu")

    def layer_norm(self, x: str, c: int, base: str = "ln") -> str:
        scale = self.const(self.rng.uniform(0.8, 1.2, c).astype(np.float32), f"{base}_scale")
        bias = self.const(self.rng.normal(0.0, 0.05, c).astype(np.float32), f"{base}_bias")
        return self.node("LayerNormalization", [x, scale, bias], base, axis=-1, epsilon=1e-12)

    def reshape(self, x: str, shape: Sequence[int], base: str = "reshape") -> str:
        return self.node("Reshape", [x, self.ints(shape, f"{base}_shape")], base)

    # -- result ---------------------------------------------------------------------------------
    def finish(self, outputs: Sequence[tuple[str, Sequence[int]]], out_dtype=np.float32):
        """The checked model, with `outputs` given as (name, shape) pairs."""
        onnx = _onnx()
        elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(out_dtype))
        outs = [onnx.helper.make_tensor_value_info(n, elem, list(s)) for n, s in outputs]
        graph = onnx.helper.make_graph(self.nodes, self.name, self.inputs, outs, self.initializers)
        model = onnx.helper.make_model(graph, producer_name="tensorforge.testing.models",
                                       opset_imports=[onnx.helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model
