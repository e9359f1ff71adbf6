"""The graph executor on a GPU: the same ModelSpec as runtime/executor.py, its values in device
buffers (the `kernels -> running model` arrow for the OpenCL and CUDA backends).

What runs is plain data, so an exported model runs without the compiler:
  kernels: PrimFunc name -> {"launches": [[entry symbol, grid, block], ...],
                             "workspaces": [bytes, ...]}
  (each kernel step names its PrimFunc; its launches take the step's buffers, then the
  workspaces, in that order).
Params are uploaded once, when the device is opened (on the first call: a model compiles on a
machine without the device and fails only when run, with the device's own message).  Every
value passed between steps has a device buffer of its own, allocated once (a view, a value with
a "source", shares its source's buffer); the model's inputs
are uploaded per call and its outputs downloaded.  Opaque steps (runtime/host_kernels.py) run
on the host: their inputs are downloaded, their outputs uploaded.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ..ir import dtype as dt
from . import host_kernels
from .executor import ModelSpec, check_input_names, checked_input, inputs_by_position


class DeviceGraphExecutor:
    """`ex(*arrays)` or `ex.run(name=array)` -> list of output arrays (NumPy, on the host)."""

    def __init__(self, spec: ModelSpec, kernels: dict, open_device: Callable[[], Any], params: dict):
        self.spec, self.kernels, self.params = spec, kernels, params
        self._open = open_device
        self._dev: Any = None
        self._buffers: dict = {}
        self._workspaces: dict = {}
        self._info = {n: (tuple(v["shape"]), dt.to_numpy(v["dtype"])) for n, v in spec.values.items()}
        for step in spec.steps:
            if step["kind"] == "kernel" and step["symbol"] not in kernels:
                raise ValueError(f"model {spec.name}: kernel step names {step['symbol']!r}, which has no launches")

    @property
    def input_names(self) -> list[str]:
        return list(self.spec.inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.spec.outputs)

    @property
    def input_info(self) -> list[tuple[str, tuple, np.dtype]]:
        return [(n, *self._info[n]) for n in self.spec.inputs]

    # -- the device ------------------------------------------------------------------------------
    def device(self):
        """The device, opened (program built or loaded, params uploaded, buffers allocated) on
        first use."""
        if self._dev is None:
            dev = self._open()
            for name, (shape, dtype) in self._info.items():
                if "source" not in self.spec.values[name]:
                    self._buffers[name] = dev.alloc(max(1, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize))
            for name, info in self.spec.values.items():
                if "source" in info:               # a view (a reshape): the bytes of its source
                    self._buffers[name] = self._buffers[info["source"]]
            for name, array in self.params.items():
                if array.nbytes:
                    dev.upload(self._buffers[name], np.ascontiguousarray(array, dtype=self._info[name][1]))
            for symbol, k in self.kernels.items():
                self._workspaces[symbol] = [dev.alloc(max(1, int(n))) for n in k["workspaces"]]
            self._dev = dev
        return self._dev

    # -- calling ---------------------------------------------------------------------------------
    def __call__(self, *arrays) -> list[np.ndarray]:
        return self._run(inputs_by_position(self.spec, arrays))

    def run(self, **named) -> list[np.ndarray]:
        check_input_names(self.spec, named)
        return self._run(named)

    def _upload_inputs(self, named: dict) -> None:
        checked = {name: checked_input(name, named[name], *self._info[name]) for name in self.spec.inputs}
        dev = self.device()
        for name, a in checked.items():
            if a.nbytes:
                dev.upload(self._buffers[name], np.ascontiguousarray(a))

    def _run(self, named: dict, timings: list | None = None) -> list[np.ndarray]:
        self._upload_inputs(named)
        for k in range(len(self.spec.steps)):
            start = time.perf_counter() if timings is not None else 0.0
            self._step(k)
            if timings is not None:
                self._dev.synchronize()
                timings[k] += time.perf_counter() - start
        return [self._download(name) for name in self.spec.outputs]

    def _step(self, k: int) -> None:
        step, dev = self.spec.steps[k], self._dev
        if step["kind"] == "kernel":
            args = [self._buffers[a] for a in step["args"]] + self._workspaces[step["symbol"]]
            for symbol, grid, block in self.kernels[step["symbol"]]["launches"]:
                if 0 in grid or 0 in block:
                    continue                     # an empty tensor: nothing to compute
                dev.launch(symbol, tuple(grid), tuple(block), args)
            return
        kernel = host_kernels.get(step["op"])
        ins = [self._download(i) if i is not None else None for i in step["inputs"]]
        outs = kernel(*ins, **step["attrs"])
        outs = outs if isinstance(outs, (list, tuple)) else [outs]
        for name, value in zip(step["outputs"], outs):
            shape, dtype = self._info[name]
            host = np.ascontiguousarray(np.asarray(value).reshape(shape), dtype=dtype)
            if host.nbytes:
                dev.upload(self._buffers[name], host)

    def _download(self, name: str) -> np.ndarray:
        shape, dtype = self._info[name]
        out = np.empty(shape, dtype)
        if out.nbytes:
            self._dev.download(self._buffers[name], out)
        self._dev.synchronize()
        return out

    def profile(self, *arrays, repeat: int = 10) -> list[tuple[str, float]]:
        """Mean seconds per step (device time, synchronized after each) over `repeat` runs,
        slowest first."""
        named = dict(zip(self.spec.inputs, arrays))
        timings = [0.0] * len(self.spec.steps)
        self._run(named)
        for _ in range(repeat):
            self._run(named, timings)
        labels = self.spec.labels or [str(k) for k in range(len(self.spec.steps))]
        return sorted(((labels[k], timings[k] / repeat) for k in range(len(timings))), key=lambda r: -r[1])
