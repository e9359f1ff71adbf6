"""A compiled GPU model: the device executor plus what exporting it as one file needs.

The exported file is runtime/model.py's zip archive with the device program in place of the
shared library: `model.json` carries a "device" entry ({"runtime": "opencl" | "cuda", the
device option (OpenCL device filter, CUDA architecture), the kernels' launches}), and
`kernels.cl` (OpenCL source, built by the driver when the model is first run) or
`kernels.cubin` (CUDA, loaded by the driver API) the program.  Loading needs only NumPy and the
device's runtime library (pyopencl, cuda-bindings), never the compiler.
"""
from __future__ import annotations

import dataclasses
import io
import json
import os
import zipfile

from .device_executor import DeviceGraphExecutor
from .executor import ModelSpec
from .model import ExecutorModel

# runtime name -> (program file in the archive, whether it is text)
PROGRAM_FILES = {"opencl": ("kernels.cl", True), "cuda": ("kernels.cubin", False)}


def device_opener(runtime: str, program, option: str):
    """A function that opens the device of `runtime` with `program` loaded on it."""
    if runtime == "opencl":
        from .opencl import OpenCLDevice
        return lambda: OpenCLDevice(program, option)
    if runtime == "cuda":
        from .cuda import CUDADevice
        return lambda: CUDADevice(program, option)
    raise ValueError(f"unknown device runtime {runtime!r}; known: {', '.join(PROGRAM_FILES)}")


class DeviceModel(ExecutorModel):
    """`model(*arrays)` or `model.run(name=array)` -> list of NumPy outputs in graph order; the
    kernels run on a GPU (or any OpenCL device)."""

    def __init__(self, spec: ModelSpec, device: dict, program, params: dict, source: str = "",
                 info: dict | None = None):
        if device.get("runtime") not in PROGRAM_FILES:
            raise ValueError(f"unknown device runtime {device.get('runtime')!r}; known: {', '.join(PROGRAM_FILES)}")
        self.spec, self.device, self.program, self.params = spec, device, program, params
        self.source, self.info = source, info or {}
        self.lib_path = None
        self.executor = DeviceGraphExecutor(spec, device["kernels"], device_opener(
            device["runtime"], program, device.get("option", "")), params)

    def export(self, path: str) -> str:
        """Write the model as one file (runtime/model.py's format); returns the path."""
        from .model import FORMAT_VERSION, _jsonable, save_params
        buf = io.BytesIO()
        save_params(buf, self.params)
        manifest = {"format": "tensorforge-model", "version": FORMAT_VERSION, "spec": dataclasses.asdict(self.spec),
                    "param_names": sorted(self.params), "device": self.device}
        filename, text = PROGRAM_FILES[self.device["runtime"]]
        tmp = f"{path}.tmp{os.getpid()}"
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr("model.json", json.dumps(manifest, default=_jsonable))
            z.writestr("params.npz", buf.getvalue())
            z.writestr(filename, self.program.encode() if text else bytes(self.program))
            z.writestr("kernels.src", self.source)
        os.replace(tmp, path)
        return path

    def __repr__(self) -> str:
        return (f"<tensorforge Model {self.spec.name} on {self.device['runtime']}: inputs {self.input_names}, "
                f"{len(self.spec.steps)} steps>")


def load_device_model(path: str, z: zipfile.ZipFile, manifest: dict, spec: ModelSpec, params: dict) -> DeviceModel:
    """The DeviceModel of an archive whose model.json has a "device" entry (runtime/model.load)."""
    device = manifest["device"]
    if not isinstance(device, dict) or device.get("runtime") not in PROGRAM_FILES or \
            not isinstance(device.get("kernels"), dict):
        raise ValueError(f"{path}: the model's device entry is malformed")
    filename, text = PROGRAM_FILES[device["runtime"]]
    if filename not in z.namelist():
        raise ValueError(f"{path}: the model runs on {device['runtime']} but has no {filename}")
    program = z.read(filename)
    source = z.read("kernels.src").decode() if "kernels.src" in z.namelist() else ""
    for step in spec.steps:
        if step["kind"] == "kernel":
            launches = device["kernels"].get(step["symbol"], {}).get("launches")
            if not isinstance(launches, list):
                raise ValueError(f"{path}: kernel {step['symbol']!r} has no launches in the device entry")
    return DeviceModel(spec, device, program.decode() if text else program, params, source)
