"""`run` on an .npz of inputs into a named folder, and `inspect` of a compiled model."""
import numpy as np
import onnx
from onnx import TensorProto, helper

from tensorforge import cli


def two_input_model(path):
    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 4])
    b = helper.make_tensor_value_info("b", TensorProto.FLOAT, [3, 4])
    s = helper.make_tensor_value_info("sum", TensorProto.FLOAT, [3, 4])
    p = helper.make_tensor_value_info("prod/out", TensorProto.FLOAT, [3, 4])
    nodes = [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("Mul", ["a", "b"], ["prod/out"])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "two", [a, b], [s, p]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_run_reads_an_npz_and_writes_into_the_named_folder(tmp_path, capsys):
    two_input_model(tmp_path / "m.onnx")
    tfm = str(tmp_path / "m.tfm")
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", tfm]) == 0
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((3, 4)).astype("float32"), rng.standard_normal((3, 4)).astype("float32")
    np.savez(tmp_path / "in.npz", a=a, b=b)
    out = tmp_path / "results" / "run1"
    assert cli.main(["run", tfm, "--input", str(tmp_path / "in.npz"), "--output-dir", str(out)]) == 0
    np.testing.assert_allclose(np.load(out / "sum.npy"), a + b, rtol=1e-6)
    np.testing.assert_allclose(np.load(out / "prod_out.npy"), a * b, rtol=1e-6)
    printed = capsys.readouterr().out
    assert f"sum: float32[3, 4] -> {out / 'sum.npy'}" in printed
    # one input from the archive by name, the other from a .npy
    np.save(tmp_path / "b.npy", b)
    assert cli.main(["run", tfm, "--input", f"a={tmp_path / 'in.npz'}", "--input", f"b={tmp_path / 'b.npy'}",
                     "-o", str(tmp_path / "o2")]) == 0
    np.testing.assert_allclose(np.load(tmp_path / "o2" / "sum.npy"), a + b, rtol=1e-6)
    np.savez(tmp_path / "half.npz", a=a)
    assert cli.main(["run", tfm, "--input", str(tmp_path / "half.npz"), "-o", str(tmp_path / "o3")]) == 1
    assert "no array given for input b" in capsys.readouterr().err


def test_inspect_a_compiled_model(tmp_path, capsys):
    two_input_model(tmp_path / "m.onnx")
    tfm = str(tmp_path / "m.tfm")
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", tfm]) == 0
    capsys.readouterr()
    assert cli.main(["inspect", tfm, "--source"]) == 0
    out = capsys.readouterr().out
    assert "compiled model two" in out
    assert "input  a: float32[3, 4]" in out and "output prod/out: float32[3, 4]" in out
    assert "compiled kernels" in out and "per-kernel time (mean of 10 runs)" in out
    assert "void" in out or "int32_t" in out                    # the kernels' C source
