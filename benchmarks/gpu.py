"""The paper's GPU figures as one prepared run: tensorforge on an NVIDIA GPU (CUDA through NVRTC
and the driver API) against PyTorch on the same GPU.

    python benchmarks/gpu.py [--target cuda] [--sections models,fig4,fig7,convs] [--repeat 20]
                             [--models resnet18,dqn] [--quick] [--json PATH]

Sections:
- models: the six zoo models (tensorforge.testing.models) compiled for the target, against PyTorch
  eager (cuDNN) and torch.compile on the same architectures (benchmarks/exports/models.py);
- fig4: conv+bn+relu, depthwise+bn+relu and an LSTM cell, fused (opt_level 3) against unfused
  (opt_level 0: one kernel per op, batch norm not folded), the paper's Figure 4;
- fig7: a matmul with and without cooperative shared-memory fetching (the matmul.gpu template's
  `shared` knob, everything else at its default), the paper's Figure 7;
- convs: ResNet-18's conv layers C1-C12 (the paper's Table 2) against cuDNN (torch conv2d); the
  layers compiled as Winograd convs are also timed direct (`-winograd=0`), so `direct/tensorforge`
  above 1 says Winograd pays on that layer.

Every row times a call from NumPy arrays to NumPy arrays on both sides (inputs copied to the
device, outputs back), median of `--repeat` calls after a warm-up, calls of the two sides
interleaved so that a busy machine slows both alike; ratios are peer / tensorforge (above 1:
tensorforge is faster).  Each tensorforge output is checked against the peer (or, without one,
NumPy) before it is timed.  Without a CUDA device the run says so and exits with status 0;
without PyTorch built with CUDA the peer columns read n/a.  `--target opencl` runs the sections
on an OpenCL device (no peer) so the script can be smoke-tested anywhere; `--quick` shrinks every
workload.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import math
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

import numpy as np

HERE = Path(__file__).resolve().parent
SECTIONS = ("models", "fig4", "fig7", "convs")


# -- devices and peers ---------------------------------------------------------------------------
def device_problem(target: str) -> str:
    """Why `target` cannot run here ("" when it can)."""
    kind = target.split()[0]
    if kind == "cuda":
        try:
            from tensorforge.runtime.cuda import device_arch
            device_arch()
        except Exception as err:  # no driver, no device, no cuda-python
            return str(err)
        return ""
    if kind == "opencl":
        try:
            import pyopencl as cl

            from tensorforge.runtime.opencl import pick_device
            cl.Program(cl.Context([pick_device()]), "__kernel void k(__global float* a) { a[0] = 1.0f; }").build()
        except Exception as err:  # no pyopencl, no platform, or a compiler that cannot build
            return f"no usable OpenCL device: {err}"
        return ""
    return f"target kind {kind!r} is not a GPU target; use cuda or opencl"


def torch_cuda(target: str):
    """PyTorch when it can run on the CUDA device of a cuda target, else None (peers n/a)."""
    if not target.startswith("cuda"):
        return None
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def interleaved(fns: dict[str, Callable], repeat: int) -> dict[str, float]:
    """Median seconds per call of each callable, one call of each per round after a warm-up."""
    for fn in fns.values():
        fn()
    times: dict[str, list] = {k: [] for k in fns}
    for _ in range(repeat):
        for k, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def _torch_call(torch, fn: Callable, arrays: list) -> Callable:
    """A call of `fn` on the CUDA device from NumPy arrays to NumPy arrays (as tensorforge's)."""
    def run():
        with torch.no_grad():
            out = fn(*[torch.from_numpy(a).cuda() for a in arrays])
        outs = out if isinstance(out, (tuple, list)) else (out,)
        return [o.cpu().numpy() for o in outs]
    return run


def _close(got, want, what: str, tol: float = 2e-3) -> None:
    for g, w in zip(got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        scale = max(1.0, float(np.abs(w).max(initial=0.0)))
        if g.shape != w.shape or not np.allclose(g, w, rtol=tol, atol=tol * scale):
            raise SystemExit(f"{what}: tensorforge's output differs from the reference; not timing it")


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _row(section: str, name: str, times: dict, base: str, note: str = "") -> dict:
    row = {"section": section, "name": name, "ms": {k: v * 1e3 for k, v in times.items()}, "note": note}
    row["ratio"] = {k: v / times[base] for k, v in times.items() if k != base}
    cells = "  ".join(f"{k} {v * 1e3:9.3f} ms" for k, v in times.items())
    ratios = "  ".join(f"{k}/{base} {r:6.2f}" for k, r in row["ratio"].items())
    print(f"{section:7s} {name:22s} {cells}  {ratios}  {note}", flush=True)
    return row


# -- sections ------------------------------------------------------------------------------------
def bench_models(target: str, names: list[str], repeat: int, torch) -> list[dict]:
    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models as zoo
    rows = []
    exports = _load("tf_export_models", HERE / "exports" / "models.py") if torch is not None else None
    for name in names:
        onnx_model, feeds = zoo.get(name)
        model = tensorforge.compile(from_onnx(onnx_model), target=target)
        arrays = [feeds[n] for n in model.input_names]
        fns: dict[str, Callable] = {"tensorforge": lambda m=model, a=arrays: m(*a)}
        note = "peers n/a (no PyTorch with CUDA)"
        if torch is not None and exports is not None:
            module, tfeeds = exports.get(name, seed=0)
            module = module.cuda()
            targs = [tfeeds[n] for n in exports.input_names(name)]
            fns["torch_eager"] = _torch_call(torch, module, targs)
            try:
                compiled = torch.compile(module)
                fns["torch_compile"] = _torch_call(torch, compiled, targs)
                note = ""
            except Exception as err:  # torch.compile needs a working inductor toolchain
                note = f"torch.compile n/a: {str(err).splitlines()[0]}"
        rows.append(_row("models", name, interleaved(fns, repeat), "tensorforge", note))
    return rows


def _graph_conv_bn_relu(c: int, hw: int, depthwise: bool, rng) -> tuple:
    from tensorforge.graph.builder import GraphBuilder
    b = GraphBuilder("dw_bn_relu" if depthwise else "conv_bn_relu")
    x = b.input("x", (1, c, hw, hw), "float32")
    w = rng.standard_normal((c, 1 if depthwise else c, 3, 3)).astype("float32") * (0.3 if depthwise else 0.05)
    op = "depthwise_conv2d" if depthwise else "conv2d"
    y = b.add1(op, [x, b.const(w, "w")], {"padding": (1, 1, 1, 1)})
    bn = [(rng.random(c) + 0.5).astype("float32"), rng.standard_normal(c).astype("float32"),
          rng.standard_normal(c).astype("float32") * 0.1, (rng.random(c) + 0.5).astype("float32")]
    y = b.add1("batch_norm", [y, *[b.const(a, f"bn{k}") for k, a in enumerate(bn)]])
    y = b.add1("relu", [y])
    return b.finish([y]), [rng.standard_normal((1, c, hw, hw)).astype("float32")]


def _graph_lstm_cell(hidden: int, rng) -> tuple:
    """One LSTM step from primitive ops: gates = x W + h R + b, split in four, the cell update."""
    from tensorforge.graph.builder import GraphBuilder
    b = GraphBuilder("lstm_cell")
    x = b.input("x", (1, hidden), "float32")
    h = b.input("h", (1, hidden), "float32")
    c = b.input("c", (1, hidden), "float32")
    scale = 1 / math.sqrt(hidden)
    w = b.const((rng.standard_normal((hidden, 4 * hidden)) * scale).astype("float32"), "W")
    r = b.const((rng.standard_normal((hidden, 4 * hidden)) * scale).astype("float32"), "R")
    bias = b.const(rng.standard_normal(4 * hidden).astype("float32") * 0.1, "bias")
    gates = b.add1("add", [b.add1("add", [b.add1("matmul", [x, w]), b.add1("matmul", [h, r])]), bias])

    def part(k: int):
        return b.add1("slice", [gates], {"starts": (k * hidden,), "ends": ((k + 1) * hidden,), "axes": (1,),
                                         "steps": (1,)})
    i, f = b.add1("sigmoid", [part(0)]), b.add1("sigmoid", [part(1)])
    g, o = b.add1("tanh", [part(2)]), b.add1("sigmoid", [part(3)])
    c2 = b.add1("add", [b.add1("mul", [f, c]), b.add1("mul", [i, g])])
    h2 = b.add1("mul", [o, b.add1("tanh", [c2])])
    arrays = [rng.standard_normal((1, hidden)).astype("float32") for _ in range(3)]
    return b.finish([h2, c2]), arrays


def bench_fig4(target: str, repeat: int, quick: bool) -> list[dict]:
    import tensorforge
    rng = np.random.default_rng(0)
    cases = {
        "conv+bn+relu": _graph_conv_bn_relu(16 if quick else 128, 8 if quick else 28, False, rng),
        "depthwise+bn+relu": _graph_conv_bn_relu(16 if quick else 256, 8 if quick else 28, True, rng),
        "lstm_cell": _graph_lstm_cell(32 if quick else 650, rng),
    }
    rows = []
    for name, (graph, arrays) in cases.items():
        fused = tensorforge.compile(graph, target=target, opt_level=3)
        unfused = tensorforge.compile(graph, target=target, opt_level=0)
        _close(fused(*arrays), unfused(*arrays), f"fig4 {name}")
        kernels = [sum(s["kind"] == "kernel" for s in m.spec.steps) for m in (fused, unfused)]
        times = interleaved({"fused": lambda m=fused, a=arrays: m(*a), "unfused": lambda m=unfused, a=arrays: m(*a)},
                            repeat)
        rows.append(_row("fig4", name, times, "fused", f"kernels {kernels[0]} fused, {kernels[1]} unfused"))
    return rows


def _matmul_module(n: int, target: str, shared: bool):
    """The matmul.gpu template's schedule of an n x n x n matmul, `shared` set, other knobs default."""
    import tensorforge
    from tensorforge import te
    from tensorforge.ops.schedules.gpu_tiled import matmul
    from tensorforge.target import Target
    from tensorforge.te.space import ConfigSpace

    def build(cfg):
        A = te.placeholder((n, n), name="A")
        B = te.placeholder((n, n), name="B")
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
        s = te.create_schedule(C.op)
        matmul(s, [C], [C], Target.parse(target), cfg)
        return s, [A, B, C]

    space = ConfigSpace()
    build(space)
    values = space.default_config().to_json()
    values["shared"] = shared
    s, args = build(space.from_json(values))
    return tensorforge.build(s, args, target=target)


def bench_fig7(target: str, repeat: int, quick: bool) -> list[dict]:
    n = 64 if quick else 1024
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)).astype("float32"), rng.standard_normal((n, n)).astype("float32")
    fns = {}
    for shared in (True, False):
        f = _matmul_module(n, target, shared)
        c = np.full((n, n), np.nan, "float32")
        f(a, b, c)
        _close([c], [a @ b], f"fig7 shared={shared}")
        fns["shared" if shared else "no_shared"] = (lambda f=f, c=c: f(a, b, c))
    return [_row("fig7", f"matmul {n}", interleaved(fns, repeat), "shared")]


