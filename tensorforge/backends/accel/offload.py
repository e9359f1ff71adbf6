"""Whole graphs on the accelerator with CPU fallback: which kernels it takes, and the mixed model
(the `fused groups -> steps -> Model` arrows for target kind "accel").

`compile(graph, target="accel")` runs the graph passes, fusion and lowering for the host target
("c"); `place` then takes every kernel that is one int8 convolution with its requantizing
epilogue (`conv2d_int8`) whose shapes fit the accelerator's blocks (batch, input and output
channels in multiples of BATCH / BLOCK_IN / BLOCK_OUT, a square window, equal strides and
symmetric padding) and whose tiling fits its buffers.  Each becomes an `AccelStep`: a layer
compiled by `conv2d_module` (layers with equal shapes share one), run on the simulator when the
model reaches it.  Everything else (the first conv with its 3 channels, pooling, residual adds,
the classifier) stays a C kernel on the CPU, as in the paper's run (ACCEL.md 4.9).

`model.info["placement"]` lists (kernel label, "accel" or "c") per step; `model.accel_stats()`
the counters of each accelerator step's last run.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...runtime.model import Model
from ...target import Target
from .config import AccelConfig
from .layers import LayerModule, conv2d_module
from .simulator import Stats

OFFLOADED_OP = "conv2d_int8"
VIRTUAL_THREADS = 2           # latency hiding on (ACCEL.md 3.4); the tuner can say otherwise


@dataclass
class AccelStep:
    """One kernel the accelerator runs: callable as an executor step on (data, weight, bias)."""

    layer: LayerModule
    step: dict                                  # the executor's opaque step (plain data)
    out_shape: tuple
    stats: Stats | None = field(default=None, repr=False)

    def __call__(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray, **attrs) -> np.ndarray:
        out = np.empty(self.out_shape, np.int8)
        self.stats = self.layer(np.ascontiguousarray(data), np.ascontiguousarray(weight),
                                np.ascontiguousarray(bias), out)
        return out


def fits(node, config: AccelConfig) -> str | None:
    """Why `node` cannot run on the accelerator, or None when its shapes fit the blocks."""
    if node.op != OFFLOADED_OP:
        return f"{node.op} is not an int8 convolution with a requantizing epilogue"
    x, w = node.inputs[0], node.inputs[1]
    strides, padding = node.attrs.get("strides") or (1, 1), node.attrs.get("padding") or (0, 0, 0, 0)
    if x.shape[0] % config.batch or x.shape[1] % config.block_in or w.shape[0] % config.block_out:
        return (f"batch {x.shape[0]}, {x.shape[1]} input and {w.shape[0]} output channels are not "
                f"multiples of {config.batch}, {config.block_in} and {config.block_out}")
    if w.shape[2] != w.shape[3] or len(set(strides)) != 1 or len(set(padding)) != 1:
        return "the accelerator's conv2d takes square windows, equal strides and symmetric padding"
    return None


def place(groups, target: Target) -> dict:
    """{group index: AccelStep} for the groups the accelerator runs (see the module doc)."""
    from .backend import config_of
    config = config_of(target)
    layers: dict = {}
    placed: dict = {}
    for k, g in enumerate(groups):
        node = g.nodes[0]
        if len(g.nodes) != 1 or fits(node, config) is not None:
            continue
        x, w, b = node.inputs
        strides, padding = node.attrs.get("strides") or (1, 1), node.attrs.get("padding") or (0, 0, 0, 0)
        key = (x.shape, w.shape, strides[0], padding[0], int(node.attrs.get("shift", 0)))
        if key not in layers:
            try:
                layers[key] = conv2d_module(x.shape, w.shape, strides[0], padding[0], key[4],
                                            virtual_threads=VIRTUAL_THREADS, config=config)
            except ValueError:          # a layer whose tiling does not fit: the CPU runs it
                layers[key] = None
        if layers[key] is None:
            continue
        out = node.outputs[0]
        step = {"kind": "opaque", "op": OFFLOADED_OP, "device": "accel", "attrs": dict(node.attrs),
                "inputs": [v.name for v in node.inputs], "outputs": [out.name]}
        placed[k] = AccelStep(layers[key], step, tuple(out.shape))
    return placed


class OffloadModel(Model):
    """A model whose steps run partly on the CPU (C kernels) and partly on the simulated
    accelerator.  Not exportable: the accelerator's steps are simulator runs, not native code."""

    def __init__(self, spec, lib_path, params: dict, source: str, info: dict):
        self.accel_steps: dict[int, AccelStep] = dict(info.get("placed", {}))
        super().__init__(spec, lib_path, params, source, info, host_steps=self.accel_steps)

    def accel_stats(self) -> dict[int, Stats | None]:
        """{step index: the counters of its last run} for every accelerator step."""
        return {k: s.stats for k, s in self.accel_steps.items()}

    def export(self, path: str) -> str:
        raise NotImplementedError("a model with accelerator steps cannot be exported: they run on the "
                                  "simulator; compile for target 'c' to export")


def make_model(spec, module, params: dict, info: dict | None = None) -> OffloadModel:
    """The backend's make_model: the host executor with the accelerator's steps."""
    return OffloadModel(spec, module.lib_path if module else None, params, module.source if module else "",
                        info or {})
