"""The command line's failures: one line on stderr, exit code 2 for usage and 1 otherwise, a
traceback only with TENSORFORGE_DEBUG; option values and model inputs checked before use."""
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_cli import small_model

from tensorforge import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def relu_model(path, dims, opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = helper.make_model(helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu", [x], [y]),
                          opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, str(path))
    return str(path)


def one_error(capsys, code, argv, *fragments):
    """Run the command; it exits with `code` and prints exactly one line, an error naming the fragments."""
    assert cli.main(argv) == code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("[")]   # [1/3] progress
    assert len(lines) == 1, err
    assert lines[0].startswith("tensorforge: error: "), err
    for f in fragments:
        assert f in lines[0], lines[0]
    return lines[0]


def test_a_user_error_is_one_line_and_the_traceback_needs_debug(tmp_path):
    argv = [sys.executable, "-m", "tensorforge.cli", "compile", str(tmp_path / "missing.onnx")]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("TENSORFORGE_DEBUG", None)
    quiet = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert quiet.returncode == 1
    assert quiet.stderr.strip().splitlines()[-1].startswith("tensorforge: error: no such model file")
    assert "Traceback" not in quiet.stderr and len(quiet.stderr.strip().splitlines()) == 2   # [1/3] importing, error
    loud = subprocess.run(argv, capture_output=True, text=True, env=dict(env, TENSORFORGE_DEBUG="1"), timeout=120)
    assert loud.returncode == 1 and "Traceback" in loud.stderr and "InputError: no such model file" in loud.stderr


@pytest.mark.parametrize("argv, fragment", [
    (["compile", "m.onnx", "--threads", "0"], "--threads: expected a thread count of at least 1, got 0"),
    (["tune", "m.onnx", "--records", "t.jsonl", "--threads", "0"], "--threads"),
    (["compile", "m.onnx", "--opt-level", "7"], "--opt-level: expected an optimization level from 0 to 3"),
    (["compile", "m.onnx", "--shape", "x=2,0"], "must be at least 1"),
    (["compile", "m.onnx", "--shape", "x"], "expected name=d0,d1"),
    (["compile", "m.onnx", "--target", "tpu"], "unknown target kind 'tpu'"),
    (["tune", "m.onnx", "--records", "t.jsonl", "--total-trials", "0"], "--total-trials"),
    (["tune", "m.onnx", "--records", "t.jsonl", "--time-budget", "soon"], "cannot read the duration"),
    (["compile"], "the following arguments are required: model"),
    (["frobnicate"], "invalid choice"),
])
def test_usage_errors_exit_2(capsys, argv, fragment):
    one_error(capsys, 2, argv, fragment, "--help")


def test_unknown_shape_name_is_an_error_naming_the_inputs(tmp_path, capsys):
    model = relu_model(tmp_path / "m.onnx", ["batch", 3])
    one_error(capsys, 1, ["compile", model, "--shape", "X=4,3"], "'X', which is not an input", "inputs are x")


def test_input_without_shape_information(tmp_path, capsys):
    model = relu_model(tmp_path / "m.onnx", None)
    one_error(capsys, 1, ["compile", model], "input x has no shape information", "--shape x=")
    assert cli.main(["compile", model, "--shape", "x=2,5", "-o", str(tmp_path / "m.tfm")]) == 0
    assert cli.main(["inspect", str(tmp_path / "m.tfm")]) == 0
    assert "input  x: float32[2, 5]" in capsys.readouterr().out


def test_symbolic_dimensions_say_how_to_bind_them(tmp_path, capsys):
    model = relu_model(tmp_path / "m.onnx", ["batch", 3, 32, 32])
    line = one_error(capsys, 1, ["compile", model], "symbolic dimensions [batch, 3, 32, 32]",
                     "--shape x=1,3,32,32")
    assert "?" not in line


def test_newer_opset_warns_in_one_line(tmp_path, capsys):
    model = relu_model(tmp_path / "m.onnx", [2, 3], opset=99)
    assert cli.main(["compile", model, "-o", str(tmp_path / "m.tfm")]) == 0
    err = capsys.readouterr().err
    warned = [ln for ln in err.splitlines() if "opset 99" in ln]
    assert len(warned) == 1 and warned[0].startswith("tensorforge: warning: model relu declares ONNX opset 99")
    assert "warnings.warn" not in err and "onnx.py" not in err


def test_bad_model_files_are_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.onnx"
    junk.write_text("not a model")
    one_error(capsys, 1, ["compile", str(junk)], "junk.onnx is not a valid ONNX model")
    one_error(capsys, 1, ["inspect", str(tmp_path / "junk.tfm")], "no such model file")
    fake = tmp_path / "fake.tfm"
    fake.write_text("not a zip")
    one_error(capsys, 1, ["run", str(fake), "--input", "x=x.npy"], "fake.tfm is not a tensorforge model file")
    unsupported = tmp_path / "u.onnx"
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], name="f1")],
                                                  "u", [x], [y]), opset_imports=[helper.make_opsetid("", 17)]),
              str(unsupported))
    one_error(capsys, 1, ["compile", str(unsupported)], "does not support: Frobnicate (opset 17): nodes f1")


def test_an_internal_error_says_so(tmp_path, capsys, monkeypatch):
    from tensorforge.cli import model_cmds

    def broken(opts):
        raise KeyError("steps")

    monkeypatch.setattr(model_cmds, "compile_model", broken)
    monkeypatch.delenv("TENSORFORGE_DEBUG", raising=False)
    assert cli.main(["compile", "m.onnx"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("tensorforge: internal error: KeyError: 'steps'")
    assert "TENSORFORGE_DEBUG=1" in err


def test_run_checks_its_inputs(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    tfm = str(tmp_path / "m.tfm")
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", tfm]) == 0
    capsys.readouterr()
    np.save(tmp_path / "x64.npy", np.zeros((2, 8)))
    np.save(tmp_path / "x.npy", np.zeros((2, 8), "float32"))
    np.savez(tmp_path / "z.npz", z=np.zeros((2, 8), "float32"))
    (tmp_path / "bad.npy").write_text("garbage")
    one_error(capsys, 2, ["run", tfm], "give the inputs with --input", "x float32[2, 8]")
    one_error(capsys, 1, ["run", tfm, "--input", f"x={tmp_path / 'x64.npy'}"],
              "input x: the model takes float32[2, 8], the file holds float64[2, 8]")
    one_error(capsys, 1, ["run", tfm, "--input", str(tmp_path / "z.npz")], "no input z; its inputs are x")
    one_error(capsys, 1, ["run", tfm, "--input", f"x={tmp_path / 'bad.npy'}"], "cannot read", "bad.npy")
    one_error(capsys, 1, ["run", tfm, "--input", f"x={tmp_path / 'none.npy'}"], "no such file", "none.npy")
    one_error(capsys, 2, ["run", tfm, "--input", f"x={tmp_path / 'x.npy'}", "--input", f"x={tmp_path / 'x.npy'}"],
              "input x is given twice")
