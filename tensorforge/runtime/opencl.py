"""The OpenCL device: pyopencl on any OpenCL platform (a GPU, or PoCL on the CPU).

`OpenCLDevice(source, device_filter)` picks a device (a GPU first; `device_filter` is a
case-insensitive substring of the device name), builds the program and implements `DeviceAPI`
(runtime/device_module.py): buffers, copies, kernel launches, synchronization.  pyopencl is an
optional dependency, imported on first use.
"""
from __future__ import annotations

import numpy as np

from ..errors import MissingDependencyError


def import_pyopencl():
    try:
        import pyopencl
    except ImportError as err:
        raise MissingDependencyError(
            "the OpenCL backend needs pyopencl and an OpenCL driver: pip install 'tensorforge[opencl]' "
            f"(pyopencl, and pocl-binary-distribution to run on the CPU) ({err})") from None
    return pyopencl


def pick_device(device_filter: str = ""):
    """The first OpenCL device whose name contains `device_filter`, GPUs before others."""
    cl = import_pyopencl()
    try:
        platforms = cl.get_platforms()
    except cl.Error as err:
        raise RuntimeError(f"no OpenCL platform is installed ({err}); pip install pocl-binary-distribution "
                           "runs OpenCL on the CPU") from None
    devices = [d for p in platforms for d in p.get_devices()]
    wanted = [d for d in devices if device_filter.lower() in d.name.lower()]
    if not wanted:
        names = ", ".join(d.name.strip() for d in devices) or "none"
        raise RuntimeError(f"no OpenCL device matches {device_filter!r}; devices: {names}")
    wanted.sort(key=lambda d: 0 if d.type & cl.device_type.GPU else 1)
    return wanted[0]


class OpenCLDevice:
    """One OpenCL device with the module's program built on it."""

    def __init__(self, source: str, device_filter: str = ""):
        cl = import_pyopencl()
        self._cl = cl
        self.device = pick_device(device_filter)
        self.name = self.device.name.strip()
        self.context = cl.Context([self.device])
        self.queue = cl.CommandQueue(self.context)
        try:
            self.program = cl.Program(self.context, source).build()
        except cl.Error as err:
            raise RuntimeError(f"the OpenCL compiler of {self.name} rejected the generated source:\n{err}") from None
        self._kernels: dict = {}

    def alloc(self, nbytes: int):
        return self._cl.Buffer(self.context, self._cl.mem_flags.READ_WRITE, size=nbytes)

    def upload(self, buf, array: np.ndarray) -> None:
        self._cl.enqueue_copy(self.queue, buf, array)

    def download(self, buf, array: np.ndarray) -> None:
        self._cl.enqueue_copy(self.queue, array, buf)

    def launch(self, symbol: str, grid: tuple, block: tuple, args: list) -> None:
        kernel = self._kernels.get(symbol)
        if kernel is None:
            kernel = self._kernels[symbol] = self._cl.Kernel(self.program, symbol)
        global_size = tuple(g * b for g, b in zip(grid, block))
        kernel(self.queue, global_size, tuple(block), *args)

    def synchronize(self) -> None:
        self.queue.finish()
