"""`tensorforge bench`: outputs checked against ONNX Runtime (or the NumPy references without
it), then a table of medians per thread count; inputs random, from files, or a zoo model's own;
symbolic input dimensions taken from --shape or from the given arrays."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tensorforge import cli
from tensorforge.cli import bench_cmd


def conv_model(path, batch="N"):
    """relu(conv(x, w) + b) with a symbolic batch (or a fixed one)."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array((rng.standard_normal((16, 3, 3, 3)) / 5).astype("float32"), "w")
    b = numpy_helper.from_array(rng.standard_normal(16).astype("float32"), "b")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 12, 12])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, "convnet", [x], [y], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _rows(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = next(k for k, line in enumerate(lines) if line.split()[:1] == ["threads"])
    return [line.split() for line in lines[start + 1:] if line.strip()]


def test_bench_checks_and_times_each_thread_count(tmp_path, capsys):
    conv_model(tmp_path / "m.onnx", batch=2)
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--threads", "1,2", "--repeat", "3"]) == 0
    captured = capsys.readouterr()
    assert "outputs checked against ONNX Runtime" in captured.err and "-> OK" in captured.err
    assert "inputs x float32[2, 3, 12, 12]" in captured.out
    rows = _rows(captured.out)
    assert [r[0] for r in rows] == ["1", "2"]
    for _, tf_ms, ort_ms, ratio in rows:
        assert float(tf_ms) > 0 and float(ort_ms) > 0
        assert abs(float(ratio) - float(tf_ms) / float(ort_ms)) <= 0.006 + 0.001 * float(ratio)


def test_symbolic_dimensions_come_from_the_given_arrays(tmp_path, capsys):
    conv_model(tmp_path / "m.onnx")
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--threads", "1", "--repeat", "2"]) == 1
    assert "symbolic dimensions" in capsys.readouterr().err
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((3, 3, 12, 12)).astype("float32"))
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "x.npy"),
                     "--threads", "1", "--repeat", "2"]) == 0
    assert "inputs x float32[3, 3, 12, 12]" in capsys.readouterr().out
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--shape", "x=4,3,12,12", "--threads", "1",
                     "--repeat", "2"]) == 0
    assert "inputs x float32[4, 3, 12, 12]" in capsys.readouterr().out


def test_without_onnxruntime_the_references_check_it(tmp_path, capsys, monkeypatch):
    conv_model(tmp_path / "m.onnx", batch=1)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)      # `import onnxruntime` fails
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--threads", "1", "--repeat", "2"]) == 0
    captured = capsys.readouterr()
    assert "the NumPy op references (onnxruntime is not installed)" in captured.err
    ((threads, tf_ms, ort_ms, ratio),) = _rows(captured.out)
    assert threads == "1" and float(tf_ms) > 0 and ort_ms == ratio == "-"


class _WrongPeer:
    def run(self, names, feeds):
        return [np.zeros((1, 16, 12, 12), np.float32)]


def test_outputs_that_differ_are_not_timed(tmp_path, capsys, monkeypatch):
    conv_model(tmp_path / "m.onnx", batch=1)
    monkeypatch.setattr(bench_cmd, "ort_session", lambda source, threads: _WrongPeer())
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--threads", "1", "--repeat", "2"]) == 1
    captured = capsys.readouterr()
    assert "MISMATCH" in captured.err and "not timed" in captured.err
    assert "threads" not in captured.out


def test_a_zoo_model_runs_on_its_own_inputs(capsys):
    assert cli.main(["bench", "dqn", "--threads", "1", "--repeat", "2"]) == 0
    captured = capsys.readouterr()
    assert "-> OK" in captured.err and "inputs frames float32[1, 4, 84, 84]" in captured.out


def if_model(path):
    """y = If(c, x + x, x * x): a condition known only at run time."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    c = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    out = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])  # noqa: E731
    then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "then", [], [out("t")])
    other = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["e"])], "else", [], [out("e")])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    graph = helper.make_graph([node], "branch", [x, c], [y])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_a_model_with_control_flow_runs_staged_on_given_inputs(tmp_path, capsys):
    if_model(tmp_path / "m.onnx")
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--threads", "1", "--repeat", "2"]) == 1
    assert "runs it so when its inputs are given with --input" in capsys.readouterr().err
    np.savez(tmp_path / "in.npz", x=np.arange(6, dtype=np.float32).reshape(2, 3), c=np.array(False))
    assert cli.main(["bench", str(tmp_path / "m.onnx"), "--input", str(tmp_path / "in.npz"),
                     "--threads", "1", "--repeat", "2"]) == 0
    captured = capsys.readouterr()
    assert "its stretches compile at call time" in captured.err and "-> OK" in captured.err
    assert [r[0] for r in _rows(captured.out)] == ["1"]
