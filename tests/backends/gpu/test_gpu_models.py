"""The whole path on GPUs: the six zoo models compiled for OpenCL match ONNX Runtime, export and
load round-trip, and every kernel of the six compiles to a cubin for sm_90 with NVRTC (calling
the CUDA model without a device raises the error that names it)."""
from __future__ import annotations

import numpy as np
import pytest
from gpu_probe import cuda_device_present, nvrtc_problem

import tensorforge
from tensorforge.runtime.device_model import DeviceModel
from tensorforge.testing import models

# slow on a CPU OpenCL device (PoCL runs barriers and shared-memory tiles as loops on 2 cores)
HEAVY = {"resnet18", "mobilenet_v1", "lstm_lm", "bert_encoder"}
ZOO = [pytest.param(n, marks=pytest.mark.slow) if n in HEAVY else n for n in models.NAMES]


def _reference(proto, inputs):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)


@pytest.mark.parametrize("name", ZOO)
def test_zoo_model_on_gpu_matches_onnxruntime(gpu, name):
    proto, inputs = models.get(name)
    model = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target=gpu)
    assert isinstance(model, DeviceModel)
    got = model.run(**inputs)
    for g, e in zip(got, _reference(proto, inputs), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-3, atol=1e-3)


def test_opencl_model_export_and_load(opencl, tmp_path):
    proto, inputs = models.get("dqn")
    model = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target="opencl")
    path = model.export(str(tmp_path / "dqn.tfm"))
    again = tensorforge.load(path)
    assert isinstance(again, DeviceModel) and again.device["runtime"] == "opencl"
    expected = model.run(**inputs)
    for g, e in zip(again.run(**inputs), expected, strict=True):
        np.testing.assert_array_equal(g, e)


def test_device_model_rejects_a_file_without_its_program(tmp_path):
    """A GPU model file whose program is missing is refused at load, naming the file it lacks."""
    import zipfile

    proto, _ = models.get("dqn")
    model = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target="cuda -arch=sm_90") \
        if _nvrtc_ok() else None
    if model is None:
        pytest.skip("needs NVRTC to build a GPU model")
    path = model.export(str(tmp_path / "m.tfm"))
    broken = tmp_path / "broken.tfm"
    with zipfile.ZipFile(path) as z, zipfile.ZipFile(broken, "w") as out:
        for item in z.namelist():
            if item != "kernels.cubin":
                out.writestr(item, z.read(item))
    with pytest.raises(ValueError, match="no kernels.cubin"):
        tensorforge.load(str(broken))


def _nvrtc_ok() -> bool:
    return not nvrtc_problem()


@pytest.mark.parametrize("name", models.NAMES)
def test_zoo_model_compiles_to_sm90_cubins(nvrtc, name):
    proto, inputs = models.get(name)
    model = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target="cuda -arch=sm_90")
    assert isinstance(model, DeviceModel) and model.device["option"] == "sm_90"
    assert model.program[:4] == b"\x7fELF"                     # one cubin holds every kernel
    symbols = {s["symbol"] for s in model.spec.steps if s["kind"] == "kernel"}
    assert symbols and symbols <= set(model.device["kernels"])
    for symbol in symbols:
        for entry, _grid, block in model.device["kernels"][symbol]["launches"]:
            assert entry.encode() in model.program and np.prod(block) <= 1024
    if not cuda_device_present():
        with pytest.raises(RuntimeError, match="NVIDIA GPU"):
            model.run(**inputs)


def test_cuda_model_exports_and_loads_without_a_device(nvrtc, tmp_path):
    proto, _ = models.get("dcgan_generator")
    model = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target="cuda -arch=sm_90")
    again = tensorforge.load(model.export(str(tmp_path / "g.tfm")))
    assert isinstance(again, DeviceModel)
    assert again.program == model.program and again.device == model.device
