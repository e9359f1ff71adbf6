"""One entry point per layer kind: an int8 convolution or matrix product with its requantizing
epilogue, compiled for the accelerator and callable on plain NCHW / row-major arrays.

    m = conv2d_module((1, 64, 56, 56), (64, 64, 3, 3), strides=1, padding=1, shift=8,
                      virtual_threads=2)
    m(data, weight, bias, out)      # out = clip((conv(data, weight) >> shift) + bias, 0, 127)
    m.program, m.stats              # the instruction stream; the counters of the last call

Both build the `conv2d.accel` workload template (ops/schedules/accel.py) at its default
configuration with the virtual-thread knob set (or at a given `schedule_config`), then pack the
arrays into the blocked layouts on each call.  A matrix product out[m, n] = a[m, :] . b[n, :]
is the convolution of a 1 x m image with k channels by n 1x1 filters.
`tune_conv2d` measures candidate configurations in simulated cycles and keeps the fastest.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...target import Target
from ...te.space import ConfigEntity, ConfigSpace
from ...te.tensor import placeholder
from ...tir.build import schedule_to_primfunc
from ...tir.pipeline import run_pipeline
from ..base import PHASES
from .backend import BACKEND
from .config import AccelConfig
from .simulator import Stats


def _pair(v: Any, what: str) -> int:
    if isinstance(v, (tuple, list)):
        if len(set(v)) != 1:
            raise ValueError(f"the accelerator's conv2d takes equal {what} in both dimensions, got {tuple(v)}")
        v = v[0]
    return int(v)


def _target(config: AccelConfig | None) -> str:
    from .config import PRESETS
    config = config or AccelConfig()
    for name, c in PRESETS.items():
        if c == config:
            return f"accel -config={name}"
    raise ValueError("conv2d_module takes one of the named configurations (config.PRESETS); "
                     f"{config.name} is not one of them")


@dataclass
class LayerModule:
    """A compiled layer: packs NCHW/OIHW arrays, runs the accelerator kernel, unpacks."""

    module: Any                 # AccelModule
    config: AccelConfig
    schedule_config: dict
    kind: str                   # "conv2d" or "matmul"

    @property
    def program(self) -> tuple:
        return self.module.program

    @property
    def stats(self) -> Stats | None:
        return self.module.stats

    def __call__(self, data: np.ndarray, weight: np.ndarray, bias: np.ndarray, out: np.ndarray) -> Stats:
        c = self.config
        (lay_d, lay_w, lay_b, lay_o) = self.module.kernels[self.module._first.name].params
        for name, a, dtype in (("data", data, np.int8), ("weight", weight, np.int8), ("bias", bias, np.int32),
                               ("out", out, np.int8)):
            if not isinstance(a, np.ndarray) or a.dtype != dtype:
                raise TypeError(f"{self.kind}: {name} must be a NumPy {np.dtype(dtype).name} array")
        if self.kind == "matmul":
            data = data.T.reshape(1, data.shape[1], 1, data.shape[0])
            weight = weight.reshape(weight.shape + (1, 1))
        d = pack_data(data, c.batch, c.block_in)
        w = pack_weight(weight, c.block_out, c.block_in)
        if bias.shape != (lay_b.shape[0] * c.block_out,):
            raise ValueError(f"{self.kind}: bias must have shape [{lay_b.shape[0] * c.block_out}], "
                             f"got {list(bias.shape)}")
        b = np.ascontiguousarray(np.broadcast_to(bias.reshape(-1, 1, c.block_out), lay_b.shape))
        for name, a, lay in (("data", d, lay_d), ("weight", w, lay_w)):
            if a.shape != lay.shape:
                raise ValueError(f"{self.kind}: {name} packs to {list(a.shape)}, but the module was "
                                 f"built for {list(lay.shape)}")
        o = np.zeros(lay_o.shape, np.int8)
        stats = self.module(d, w, b, o)
        res = unpack_out(o)
        if self.kind == "matmul":
            res = res[0, :, 0, :].T
        if out.shape != res.shape:
            raise ValueError(f"{self.kind}: out must have shape {list(res.shape)}, got {list(out.shape)}")
        out[...] = res
        return stats


def pack_data(x: np.ndarray, batch: int, block: int) -> np.ndarray:
    """NCHW -> (N/B, C/Bi, H, W, B, Bi)."""
    n, c, h, w = x.shape
    _check_blocks("data", n, batch, "batch")
    _check_blocks("data", c, block, "channels")
    return np.ascontiguousarray(x.reshape(n // batch, batch, c // block, block, h, w).transpose(0, 2, 4, 5, 1, 3))


def pack_weight(wt: np.ndarray, block_out: int, block_in: int) -> np.ndarray:
    """OIHW -> (O/Bo, I/Bi, KH, KW, Bo, Bi)."""
    o, i, kh, kw = wt.shape
    _check_blocks("weight", o, block_out, "output channels")
    _check_blocks("weight", i, block_in, "input channels")
    return np.ascontiguousarray(wt.reshape(o // block_out, block_out, i // block_in, block_in, kh, kw)
                                .transpose(0, 2, 4, 5, 1, 3))


def unpack_out(o: np.ndarray) -> np.ndarray:
    """(N/B, O/Bo, OH, OW, B, Bo) -> NCHW."""
    nb, ob, oh, ow, b, bo = o.shape
    return np.ascontiguousarray(o.transpose(0, 4, 1, 5, 2, 3).reshape(nb * b, ob * bo, oh, ow))


def _check_blocks(what: str, n: int, block: int, dim: str) -> None:
    if n % block:
        raise ValueError(f"the accelerator needs {dim} of {what} in multiples of {block}, got {n}")


def _build(data_shape, weight_shape, strides, padding, shift, virtual_threads, config,
           schedule_config: dict | None, kind: str) -> LayerModule:
    from ...ops.schedules.accel import conv2d_accel
    config = config or AccelConfig()
    n, c, h, w = data_shape
    o, i, kh, kw = weight_shape
    if i != c:
        raise ValueError(f"{kind}: weight has {i} input channels but data has {c}")
    _check_blocks("data", n, config.batch, "batch")
    _check_blocks("data", c, config.block_in, "channels")
    _check_blocks("weight", o, config.block_out, "output channels")
    if not 1 <= virtual_threads <= 2:
        raise ValueError(f"virtual_threads must be 1 or 2, got {virtual_threads}")
    data = placeholder((n // config.batch, c // config.block_in, h, w, config.batch, config.block_in), "int8",
                       name="data")
    kernel = placeholder((o // config.block_out, c // config.block_in, kh, kw, config.block_out,
                          config.block_in), "int8", name="kernel")
    bias = placeholder((o // config.block_out, config.batch, config.block_out), "int32", name="bias")
    attrs = dict(strides=strides, padding=padding, shift=shift, acc_depth=config.acc_depth,
                 inp_depth=config.inp_depth)
    space = ConfigSpace()
    conv2d_accel(space, None, (data, kernel, bias), **attrs)
    values = dict(space.default_config().to_json())
    values["threads"] = virtual_threads
    values.update(schedule_config or {})
    entity: ConfigEntity = space.from_json(values)
    s, (out,) = conv2d_accel(entity, None, (data, kernel, bias), **attrs)
    target = Target.parse(_target(config))
    func = schedule_to_primfunc(s, [data, kernel, bias, out], f"{kind}_accel")
    func = run_pipeline(func, {phase: BACKEND.passes_at(phase) for phase in PHASES})
    module = BACKEND.build([func], target)
    return LayerModule(module, config, entity.to_json(), kind)


def conv2d_module(data_shape: Sequence[int], weight_shape: Sequence[int], strides: Any, padding: Any,
                  shift: int, virtual_threads: int = 1, config: AccelConfig | None = None,
                  schedule_config: dict | None = None) -> LayerModule:
    """An int8 NCHW convolution with `out = clip((conv >> shift) + bias, 0, 127)` on the
    accelerator (see the module doc); `schedule_config` overrides template knobs."""
    return _build(tuple(data_shape), tuple(weight_shape), _pair(strides, "strides"),
                  _pair(padding, "padding"), int(shift), virtual_threads, config, schedule_config, "conv2d")


def matmul_module(m: int, k: int, n: int, shift: int, virtual_threads: int = 1,
                  config: AccelConfig | None = None, schedule_config: dict | None = None) -> LayerModule:
    """out[m, n] = clip((a @ b.T >> shift) + bias, 0, 127) with int8 a[m, k], b[n, k], int32
    bias[n] and int8 out[m, n], on the accelerator."""
    return _build((1, k, 1, m), (n, k, 1, 1), 1, 0, int(shift), virtual_threads, config, schedule_config,
                  "matmul")


def tune_conv2d(data_shape, weight_shape, strides, padding, shift, config: AccelConfig | None = None,
                candidates: Sequence[dict] = ({"threads": 1}, {"threads": 2}), seed: int = 0
                ) -> tuple[dict, dict]:
    """Measure each candidate knob setting (on top of the template's default) in simulated cycles
    on random data; return (the fastest configuration's knobs, {config key: cycles or the error})."""
    rng = np.random.default_rng(seed)
    data = rng.integers(-128, 128, data_shape, dtype=np.int8)
    weight = rng.integers(-128, 128, weight_shape, dtype=np.int8)
    bias = rng.integers(-128, 128, weight_shape[0], dtype=np.int32)
    results: dict = {}
    best: tuple | None = None
    for cand in candidates:
        key = ", ".join(f"{k}={v}" for k, v in sorted(cand.items()))
        try:
            layer = conv2d_module(data_shape, weight_shape, strides, padding, shift, config=config,
                                  virtual_threads=int(cand.get("threads", 1)),
                                  schedule_config={k: v for k, v in cand.items() if k != "threads"})
        except ValueError as err:           # a tiling that does not fit or does not divide
            results[key] = str(err)
            continue
        out = np.zeros((data_shape[0], weight_shape[0]) + _out_hw(data_shape, weight_shape, strides, padding),
                       np.int8)
        cycles = layer(data, weight, bias, out).cycles
        results[key] = cycles
        if best is None or cycles < best[0]:
            best = (cycles, layer.schedule_config)
    if best is None:
        raise ValueError(f"no candidate configuration builds: {results}")
    return best[1], results


def _out_hw(data_shape, weight_shape, strides, padding) -> tuple[int, int]:
    s, p = _pair(strides, "strides"), _pair(padding, "padding")
    return ((data_shape[2] + 2 * p - weight_shape[2]) // s + 1, (data_shape[3] + 2 * p - weight_shape[3]) // s + 1)
