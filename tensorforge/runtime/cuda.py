"""The CUDA device: a cubin loaded and launched through the CUDA driver API (cuda-bindings).

`CUDADevice(cubin)` opens device 0 (its primary context), loads the module and implements
`DeviceAPI` (runtime/device_module.py).  On a machine without an NVIDIA driver or device it
raises a RuntimeError that says so; compiling (backends/cuda.py, NVRTC) needs neither.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ..errors import MissingDependencyError

_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
           "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
           "uint64": ctypes.c_uint64}


def import_driver():
    try:
        from cuda.bindings import driver
    except ImportError as err:
        raise MissingDependencyError(
            f"the CUDA backend needs cuda-bindings: pip install 'tensorforge[cuda]' ({err})") from None
    return driver


def _check(driver, result, what: str):
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != driver.CUresult.CUDA_SUCCESS:
        _, text = driver.cuGetErrorString(err)
        text = text.decode() if isinstance(text, bytes) else str(text)
        raise RuntimeError(f"CUDA {what} failed: {text} ({err})")
    return rest[0] if len(rest) == 1 else tuple(rest)


def no_device_error(reason: str, arch: str) -> RuntimeError:
    return RuntimeError(f"no CUDA device is available ({reason}): the kernels were compiled for {arch} "
                        "but need an NVIDIA GPU and its driver to run")


def open_context():
    """(driver module, device, context) of CUDA device 0; RuntimeError naming what is missing."""
    driver = import_driver()
    try:
        result = driver.cuInit(0)
    except Exception as err:          # the driver library itself is absent
        raise no_device_error(f"the NVIDIA driver library cannot be loaded: {err}", "this target") from None
    _check(driver, result, "initialization")
    count = _check(driver, driver.cuDeviceGetCount(), "device count")
    if count < 1:
        raise no_device_error("the driver reports no device", "this target")
    dev = _check(driver, driver.cuDeviceGet(0), "device lookup")
    ctx = _check(driver, driver.cuDevicePrimaryCtxRetain(dev), "context creation")
    _check(driver, driver.cuCtxSetCurrent(ctx), "context activation")
    return driver, dev, ctx


def device_arch() -> str:
    """"sm_XY" of CUDA device 0; RuntimeError when there is none."""
    driver, dev, _ = open_context()
    attr = driver.CUdevice_attribute
    major = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "query")
    minor = _check(driver, driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "query")
    return f"sm_{major}{minor}"


class CUDADevice:
    """CUDA device 0 with one cubin loaded."""

    def __init__(self, cubin: bytes, arch: str):
        try:
            self._drv, self._dev, self._ctx = open_context()
        except RuntimeError as err:
            raise RuntimeError(str(err).replace("this target", arch)) from None
        drv = self._drv
        self.name = _check(drv, drv.cuDeviceGetName(256, self._dev), "device name").split(b"\0")[0].decode()
        self._module = _check(drv, drv.cuModuleLoadData(cubin), f"loading the {arch} cubin on {self.name}")
        self._functions: dict = {}

    def alloc(self, nbytes: int):
        return _check(self._drv, self._drv.cuMemAlloc(nbytes), f"allocation of {nbytes} bytes")

    def upload(self, buf, array: np.ndarray) -> None:
        _check(self._drv, self._drv.cuMemcpyHtoD(buf, array.ctypes.data, array.nbytes), "copy to the device")

    def download(self, buf, array: np.ndarray) -> None:
        _check(self._drv, self._drv.cuMemcpyDtoH(array.ctypes.data, buf, array.nbytes), "copy from the device")

    def launch(self, symbol: str, grid: tuple, block: tuple, args: list) -> None:
        drv = self._drv
        fn = self._functions.get(symbol)
        if fn is None:
            fn = self._functions[symbol] = _check(drv, drv.cuModuleGetFunction(self._module, symbol.encode()),
                                                  f"lookup of kernel {symbol}")
        values, types = [], []
        for a in args:
            if isinstance(a, np.generic):
                values.append(int(a))
                types.append(_CTYPES[a.dtype.name])
            else:
                values.append(a)
                types.append(None)
        _check(drv, drv.cuLaunchKernel(fn, *grid, *block, 0, 0, (tuple(values), tuple(types)), 0),
               f"launch of kernel {symbol}")

    def synchronize(self) -> None:
        _check(self._drv, self._drv.cuCtxSynchronize(), "synchronization")
