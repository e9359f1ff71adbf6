"""The command line: compile -> run round trip, inspect, and the GEMM demo."""
import numpy as np
import onnx
from onnx import TensorProto, helper

from tensorforge import cli


def small_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.arange(32, dtype="float32") / 32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "small", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))


def test_compile_then_run(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.tfm")]) == 0
    x = np.random.default_rng(0).standard_normal((2, 8)).astype("float32")
    np.save(tmp_path / "x.npy", x)
    assert cli.main(["run", str(tmp_path / "m.tfm"), "--input", f"x={tmp_path / 'x.npy'}",
                     "--output-dir", str(tmp_path / "out")]) == 0
    y = np.load(tmp_path / "out" / "y.npy")
    w = (np.arange(32, dtype="float32") / 32).reshape(8, 4)
    np.testing.assert_allclose(y, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-6)


def test_inspect(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    assert cli.main(["inspect", str(tmp_path / "m.onnx")]) == 0
    out = capsys.readouterr().out
    assert "fused groups" in out and "[complex-out-fusable]" in out and "+ relu" in out
    assert "memory plan" in out and "per-kernel time" in out


def test_gemm_demo(capsys):
    assert cli.main(["demo", "--gemm", "--size", "64"]) == 0
    assert "verified against numpy.matmul" in capsys.readouterr().out


def test_tune_then_compile_with_records(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    records = tmp_path / "tune.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "3",
                     "--tuner", "random", "--target", "c"]) == 0
    assert "default" in capsys.readouterr().out
    assert records.read_text().count("\n") >= 1
    assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.tfm"),
                     "--records", str(records), "--target", "c"]) == 0
    assert "tuning records applied to 1 kernel" in capsys.readouterr().err


def test_tune_confirm_in_the_model(tmp_path, capsys):
    from tensorforge.autotune.records import load_records

    small_model(tmp_path / "m.onnx")
    records = tmp_path / "tune.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "4", "--tuner",
                     "random", "--target", "c", "--threads", "1", "--confirm", "2", "--confirm-model"]) == 0
    assert "in the model" in capsys.readouterr().err
    stages = [r.stage for r in load_records(records)]
    assert "model" in stages and stages.index("model") > stages.index("confirm")


def test_tune_confirms_in_the_model_by_default_and_can_skip_it(tmp_path, capsys):
    from tensorforge.autotune.records import load_records

    small_model(tmp_path / "m.onnx")
    base = ["tune", str(tmp_path / "m.onnx"), "--trials", "4", "--tuner", "random", "--target", "c",
            "--threads", "1", "--confirm", "2"]
    on, off = tmp_path / "on.jsonl", tmp_path / "off.jsonl"
    assert cli.main([*base, "--records", str(on)]) == 0
    assert "in the model" in capsys.readouterr().err
    assert "model" in [r.stage for r in load_records(on)]
    assert cli.main([*base, "--records", str(off), "--no-confirm-model"]) == 0
    assert "in the model" not in capsys.readouterr().err
    assert "model" not in [r.stage for r in load_records(off)]


def test_compile_applies_records_of_its_thread_count(tmp_path, capsys):
    from tensorforge.runtime import module

    small_model(tmp_path / "m.onnx")
    records = tmp_path / "tune.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "2",
                     "--tuner", "random", "--target", "c", "--threads", "1", "--confirm", "0"]) == 0
    capsys.readouterr()
    before = module.get_num_threads()
    try:
        for threads, applied in (("2", 0), ("1", 1)):
            assert cli.main(["compile", str(tmp_path / "m.onnx"), "-o", str(tmp_path / "m.tfm"), "--records",
                             str(records), "--target", "c", "--threads", threads]) == 0
            assert f"tuning records applied to {applied} kernel" in capsys.readouterr().err
    finally:
        module.set_num_threads(before)


def test_tune_with_a_shared_budget_plot_and_record_summary(tmp_path, capsys):
    small_model(tmp_path / "m.onnx")
    records, png = tmp_path / "tune.jsonl", tmp_path / "curves.png"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--total-trials", "4",
                     "--tuner", "random", "--threads", "1", "--plot", str(png), "--target", "c", "--confirm", "0",
                     "--no-confirm-model"]) == 0
    out = capsys.readouterr().out
    assert "tuned kernels, weighted by occurrences" in out
    assert records.read_text().count("\n") == 4 and png.read_bytes()[:4] == b"\x89PNG"
    assert cli.main(["inspect", "--records", str(records)]) == 0
    assert "4 records of 1 task(s)" in capsys.readouterr().out


def test_tune_with_cold_caches_times_single_runs_after_a_flush(tmp_path, capsys, monkeypatch):
    from tensorforge import autotune
    from tensorforge.autotune.records import load_records
    from tensorforge.cli.tune_cmd import COLD_REPEAT

    made = []

    class Runner(autotune.LocalRunner):
        def __init__(self, **options):
            made.append(options)
            super().__init__(**options)

    monkeypatch.setattr(autotune, "LocalRunner", Runner)
    small_model(tmp_path / "m.onnx")
    records = tmp_path / "tune.jsonl"
    assert cli.main(["tune", str(tmp_path / "m.onnx"), "--records", str(records), "--trials", "2", "--tuner",
                     "random", "--target", "c", "--threads", "1", "--confirm", "0", "--no-confirm-model",
                     "--cold-cache"]) == 0
    assert made[0]["flush_cache"] and made[0]["number"] == 1 and made[0]["min_repeat_ms"] == 0
    assert all(len(r.costs) == COLD_REPEAT for r in load_records(records) if r.ok)
