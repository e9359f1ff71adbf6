"""Low precision side by side at 1 thread: ONNX Runtime fp32, ONNX Runtime int8 (the model
quantized by onnxruntime.quantization.quantize_static: QDQ, per-channel int8 weights, uint8
activations), tensorforge int8 on that same QDQ file, tensorforge bf16 (precision="bf16"), and
OpenVINO on the QDQ file and by default (bf16 where the CPU has AMX) when `pip install openvino`
has been done.  Accuracy next to speed:

  int8  share of output elements within one quantization step of ONNX Runtime's run of the file
        (its default, optimized run, whose fusions round differently, and the file as written,
        graph optimizations off; ONNX Runtime's two runs are compared with each other too)
  bf16  relative L2 error against tensorforge fp32 and top-1 agreement over --trials random inputs

    python benchmarks/lowp.py                                  # zoo: resnet18, mobilenet_v1, bert_encoder
    python benchmarks/lowp.py --models dqn --trials 20
    python benchmarks/lowp.py --onnx benchmarks/exports/onnx   # the PyTorch exports (export.py)
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")        # 1 thread, for every peer
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

DEFAULT_MODELS = ["resnet18", "mobilenet_v1", "bert_encoder"]


def interleaved_ms(fns: dict, repeat: int) -> dict:
    """The median milliseconds of each callable, the callables run in turn `repeat` times (so a
    burst of load on a shared machine falls on all of them alike, and their ratios hold)."""
    for fn in fns.values():
        fn()
    times: dict = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) * 1e3 for k, v in times.items()}


def random_feeds(feeds: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    return {k: (rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.kind == "f" else v) for k, v in feeds.items()}


def quantize(proto, feeds: dict, folder: Path) -> str:
    """The QDQ file quantize_static makes of `proto`, calibrated on 8 random inputs."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([random_feeds(feeds, 1000 + i) for i in range(8)])

        def get_next(self):
            return next(self.batches, None)

    src, pre, dst = folder / "float.onnx", folder / "pre.onnx", folder / "qdq.onnx"
    proto = _distinct_initializer_names(proto)
    onnx.save(proto, str(src))
    try:      # the pre-processing ONNX Runtime asks for: shape inference, batch norms folded
        from onnxruntime.quantization.shape_inference import quant_pre_process
        quant_pre_process(str(src), str(pre))
        src = pre
    except Exception as err:  # noqa: BLE001  (an older ONNX Runtime: quantize the model as it is)
        print(f"quant_pre_process failed ({err}); quantizing without it", file=sys.stderr)
    quantize_static(str(src), str(dst), Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return str(dst)


def _distinct_initializer_names(proto):
    """A copy whose initializers are renamed `init_<name>`: quantize_static names the scale of
    activation X `X_scale`, which collides with a weight of that name (the zoo's `embed_ln_scale`
    next to the value `embed_ln`), leaving two initializers of one name in the file."""
    import onnx
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    names = {i.name for i in model.graph.initializer}
    for init in model.graph.initializer:
        init.name = f"init_{init.name}"
    for node in model.graph.node:
        for k, name in enumerate(node.input):
            if name in names:
                node.input[k] = f"init_{name}"
    return model


def ort_session(path_or_proto, optimize: bool = True):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    if not optimize:
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = path_or_proto if isinstance(path_or_proto, str) else path_or_proto.SerializeToString()
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def output_step(path: str) -> float:
    """The scale of the last DequantizeLinear: one quantization step of the output."""
    import onnx
    from onnx import numpy_helper
    model = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[1] in init]
    return float(np.max(init[dq[-1].input[1]])) if dq else 0.0


def openvino_runner(path: str, hint: str | None):
    """A callable running the file on OpenVINO's CPU plugin at 1 thread, or None."""
    try:
        import openvino as ov
    except ImportError:
        return None
    core = ov.Core()
    config = {"INFERENCE_NUM_THREADS": 1}
    if hint:
        config["INFERENCE_PRECISION_HINT"] = hint
    compiled = core.compile_model(path, "CPU", config)
    request = compiled.create_infer_request()
    return lambda feeds: request.infer(feeds)


def load(name: str, onnx_dir: str | None):
    if onnx_dir:
        import onnx
        proto = onnx.load(str(Path(onnx_dir) / f"{name}.onnx"))
        feeds = dict(np.load(Path(onnx_dir) / f"{name}.npz"))
        return proto, feeds
    from tensorforge.testing import models
    return models.get(name)


