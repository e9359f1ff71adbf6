"""benchmarks/ops.py runs end to end on two small layers: it verifies tensorforge against ONNX
Runtime, prints its table and summary, and writes its JSON (a few seconds)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tensorforge.graph.passes.alter_layout import block_for
from tensorforge.target import Target
from tensorforge.testing.oracles import ort_int8_products_exact

OPS = Path(__file__).resolve().parents[1] / "benchmarks" / "ops.py"


def test_ops_benchmark_runs(tmp_path):
    pytest.importorskip("onnxruntime", reason="benchmarks/ops.py compares against ONNX Runtime")
    out_json = tmp_path / "ops.json"
    proc = subprocess.run([sys.executable, str(OPS), "--layers", "C12,D9", "--repeat", "1",
                           "--json", str(out_json)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("layer"))
    for column in ("shape", "tf", "ort", "torch", "tf/ort", "tf %peak"):
        assert column in header
    assert any(line.startswith("C12 ") and "512->512 k3 s1" in line for line in lines)
    assert any(line.startswith("D9 ") and "c1024 k3 s1 dw" in line for line in lines)
    assert "fp32 FMA peak" in proc.stdout
    assert any(line.startswith("geometric mean, 3x3 conv2d") for line in lines)
    assert any(line.startswith("geometric mean, depthwise") for line in lines)

    data = json.loads(out_json.read_text())
    assert [r["layer"] for r in data["rows"]] == ["C12", "D9"]
    for row in data["rows"]:
        assert row["tf_gflops"] > 0 and row["ort_gflops"] > 0 and row["peak_gflops"] > 0
        assert row["tf_over_ort"] == pytest.approx(row["tf_gflops"] / row["ort_gflops"])
    assert data["rows"][0]["gflop"] == pytest.approx(2 * 512 * 512 * 9 * 49 / 1e9)
    # the conv is also timed blocked, as inside a model (checked against ONNX Runtime first)
    assert "blocked" in header and data["rows"][0]["tf_blocked_gflops"] > 0
    assert data["rows"][1]["tf_blocked_gflops"] is None


BENCH = OPS.parent


def _env(tmp_path):
    import os
    return dict(os.environ, TENSORFORGE_CACHE_DIR=str(tmp_path / "cache"))


def test_export_and_e2e_on_the_export(tmp_path):
    """benchmarks/exports/export.py writes DQN as torch.onnx.export does (checked against eager
    PyTorch before writing), and `e2e.py --onnx DIR` runs that folder against ONNX Runtime and the
    exported module itself, with the machine's peak and the model's share of it."""
    pytest.importorskip("torch", reason="the exports are written by torch.onnx.export")
    pytest.importorskip("onnxruntime", reason="exports are checked, and e2e.py compares, with ONNX Runtime")
    out = tmp_path / "exports"
    proc = subprocess.run([sys.executable, str(BENCH / "exports" / "export.py"), "--models", "dqn", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["dqn.npz", "dqn.onnx"]
    import numpy as np
    import onnx
    model = onnx.load(str(out / "dqn.onnx"))
    assert {n.op_type for n in model.graph.node} >= {"Conv", "Relu"}
    assert {p.key: p.value for p in model.metadata_props}["tensorforge.benchmarks.workload"] == "dqn"
    with np.load(out / "dqn.npz") as feeds:
        assert feeds.files == ["frames"] and feeds["frames"].shape == (1, 4, 84, 84)

    proc = subprocess.run([sys.executable, str(BENCH / "e2e.py"), "--onnx", str(out), "--repeat", "1",
                           "--threads", "1"], capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert any(line.startswith("fp32 FMA peak") and "FMA unit" in line for line in lines)
    for threads in (1,):
        row = next(line for line in lines if line.startswith("dqn ") and f" {threads}T " in line)
        share = float(row.split(" peak ", 1)[1].split("%", 1)[0])
        assert share > 0    # not bounded above: on a busy machine the peak probe can be slowed more
        # DQN's counted work: its three convs and two dense layers, 2 flops per multiply-add
        macs = 32 * 20 * 20 * 4 * 8 * 8 + 64 * 9 * 9 * 32 * 4 * 4 + 64 * 7 * 7 * 64 * 3 * 3 + 3136 * 512 + 512 * 18
        assert f"({2 * macs / 1e9:.3f} GFLOP)" in row
        # the peer is the exported torch.nn module, in one of the peer's modes
        mode = row.split("torch (", 1)[1].split(")", 1)[0]
        assert mode.removesuffix("+channels_last") in ("eager", "jit.freeze", "jit.optimize_for_inference")
        assert any(line.startswith(f"| dqn | {threads} |") for line in lines)
    assert "geometric mean ratio tensorforge/onnxruntime, 1 thread(s)" in proc.stdout


def test_tuning_curves_runs_on_the_templates_resnet18_uses(tmp_path):
    """C6 is a 3x3 stride-1 conv, which ResNet-18 compiles to Winograd: the curves are measured
    on that template (they stopped with "no task of ResNet-18 matches layer C6" when Winograd
    became the default)."""
    proc = subprocess.run([sys.executable, str(BENCH / "tuning_curves.py"), "--layers", "C6", "--tuners", "random",
                           "--seeds", "1", "--trials", "2", "--random-trials", "2", "--out", str(tmp_path / "curves")],
                          capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    block = block_for(128, "float32", Target.parse("c"))      # C6's 128 channels on this machine
    assert f"== C6: conv2d_winograd_nchwc.cpu(1x{128 // block}x28x28x{block}" in proc.stdout
    assert any(line.startswith("| C6 | random | ") for line in proc.stdout.splitlines())
    assert (tmp_path / "curves" / "C6.random.0.jsonl").exists()


def test_tuning_curves_layers_for_both_templates():
    """Each layer maps to ResNet-18's task: Winograd or direct as the model compiles it, every conv
    direct with --templates direct; a layer ResNet-18 lacks is named in the error."""
    sys.path.insert(0, str(BENCH))
    try:
        import tuning_curves
    finally:
        sys.path.remove(str(BENCH))
    model = tuning_curves.layer_tasks(["C1", "C2", "C7", "C12", "dense"], "model")
    assert {n: t.template for n, t in model.items()} == {
        "C1": "conv2d_nchwc.cpu", "C2": "conv2d_winograd_nchwc.cpu", "C7": "conv2d_nchwc.cpu",
        "C12": "conv2d_winograd_nchwc.cpu", "dense": "matmul_packed.cpu"}
    direct = tuning_curves.layer_tasks(["C2", "C12"], "direct")
    assert {t.template for t in direct.values()} == {"conv2d_nchwc.cpu"}
    assert direct["C2"].inputs[1][0][2:4] == (3, 3) and dict(direct["C2"].attrs)["strides"] == (1, 1)
    with pytest.raises(SystemExit, match="no task of ResNet-18 matches layer C3"):
        tuning_curves.layer_tasks(["C3"], "model")


def test_lowp_benchmark_runs():
    """benchmarks/lowp.py on the smallest zoo model: int8 agrees with ONNX Runtime, bf16 with fp32."""
    pytest.importorskip("onnxruntime", reason="benchmarks/lowp.py quantizes with ONNX Runtime")
    proc = subprocess.run([sys.executable, str(BENCH / "lowp.py"), "--models", "dqn", "--repeat", "1",
                           "--trials", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("dqn") and "%" in line)
    assert row.split()[1] == "100.00%"            # every element within one step of ONNX Runtime
    assert "bf16 products on" in proc.stdout and "geometric means" in proc.stdout


def test_lowp_agreement_benchmark_runs():
    """benchmarks/lowp_agreement.py on the smallest zoo model: every pair of runs (ONNX's reference,
    ONNX Runtime as written and optimized, tensorforge) on the same output step."""
    pytest.importorskip("onnxruntime", reason="benchmarks/lowp_agreement.py quantizes with ONNX Runtime")
    proc = subprocess.run([sys.executable, str(BENCH / "lowp_agreement.py"), "--models", "dqn"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pairs = [line.split() for line in proc.stdout.splitlines() if " vs " in line]
    assert len(pairs) == 6 and any("tensorforge" in p for p in pairs)
    # without VNNI, ONNX Runtime's fused int8 kernels saturate (testing/oracles.py): its
    # optimized run is then no oracle
    exact = [p for p in pairs if ort_int8_products_exact() or "optimized" not in p]
    assert len(exact) >= 3 and all(p[-3] == "100.00%" and p[-1] == "100.00%" for p in exact), proc.stdout


GPU = BENCH / "gpu.py"


def _opencl_problem() -> str:
    sys.path.insert(0, str(Path(__file__).resolve().parent / "backends" / "gpu"))
    from gpu_probe import opencl_problem
    return opencl_problem()


def test_gpu_benchmark_smoke_on_opencl(tmp_path):
    """benchmarks/gpu.py with the smallest sizes on OpenCL: every section prints its rows (outputs
    checked before timing) and the JSON holds them."""
    if _opencl_problem():
        pytest.skip(_opencl_problem())
    out_json = tmp_path / "gpu.json"
    proc = subprocess.run([sys.executable, str(GPU), "--target", "opencl", "--quick", "--repeat", "1",
                           "--json", str(out_json)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(out_json.read_text())
    names = {(r["section"], r["name"].split()[0]) for r in data["rows"]}
    assert names == {("models", "dqn"), ("fig4", "conv+bn+relu"), ("fig4", "depthwise+bn+relu"),
                     ("fig4", "lstm_cell"), ("fig7", "matmul"), ("convs", "C6"), ("convs", "C12")}
    fig4 = [r for r in data["rows"] if r["section"] == "fig4"]
    assert all(r["ms"]["fused"] > 0 and r["ms"]["unfused"] > 0 for r in fig4)
    assert any("kernels 1 fused, 3 unfused" in r["note"] for r in fig4)


def test_gpu_benchmark_without_a_cuda_device_exits_cleanly():
    sys.path.insert(0, str(Path(__file__).resolve().parent / "backends" / "gpu"))
    from gpu_probe import cuda_device_present
    if cuda_device_present():
        pytest.skip("a CUDA device is present; the run would measure")
    proc = subprocess.run([sys.executable, str(GPU), "--quick"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "nothing to measure on target 'cuda'" in proc.stdout and "Traceback" not in proc.stderr


def _torch_compile_bench():
    import importlib.util
    spec = importlib.util.spec_from_file_location("tf_bench_torch_compile", BENCH / "torch_compile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_torch_compile_dynamo_alone_runs_no_backend_work():
    """The "dynamo alone" measurement compiles the module with a backend that computed its outputs
    once: every later call returns them without running the graph (an update of the weight does not
    show), so what it times is dynamo's own per-call work."""
    torch = pytest.importorskip("torch", reason="benchmarks/torch_compile.py compiles with torch.compile")
    bench = _torch_compile_bench()
    module = torch.nn.Linear(4, 3).eval()
    x = torch.randn(2, 4)
    calls = []
    torch._dynamo.reset()
    try:
        with torch.no_grad():
            fast = torch.compile(module, backend=bench._constant_backend)
            first = fast(x).clone()
            module.weight.mul_(2.0)
            again = fast(x)
            seconds = bench._dynamo_alone(module, lambda *a: calls.append(a), (x,), [x.numpy()], repeat=3,
                                          lean=False, skip_guards=False)
    finally:
        torch._dynamo.reset()
    assert torch.equal(first, again) and not torch.equal(again, module(x))
    assert len(calls) == 3 and seconds > 0       # each call after one of the ONNX path's


