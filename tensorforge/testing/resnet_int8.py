"""ResNet-18 (v1) with int8 weights and activations and power-of-two requantization, built in the
graph compiler: the network of the paper's accelerator run (its section 6.4, ACCEL.md 4.9).

Every convolution is `conv2d_int8`: int8 NCHW activations, int8 OIHW weights, an int32 bias, and
the epilogue clip((acc >> shift) + bias, 0, 127).  Each layer's shift is a power-of-two scale
chosen from its fan-in so that the activations keep a useful range (roughly a quarter to a half
of [0, 127]) instead of collapsing to 0 or saturating.  Residual adds widen to int32, add and
clip to [0, 127] before narrowing; the classifier (global average pool and dense) runs in
float32.  Weights are random (seeded): the network computes a fixed, reproducible function, which
is what the offload checks need.

    graph, inputs = resnet18_int8()          # inputs: {"data": int8 [1, 3, 224, 224]}
"""
from __future__ import annotations

import math

import numpy as np

from ..graph.builder import GraphBuilder
from ..graph.ir import Graph, Value

WEIGHT_RANGE = 64          # weights uniform in [-64, 64)
ACT_RMS = 56.0             # assumed root-mean-square of an activation in [0, 127]
TARGET_RMS = 48.0          # wanted root-mean-square of a conv's output before the clip


def _shift(fan_in: int) -> int:
    """log2 of the scale taking a conv's accumulator to the activation range."""
    w_std = WEIGHT_RANGE / math.sqrt(3.0)
    return max(0, round(math.log2(math.sqrt(fan_in) * ACT_RMS * w_std / TARGET_RMS)))


class _Net:
    def __init__(self, seed: int):
        self.b = GraphBuilder("resnet18_int8")
        self.rng = np.random.default_rng(seed)

    def conv(self, x: Value, out_ch: int, k: int, stride: int, name: str) -> Value:
        in_ch = x.shape[1]
        w = self.rng.integers(-WEIGHT_RANGE, WEIGHT_RANGE, (out_ch, in_ch, k, k), dtype=np.int8)
        bias = self.rng.integers(-16, 16, (out_ch,), dtype=np.int32)
        p = k // 2
        return self.b.add1("conv2d_int8", [x, self.b.const(w, f"{name}_w"), self.b.const(bias, f"{name}_b")],
                           {"strides": (stride, stride), "padding": (p, p, p, p), "shift": _shift(in_ch * k * k)},
                           name=name)

    def residual_add(self, a: Value, b: Value, name: str) -> Value:
        wide = [self.b.add1("cast", [v], {"dtype": "int32"}) for v in (a, b)]
        s = self.b.add1("add", wide, name=f"{name}_add")
        s = self.b.add1("clip", [s], {"min": 0, "max": 127})
        return self.b.add1("cast", [s], {"dtype": "int8"}, name=name)

    def block(self, x: Value, out_ch: int, stride: int, name: str) -> Value:
        y = self.conv(x, out_ch, 3, stride, f"{name}_conv1")
        y = self.conv(y, out_ch, 3, 1, f"{name}_conv2")
        short = x if stride == 1 and x.shape[1] == out_ch else self.conv(x, out_ch, 1, stride, f"{name}_down")
        return self.residual_add(y, short, name)


def resnet18_int8(image: int = 224, batch: int = 1, classes: int = 1000, seed: int = 0
                  ) -> tuple[Graph, dict[str, np.ndarray]]:
    """The int8 ResNet-18 graph and a seeded int8 input image in [0, 127]."""
    net = _Net(seed)
    b = net.b
    data = b.input("data", (batch, 3, image, image), "int8")
    x = net.conv(data, 64, 7, 2, "conv1")                                   # C1: stays on the CPU
    x = b.add1("max_pool2d", [x], {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)})
    for stage, (ch, stride) in enumerate(((64, 1), (128, 2), (256, 2), (512, 2)), start=1):
        x = net.block(x, ch, stride, f"layer{stage}_0")
        x = net.block(x, ch, 1, f"layer{stage}_1")
    x = b.add1("cast", [x], {"dtype": "float32"})
    x = b.add1("global_avg_pool", [x])
    x = b.add1("flatten", [x], {"axis": 1})
    w = (net.rng.standard_normal((classes, x.shape[1])) * 0.01).astype(np.float32)
    logits = b.add1("dense", [x, b.const(w, "fc_w")], name="fc")
    inputs = {"data": net.rng.integers(0, 128, (batch, 3, image, image), dtype=np.int8)}
    return b.finish([logits]), inputs