def run_model(name: str, opts) -> dict:
    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime import module as rt

    rt.set_num_threads(1)
    proto, feeds = load(name, opts.onnx)
    row: dict = {"model": name}
    with tempfile.TemporaryDirectory() as tmp:
        qdq = quantize(proto, feeds, Path(tmp))
        ort_fp32, ort_int8 = ort_session(proto), ort_session(qdq)
        graph, qgraph = from_onnx(proto), from_onnx(qdq)
        fp32 = tensorforge.compile(graph, threads=1)
        int8 = tensorforge.compile(qgraph, threads=1)
        bf16 = tensorforge.compile(graph, threads=1, precision="bf16")
        order = [v.name for v in graph.inputs]
        args = [feeds[k] for k in order]
        step = output_step(qdq)
        want = np.asarray(ort_int8.run(None, feeds)[0], np.float64)
        got = np.asarray(int8(*[feeds[v.name] for v in qgraph.inputs])[0], np.float64)
        plain = np.asarray(ort_session(qdq, optimize=False).run(None, feeds)[0], np.float64)
        within = lambda a, b: float(np.mean(np.abs(a - b) <= step * 1.0001 + 1e-12))  # noqa: E731
        row["int8_within_step"], row["int8_within_step_plain"] = within(got, want), within(got, plain)
        row["ort_self"] = within(want, plain)
        rel, top1 = [], 0
        for k in range(opts.trials):
            f = random_feeds(feeds, k) if k else feeds
            a = np.asarray(fp32(*[f[n] for n in order])[0], np.float64)
            b = np.asarray(bf16(*[f[n] for n in order])[0], np.float64)
            rel.append(np.linalg.norm(a - b) / max(np.linalg.norm(a), 1e-30))
            top1 += int(np.array_equal(a.reshape(a.shape[0], -1).argmax(-1), b.reshape(b.shape[0], -1).argmax(-1)))
        row["bf16_rel_l2"], row["bf16_top1"] = float(max(rel)), f"{top1}/{opts.trials}"
        row["bf16_units"] = bf16.info["precision_units"]
        runners = {"ort_fp32": lambda: ort_fp32.run(None, feeds), "ort_int8": lambda: ort_int8.run(None, feeds),
                   "tf_fp32": lambda: fp32(*args), "tf_int8": lambda: int8(*args), "tf_bf16": lambda: bf16(*args)}
        for key, path, hint in (("ov_int8", qdq, None), ("ov_default", tmp + "/float.onnx", None)):
            run = openvino_runner(path, hint)
            if run is not None:
                runners[key] = lambda run=run: run(feeds)
        row.update(interleaved_ms(runners, opts.repeat))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None, help=f"default: {' '.join(DEFAULT_MODELS)}")
    parser.add_argument("--onnx", help="a folder of NAME.onnx + NAME.npz (benchmarks/exports/export.py)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs of each, interleaved")
    parser.add_argument("--trials", type=int, default=10, help="random inputs for the bf16 accuracy")
    opts = parser.parse_args(argv)
    from tensorforge.ops import x86_bf16, x86_intrin

    names = opts.models or DEFAULT_MODELS
    print(f"CPU units: {', '.join(sorted(x86_intrin.host_features())) or 'none'}; int8 unit: "
          f"{x86_intrin.int8_unit()}; AVX-512 BF16: {x86_bf16.has_bf16_unit()}; 1 thread; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    rows = [run_model(n, opts) for n in names]
    cols = ["ort_fp32", "ort_int8", "tf_fp32", "tf_int8", "tf_bf16", "ov_int8", "ov_default"]
    print(f"\n{'model':14s}" + "".join(f"{c:>11s}" for c in cols))
    for row in rows:
        cells = "".join(f"{row[c]:9.2f}ms" if c in row else f"{'-':>11s}" for c in cols)
        print(f"{row['model']:14s}{cells}")
    print(f"\n{'model':14s} int8 within 1 step of ORT: optimized / as written (ORT vs itself)   bf16 rel L2 / top-1")
    for row in rows:
        print(f"{row['model']:14s} {100 * row['int8_within_step']:6.2f}% / {100 * row['int8_within_step_plain']:6.2f}% "
              f"({100 * row['ort_self']:6.2f}%)                         {row['bf16_rel_l2']:.2e} / {row['bf16_top1']}")
    for row in rows:
        print(f"  {row['model']}: bf16 products on " + ", ".join(f"{u} x{n}" for u, n in row["bf16_units"].items()))

    def geo(key_a: str, key_b: str) -> float:
        return math.exp(np.mean([math.log(r[key_a] / r[key_b]) for r in rows]))

    print(f"\ngeometric means: tensorforge int8 / ORT int8 = {geo('tf_int8', 'ort_int8'):.2f}; "
          f"ORT fp32 / tensorforge bf16 = {geo('ort_fp32', 'tf_bf16'):.2f}x speedup; "
          f"tensorforge fp32 / tensorforge bf16 = {geo('tf_fp32', 'tf_bf16'):.2f}")
    if all("ov_int8" in r for r in rows):
        print(f"tensorforge int8 / OpenVINO int8 = {geo('tf_int8', 'ov_int8'):.2f}; "
              f"tensorforge bf16 / OpenVINO default = {geo('tf_bf16', 'ov_default'):.2f}")
    else:
        print("OpenVINO is not installed (pip install openvino): its columns are left out")
    return 0


if __name__ == "__main__":
    sys.exit(main())