def test_torch_compile_benchmark_runs(tmp_path):
    """benchmarks/torch_compile.py on DQN: both paths checked against eager PyTorch, and the table
    with dynamo's cost alone and the bound it sets on the ratio."""
    pytest.importorskip("torch", reason="benchmarks/torch_compile.py compiles with torch.compile")
    pytest.importorskip("onnx", reason="benchmarks/torch_compile.py exports to ONNX")
    proc = subprocess.run([sys.executable, str(BENCH / "torch_compile.py"), "--models", "dqn", "--repeat", "2"],
                          capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    header = next(line for line in lines if line.startswith("| model |"))
    assert header.endswith("| CPU ms dynamo alone | bound |")
    row = next(line for line in lines if line.startswith("| dqn |")).strip("|").split("|")
    onnx_cpu, alone, bound = float(row[4]), float(row[10]), float(row[11])
    assert alone > 0 and bound == pytest.approx((onnx_cpu + alone) / onnx_cpu, rel=1e-2)   # the table rounds to 3 places


def test_torch_compile_costs_runs(tmp_path):
    """benchmarks/torch_compile_costs.py on DQN: the parts of a torch.compile call add up to the
    whole, and dynamo's cost alone is printed hot and after each cache sweep."""
    pytest.importorskip("torch", reason="benchmarks/torch_compile_costs.py compiles with torch.compile")
    pytest.importorskip("onnx", reason="benchmarks/torch_compile_costs.py exports to ONNX")
    proc = subprocess.run([sys.executable, str(BENCH / "torch_compile_costs.py"), "--models", "dqn", "--repeat", "3"],
                          capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    header = [c.strip() for c in next(line for line in lines if line.startswith("| model |")).strip("|").split("|")]
    assert header[-5:] == ["alone hot", "alone 1 MB", "alone 4 MB", "alone 16 MB", "alone 64 MB"]
    row = [c.strip() for c in next(line for line in lines if line.startswith("| dqn |")).strip("|").split("|")]
    got = dict(zip(header, row))
    assert all(float(got[c]) > 0 for c in ("onnx", "torch.compile", "dynamo in", "weights", "model", "alone hot"))
    assert got["faults onnx"].isdigit() and got["faults torch.compile"].isdigit()
    # medians of parts need not add up to the median of the whole, but they are of the same calls
    parts = sum(float(got[c]) for c in ("dynamo in", "weights", "convert", "model", "dynamo out"))
    assert 0.5 < parts / float(got["torch.compile"]) < 2.0


def test_shape_sweep_runs_with_run_time_operands(tmp_path):
    """benchmarks/shape_sweep.py checks each random model against ONNX Runtime and times it; seed 2
    starts with a product of two run-time operands (attention's shape)."""
    pytest.importorskip("onnxruntime", reason="benchmarks/shape_sweep.py compares against ONNX Runtime")
    proc = subprocess.run([sys.executable, str(BENCH / "shape_sweep.py"), "--cases", "3", "--seed", "2",
                           "--repeat", "3"], capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "(run-time operands)" in proc.stdout
    assert "geometric mean tf/ort over 3 cases" in proc.stdout


def _export_one_and_compile(tmp_path, script: str, name: str, atol: float):
    """Run benchmarks/SCRIPT DIR --only NAME, compile DIR/NAME.onnx and match ONNX Runtime on
    DIR/NAME.npz; then an unknown name must be a one-line error (its stderr returned)."""
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    import tensorforge
    from tensorforge.frontend import from_onnx
    proc = subprocess.run([sys.executable, str(BENCH / script), str(tmp_path), "--only", name],
                          capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    feeds = dict(np.load(tmp_path / f"{name}.npz"))
    model = tensorforge.compile(from_onnx(str(tmp_path / f"{name}.onnx")))
    want = ort.InferenceSession(str(tmp_path / f"{name}.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(model(*[feeds[n] for n in model.input_names])[0], want[0], rtol=1e-3, atol=atol)
    bad = subprocess.run([sys.executable, str(BENCH / script), str(tmp_path), "--only", "nope"],
                         capture_output=True, text=True, timeout=300, env=_env(tmp_path))
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    return bad.stderr


def test_architectures_export_a_model_e2e_can_read(tmp_path):
    """benchmarks/architectures.py writes NAME.onnx + NAME.npz from a transformers configuration;
    tensorforge compiles the file and matches ONNX Runtime on its inputs.  An unknown name is a
    one-line error."""
    pytest.importorskip("transformers", reason="benchmarks/architectures.py builds transformers models")
    error = _export_one_and_compile(tmp_path, "architectures.py", "distilbert", atol=1e-3)
    assert "unknown architecture(s) nope" in error


def test_plain_torch_exports_a_model_e2e_can_read(tmp_path):
    """benchmarks/plain_torch.py writes NAME.onnx + NAME.npz from a plain torch.nn module, its
    metadata naming the model (e2e.py's PyTorch peer); tensorforge compiles the file and matches
    ONNX Runtime on its inputs.  An unknown name is a one-line error."""
    pytest.importorskip("torch", reason="benchmarks/plain_torch.py builds torch modules")
    onnx = pytest.importorskip("onnx")
    error = _export_one_and_compile(tmp_path, "plain_torch.py", "espcn", atol=1e-4)
    assert "unknown model(s) nope" in error
    meta = {p.key: p.value for p in onnx.load(str(tmp_path / "espcn.onnx")).metadata_props}
    assert meta["tensorforge.benchmarks.workload"] == "plain_torch:espcn"


def test_op_sweep_runs_its_cases():
    """benchmarks/op_sweep.py checks each single-op model against ONNX Runtime and times it; one
    case, once; and every case builds a model ONNX Runtime loads."""
    ort = pytest.importorskip("onnxruntime", reason="benchmarks/op_sweep.py compares against ONNX Runtime")
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "op_sweep.py"
    proc = subprocess.run([sys.executable, str(path), "--only", "CumSum", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "CumSum axis last 512x1024" in proc.stdout and "geometric mean tf/ort over 1 cases" in proc.stdout
    import importlib.util
    spec = importlib.util.spec_from_file_location("op_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, model, feeds in module.cases():
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        assert {i.name for i in sess.get_inputs()} == set(feeds), name


def _sequence_buckets_benchmark(tmp_path, *args: str) -> str:
    """The output of benchmarks/sequence_buckets.py with `args` (skipped without torch, which
    exports the model, transformers, which defines it, or ONNX Runtime, the peer)."""
    pytest.importorskip("torch", reason="the model is exported by torch.onnx.export")
    pytest.importorskip("transformers", reason="the model is a transformers model")
    pytest.importorskip("onnxruntime", reason="the benchmark compares with ONNX Runtime")
    proc = subprocess.run([sys.executable, str(BENCH / "sequence_buckets.py"), *args],
                          capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_sequence_buckets_benchmark_runs(tmp_path):
    """benchmarks/sequence_buckets.py on a small BERT: both passes compare with ONNX Runtime,
    the bucketed model verifies its padding, and the table has a row per length."""
    out = _sequence_buckets_benchmark(tmp_path, "--model", "bert", "--calls", "3", "--lengths", "5:12",
                                      "--buckets", "8,16", "--repeat", "1")
    assert "fp32 FMA peak" in out and "padding, buckets: verified" in out, out
    passes = [line for line in out.splitlines() if line.startswith("first pass")]
    assert len(passes) == 3 and all("max|diff| from ONNX Runtime" in line for line in passes)
    assert all(float(line.rsplit(" ", 1)[1]) < 1e-4 for line in passes), passes
    assert "geometric mean over the lengths" in out


def test_cached_generation_benchmark_runs(tmp_path):
    """benchmarks/sequence_buckets.py --model gpt2-kv: generation with a key/value cache gives
    ONNX Runtime's tokens on every path, and the bucketed model pads the past at its start."""
    out = _sequence_buckets_benchmark(tmp_path, "--model", "gpt2-kv", "--prompt", "3", "--tokens", "6",
                                      "--buckets", "4,8", "--repeat", "1")
    assert "padding, buckets: verified (at the start)" in out, out
    rows = [line.split() for line in out.splitlines()
            if line.startswith(("ONNX Runtime", "per length", "buckets ", "default "))]
    assert len(rows) == 4 and all(row[-1] == "yes" for row in rows), out


def test_data_dependent_benchmark_runs(tmp_path):
    """benchmarks/data_dependent.py on two images: every path's outputs (from_torch's staged
    program, ONNX Runtime and from_onnx on the export) match eager PyTorch before the table."""
    pytest.importorskip("torch", reason="benchmarks/data_dependent.py builds the detector in PyTorch")
    pytest.importorskip("onnxruntime", reason="benchmarks/data_dependent.py compares with ONNX Runtime")
    proc = subprocess.run([sys.executable, str(BENCH / "data_dependent.py"), "--threads", "1", "--repeat", "1",
                           "--images", "2"], capture_output=True, text=True, timeout=600, env=_env(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("| 1 |")).strip("|").split("|")
    assert all(float(v) > 0 for v in row[1:5])
