"""Compiled GPU kernels as a callable Python object: device program -> `DeviceModule` -> results.

A device is a small object (`DeviceAPI`): allocate, upload, download, launch, synchronize.
OpenCL (runtime/opencl.py) and CUDA (runtime/cuda.py) implement it; everything else is here and
shared: argument checks (the same as the CPU Module's, so bad input raises the same errors),
copies of the arrays to the device and of the written ones back, workspace buffers, the launch
dimensions evaluated from the argument shapes, and the timer.

A call `m(*arrays)` copies every argument to the device, runs the function's kernels in order
and copies the arguments the kernels write back into the given arrays.  The device is opened
on first use, so a module can be built (and its source read) on a machine without the device.
"""
from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ..ir import dtype as dt
from .module import Function, KernelSignature, evaluate_shape
from .ndarray import NDArray


class DeviceAPI(Protocol):
    """What the runtime needs from a device."""

    name: str

    def alloc(self, nbytes: int) -> Any: ...
    def upload(self, buf: Any, array: np.ndarray) -> None: ...
    def download(self, buf: Any, array: np.ndarray) -> None: ...
    def launch(self, symbol: str, grid: tuple, block: tuple, args: list) -> None: ...
    def synchronize(self) -> None: ...


class DeviceFunctionCall:
    """One PrimFunc of a DeviceModule: `f(*arrays)` checks the arguments and runs its kernels."""

    def __init__(self, signature: KernelSignature, plan, device: Callable[[], DeviceAPI]):
        self.name = signature.name
        self.signature = signature
        self.plan = plan                        # codegen.c_gpu.DeviceFunction
        self._device = device
        self._checker = Function(signature, SimpleNamespace())   # argument checks only

    def __repr__(self) -> str:
        return f"<tensorforge device Function {self.name}({', '.join(p.name for p in self.signature.params)})>"

    def _arrays(self, args: Sequence) -> tuple[list[np.ndarray], list[int]]:
        values = self._checker.pack(args)
        arrays = [a._array if type(a) is NDArray else a for a in args]
        return arrays, values[len(arrays):]

    def _prepare(self, args: Sequence):
        arrays, shape_values = self._arrays(args)
        env = dict(zip(self.signature.shape_vars, shape_values))
        dev = self._device()
        buffers = []
        for arr in arrays:
            buf = dev.alloc(max(arr.nbytes, 1))
            if arr.nbytes:
                dev.upload(buf, np.ascontiguousarray(arr))
            buffers.append(buf)
        for _name, dtype, shape in self.plan.workspaces:
            count = 1
            for d in shape:
                count *= evaluate_shape(d, env)
            buffers.append(dev.alloc(max(1, count * dt.itemsize(dtype))))
        scalars = [np.dtype(v.dtype).type(x) for v, x in zip(self.signature.shape_vars, shape_values)]
        launches = []
        for launch in self.plan.launches:
            grid = tuple(evaluate_shape(e, env) for e in launch.grid)
            block = tuple(evaluate_shape(e, env) for e in launch.block)
            launches.append((launch.symbol, grid, block))
        return dev, arrays, buffers + scalars, launches

    def _run(self, dev: DeviceAPI, args: list, launches: list) -> None:
        for symbol, grid, block in launches:
            if 0 in grid or 0 in block:
                continue                         # an empty tensor: nothing to compute
            dev.launch(symbol, grid, block, args)

    def __call__(self, *args) -> None:
        dev, arrays, dev_args, launches = self._prepare(args)
        self._run(dev, dev_args, launches)
        for spec, arr, buf in zip(self.signature.params, arrays, dev_args):
            if spec.written and arr.nbytes:
                dev.download(buf, arr)
        dev.synchronize()

    def time_evaluator(self, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
        """Like Module.time_evaluator: seconds per run of the kernels (data already on the
        device), `repeat` means of `number` runs each."""
        if number < 1 or repeat < 1:
            raise ValueError("time_evaluator needs number >= 1 and repeat >= 1")

        def evaluate(*args) -> list[float]:
            dev, _, dev_args, launches = self._prepare(args)
            self._run(dev, dev_args, launches)
            dev.synchronize()
            n, results = number, []
            for _ in range(repeat):
                while True:
                    start = time.perf_counter()
                    for _ in range(n):
                        self._run(dev, dev_args, launches)
                    dev.synchronize()
                    elapsed = time.perf_counter() - start
                    if elapsed * 1e3 >= min_repeat_ms:
                        break
                    n = max(2 * n, int(n * min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1)
                results.append(elapsed / n)
            return results

        return evaluate


class DeviceModule:
    """Kernels compiled for one device.  `m(*arrays)` runs its only function, `m["name"]` picks
    one, `m.source` is the generated kernel source; `m.target` the Target."""

    def __init__(self, signatures: Sequence[KernelSignature], plans: dict, source: str, target,
                 open_device: Callable[[], DeviceAPI], binary: bytes | None = None):
        self.source, self.target, self.binary = str(source), target, binary
        self._open = open_device
        self._dev: DeviceAPI | None = None
        self._functions = {s.name: DeviceFunctionCall(s, plans[s.name], self.device) for s in signatures}

    def device(self) -> DeviceAPI:
        """The device the kernels run on (opened, and the program loaded, on first use)."""
        if self._dev is None:
            self._dev = self._open()
        return self._dev

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def get_function(self, name: str) -> DeviceFunctionCall:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"module has no function {name!r}; it has: {', '.join(self._functions)}") from None

    __getitem__ = get_function

    def __call__(self, *args) -> None:
        if len(self._functions) != 1:
            raise TypeError(f"module has {len(self._functions)} functions ({', '.join(self._functions)}); "
                            "pick one with module[name]")
        next(iter(self._functions.values()))(*args)

    def time_evaluator(self, name: str, number: int = 10, repeat: int = 3, min_repeat_ms: float = 0):
        return self.get_function(name).time_evaluator(number, repeat, min_repeat_ms)

    def __repr__(self) -> str:
        return f"<tensorforge DeviceModule {self.function_names} for {self.target}>"
