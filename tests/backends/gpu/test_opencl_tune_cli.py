"""Tuning a GPU template on the OpenCL device through the same tuner (candidates built, checked
against NumPy and timed by the backend's timer), records applied by compile, and the command
line with --target opencl."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import tensorforge
from tensorforge import autotune, cli
from tensorforge.testing import models


def test_tune_conv_template_on_opencl(opencl, tmp_path):
    proto, inputs = models.get("dqn")
    graph = tensorforge.frontend.from_onnx(proto)
    tasks = autotune.extract_tasks(graph, target="opencl")
    # DQN's strided convs are direct, its 3x3 stride-1 conv of 64 channels Winograd
    assert {t.template for t in tasks} == {"conv2d.gpu", "conv2d_winograd_nchw.gpu", "matmul.gpu"}
    task = next(t for t in tasks if t.template == "conv2d.gpu")
    records = tmp_path / "tune.jsonl"
    result = autotune.tune([task], trials=3, records=str(records), seed=1, log=False)[task]
    assert result.errors == 0 and result.config is not None and np.isfinite(result.cost)
    model = tensorforge.compile(graph, target="opencl", records=str(records))
    assert model.info["tuned_groups"] == 1
    expected = tensorforge.compile(graph, target="c").run(**inputs)[0]
    np.testing.assert_allclose(model.run(**inputs)[0], expected, rtol=1e-4, atol=1e-4)


def test_cli_compile_run_inspect_with_target_opencl(opencl, tmp_path, capsys):
    proto, inputs = models.get("dqn")
    onnx.save(proto, str(tmp_path / "m.onnx"))
    (name, x), = inputs.items()
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.tfm"), "--target", "opencl"]) == 0
    assert cli.main(["run", str(tmp_path / "m.tfm"), "--input", f"{name}={tmp_path / 'x.npy'}",
                     "-o", str(tmp_path / "out")]) == 0
    (out,) = list((tmp_path / "out").glob("*.npy"))
    expected = tensorforge.compile(tensorforge.frontend.from_onnx(proto), target="c")(x)[0]
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-4)
    assert cli.main(["inspect", str(tmp_path / "m.onnx"), "--target", "opencl"]) == 0
    assert "conv2d+add+relu" in capsys.readouterr().out


def test_confirm_in_model_says_device_models_cannot_swap_kernels(opencl, tmp_path):
    proto, _ = models.get("dqn")
    graph = tensorforge.frontend.from_onnx(proto)
    with pytest.raises(NotImplementedError, match="opencl models cannot do yet"):
        autotune.confirm_in_model(graph, str(tmp_path / "none.jsonl"), target="opencl", log=False)