def bench_convs(target: str, repeat: int, quick: bool, torch) -> list[dict]:
    import tensorforge
    from tensorforge.frontend import from_onnx
    ops = _load("tf_bench_ops", HERE / "ops.py")
    rows = []
    for name, layer in ops.LAYERS.items():
        if layer.kind != "conv":
            continue
        if quick and name not in ("C6", "C12"):
            continue
        work = ops.make_workload(layer, np.random.default_rng(0))
        model = tensorforge.compile(from_onnx(work.model), target=target)
        x = work.feeds["x"]
        fns: dict[str, Callable] = {"tensorforge": lambda m=model, x=x: m(x)}
        if "wino_m" in model.source:
            direct = tensorforge.compile(from_onnx(work.model), target=f"{target} -winograd=0")
            fns["direct"] = lambda m=direct, x=x: m(x)
            _close(fns["direct"](), fns["tensorforge"](), f"convs {name} direct")
        if torch is not None:
            w = torch.from_numpy(work.weight).cuda()
            fns["cudnn"] = _torch_call(torch, lambda t, layer=layer, w=w: torch.nn.functional.conv2d(
                t, w, stride=layer.s, padding=layer.k // 2), [x])
            _close(fns["tensorforge"](), fns["cudnn"](), f"convs {name}")
        else:
            from tensorforge.ops import registry
            pad = layer.k // 2
            want = registry.get("conv2d").run_reference([x, work.weight], {
                "strides": (layer.s, layer.s), "padding": (pad,) * 4})
            _close(fns["tensorforge"](), want, f"convs {name}")
        rows.append(_row("convs", f"{name} {layer.shape()}", interleaved(fns, repeat), "tensorforge",
                         "" if torch is not None else "cudnn n/a (no PyTorch with CUDA)"))
    return rows


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", default="cuda", help="cuda (default; the device's architecture) or opencl")
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--models", default="", help="comma-separated zoo models (default: all six)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="the smallest sizes (a smoke run)")
    ap.add_argument("--json", default="", help="also write the rows here")
    args = ap.parse_args(argv)
    sections = [s for s in args.sections.split(",") if s]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {', '.join(SECTIONS)}")
    target = args.target
    problem = device_problem(target)
    if problem:
        print(f"benchmarks/gpu.py: nothing to measure on target {target!r}: {problem}")
        return 0
    if target == "cuda":
        from tensorforge.runtime.cuda import device_arch
        target = f"cuda -arch={device_arch()}"
    torch = torch_cuda(target)
    from tensorforge.testing import models as zoo
    names = [n for n in args.models.split(",") if n] or (["dqn"] if args.quick else list(zoo.NAMES))
    device = torch.cuda.get_device_name(0) if torch is not None else target
    print(f"# tensorforge GPU benchmark: target {target}, device {device}, host {platform.node()}, "
          f"PyTorch {'%s' % torch.__version__ if torch is not None else 'n/a'}", flush=True)
    rows: list[dict] = []
    start = time.perf_counter()
    if "models" in sections:
        rows += bench_models(target, names, args.repeat, torch)
    if "fig4" in sections:
        rows += bench_fig4(target, args.repeat, args.quick)
    if "fig7" in sections:
        rows += bench_fig7(target, args.repeat, args.quick)
    if "convs" in sections:
        rows += bench_convs(target, args.repeat, args.quick, torch)
    eager = [r["ratio"]["torch_eager"] for r in rows if r["section"] == "models" and "torch_eager" in r["ratio"]]
    fused = [r["ratio"]["unfused"] for r in rows if r["section"] == "fig4"]
    summary = {"models_geomean_eager_over_tensorforge": geomean(eager) if eager else None,
               "fig4_geomean_unfused_over_fused": geomean(fused) if fused else None,
               "seconds": time.perf_counter() - start}
    print(f"# summary: {json.dumps(summary)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"target": target, "device": device, "rows": rows,
                                               "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
