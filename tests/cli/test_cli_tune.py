"""`tensorforge tune`: its summary agrees with `inspect --records`, an unmeasured task says so,
--total-trials counts the trials a resumed run finds, progress goes to stderr only, and no
raw ConfigEntity reprs or Python source lines reach the terminal."""
import re

import numpy as np
import onnx
from onnx import TensorProto, helper
from test_cli import small_model

from tensorforge import cli


def two_task_model(path):
    """Two matmuls of different shapes: two tuning tasks."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16])
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [8, 4], np.ones(32, "float32"))
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [4, 16], np.ones(64, "float32"))
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["y"])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "two", [x], [y], [w1, w2]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))


def quick_tune(model, records, *extra):
    """argv of a short `tune` at 1 thread with random search and no confirmations."""
    return ["tune", str(model), "--records", str(records), "--tuner", "random", "--target", "c", "--threads", "1",
            "--confirm", "0", "--no-confirm-model", "--min-repeat-ms", "1", *extra]


def speedups(text):
    return re.findall(r"(\d+\.\d\d)x", text)


def test_summary_and_inspect_report_the_same_speedup(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    records = tmp_path / "t.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "4", "--tuner",
                     "random", "--target", "c", "--threads", "1", "--confirm", "2", "--min-repeat-ms", "1"]) == 0
    captured = capsys.readouterr()
    summary, progress = captured.out, captured.err
    assert "ConfigEntity(" not in summary + progress and "confirmed side by side: " in progress
    assert not re.search(r"^\[\d+/\d+\]", summary, re.M), summary        # progress lines only on stderr
    assert re.search(r"^\[1/1\] matmul", progress, re.M)
    task_line = next(ln for ln in summary.splitlines() if ln.startswith("matmul"))
    assert cli.main(["inspect", "--records", str(records)]) == 0
    table = capsys.readouterr().out
    row = next(ln for ln in table.splitlines() if ln.startswith("matmul"))
    assert speedups(task_line) and speedups(task_line) == speedups(row), (task_line, row)
    shown = [float(v) / 1e3 for v in re.search(r"default ([\d.]+) us -> best ([\d.]+) us", task_line).groups()]
    columns = [float(v) for v in re.findall(r"([\d.]+)ms", row)]
    assert len(columns) == 2 and all(abs(a - b) <= 6e-5 for a, b in zip(shown, columns)), (task_line, row)


def test_total_trials_counts_a_resumed_runs_trials_and_unmeasured_tasks_say_so(tmp_path, capsys):
    two_task_model(tmp_path / "m.onnx")
    records = tmp_path / "t.jsonl"
    argv = quick_tune(tmp_path / "m.onnx", records, "--total-trials", "2")
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    assert len(records.read_text().splitlines()) == 2
    assert out.count(": not measured") == 1 and "no correct run" not in out
    assert cli.main(argv) == 0                         # the same budget, resumed: nothing left to measure
    captured = capsys.readouterr()
    assert len(records.read_text().splitlines()) == 2
    assert "budget of 2 trials is used up by the 2 already in" in captured.err
    assert cli.main(argv[:-1] + ["4"]) == 0             # a larger one measures only the difference
    assert len(records.read_text().splitlines()) == 4


def test_warnings_are_one_line_without_source(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    records = tmp_path / "t.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "2", "--tuner",
                     "random", "--target", "c", "--threads", "1", "--confirm", "0", "--min-repeat-ms", "1"]) == 0
    capsys.readouterr()
    with open(records, "a") as f:
        f.write('{"version": 1, "broken": true}\n')
    assert cli.main(["inspect", "--records", str(records)]) == 0
    err = capsys.readouterr().err
    assert err.strip(), "expected a warning about the bad line"
    for line in err.splitlines():
        assert line.startswith("tensorforge: warning: "), err
    assert "warnings.warn" not in err and ".py:" not in err


def two_conv_model(path):
    """A 3x3 conv on the NCHW input, then a 32 -> 32 channel 3x3 conv on blocked data: the second
    can run as the direct conv or as Winograd with 2x2 or 4x4 tiles."""
    rng = np.random.default_rng(0)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 10, 10])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 10, 10])
    w1 = helper.make_tensor("w1", TensorProto.FLOAT, [32, 16, 3, 3], rng.standard_normal(32 * 16 * 9) * 0.1)
    w2 = helper.make_tensor("w2", TensorProto.FLOAT, [32, 32, 3, 3], rng.standard_normal(32 * 32 * 9) * 0.1)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1])]
    onnx.save(helper.make_model(helper.make_graph(nodes, "convs", [x], [y], [w1, w2]),
                                opset_imports=[helper.make_opsetid("", 17)]), str(path))


def test_tune_measures_the_forms_a_conv_could_run_as(tmp_path, capsys):
    two_conv_model(tmp_path / "m.onnx")
    records = tmp_path / "t.jsonl"
    argv = quick_tune(tmp_path / "m.onnx", records, "--trials", "2")
    assert cli.main(argv) == 0
    out = capsys.readouterr().out
    forms = [ln for ln in out.splitlines() if "(another form)" in ln]
    assert len(forms) == 2 and any(ln.startswith("conv2d_nchwc") for ln in forms), out
    assert "tuned kernels, weighted by occurrences" in out
    assert cli.main(argv + ["--no-algorithms"]) == 0          # the model's own kernels only
    assert "(another form)" not in capsys.readouterr().out
