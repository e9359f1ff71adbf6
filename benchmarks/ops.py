"""Single operators: tensorforge against ONNX Runtime and PyTorch, interleaved in one run, batch 1,
fp32, each also as a fraction of the machine's measured FMA peak (benchmarks/fma_peak.c).

The layers are the single-kernel workloads of the TVM paper (Chen et al., OSDI 2018, Table 2):
every conv2d of ResNet-18 (C1-C12) and every depthwise conv2d of MobileNet (D1-D9), plus the
ResNet-18 classifier (dense 1x512 -> 1000) and a 1024^3 GEMM.

    python benchmarks/ops.py [--layers C1,C5,D3,dense,gemm] [--threads 1,2] [--repeat 20] [--json PATH]

Each layer is a one-node ONNX model (Conv with pads and no bias; depthwise Conv with group = C;
Gemm with transB for dense; MatMul of two inputs for GEMM), compiled with
`tensorforge.compile(from_onnx(model), target="c -mcpu=native")`, so the graph passes, layouts
and templates of real models apply; a layer's time therefore includes the layout changes at the
edges of a one-op graph (NCHW in and out).  ONNX Runtime runs the same model (intra_op_num_threads
= threads, sequential execution); PyTorch runs torch.nn.functional.conv2d / linear and
torch.matmul with torch.set_num_threads(threads).  Every tensorforge (and PyTorch) output is
checked against ONNX Runtime before timing.

A conv layer is also timed as it runs inside a model ("blocked"): its input in the blocked
layout NCHW[b]c the layer before it writes (the stem conv C1 reads the image), its output left
blocked for the next layer, so no layout change at either edge; the same conv2d_nchwc kernel, and
the Winograd form for 3x3 stride-1 convs, as in ResNet-18 (with 16 vector registers C10, 7 output
columns, is a GEMM on its windows there, with a layout change in: timed so too).  Its "%peak" is
that kernel's share of the FMA peak; a one-node graph's NCHW edges cost a 1x1 conv a large part
of its time.

Timing: each sample starts after a short pause (PARK_S: the other runtimes' spinning workers go
to sleep), then is a warm-up call and then enough calls to last about 20 ms, timed together;
the three runtimes take turns sample by sample (the order rotates), and each reports the median
of `--repeat` samples.  Small layers (D7-D9, dense) therefore include each runtime's per-call
overhead, as a model would.  `tf/ort` is tensorforge's GFLOP/s over ONNX Runtime's: above 1 means
tensorforge is faster.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Callable

import _peak  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)
import numpy as np  # noqa: E402

SAMPLE_SECONDS = 20e-3   # a sample repeats the call until it lasts about this long (a thread pool that
                         # slept while the other runtimes ran wakes within its first calls)
# before each sample: the runtime timed before it leaves its worker threads spinning for a while
# (ONNX Runtime's intra-op pool, PyTorch's OpenMP), and a runtime timed while they hold the
# cores gets no second thread (tensorforge's pool then runs a 2-thread loop on its caller
# alone); after this pause they sleep, so each runtime's sample starts on idle cores
PARK_S = 0.02
TARGET = "c -mcpu=native"
OPSET = 17


@dataclass(frozen=True)
class Layer:
    """One workload.  conv / depthwise: input hw x hw with ic channels, oc filters of k x k,
    stride s, padding k // 2.  dense: (1, ic) x (ic, oc).  gemm: (hw, ic) x (ic, oc)."""
    name: str
    kind: str        # "conv", "depthwise", "dense", "gemm"
    hw: int
    ic: int
    oc: int
    k: int = 1
    s: int = 1

    @property
    def out_hw(self) -> int:
        return (self.hw + 2 * (self.k // 2) - self.k) // self.s + 1

    @property
    def flops(self) -> float:
        """Multiply-adds x 2."""
        if self.kind == "conv":
            return 2.0 * self.oc * self.out_hw ** 2 * self.ic * self.k * self.k
        if self.kind == "depthwise":
            return 2.0 * self.oc * self.out_hw ** 2 * self.k * self.k
        rows = 1 if self.kind == "dense" else self.hw
        return 2.0 * rows * self.ic * self.oc

    def shape(self) -> str:
        if self.kind == "conv":
            return f"{self.hw}x{self.hw} {self.ic}->{self.oc} k{self.k} s{self.s}"
        if self.kind == "depthwise":
            return f"{self.hw}x{self.hw} c{self.ic} k{self.k} s{self.s} dw"
        if self.kind == "dense":
            return f"1x{self.ic} x {self.ic}x{self.oc}"
        return f"{self.hw}x{self.ic} x {self.ic}x{self.oc}"


def _table2() -> dict[str, Layer]:
    # TVM paper, Table 2: H/W, IC, OC, K, S.  Depthwise layers have a channel multiplier of 1.
    conv = [(224, 3, 64, 7, 2), (56, 64, 64, 3, 1), (56, 64, 64, 1, 1), (56, 64, 128, 3, 2),
            (56, 64, 128, 1, 2), (28, 128, 128, 3, 1), (28, 128, 256, 3, 2), (28, 128, 256, 1, 2),
            (14, 256, 256, 3, 1), (14, 256, 512, 3, 2), (14, 256, 512, 1, 2), (7, 512, 512, 3, 1)]
    depthwise = [(112, 32, 3, 1), (112, 64, 3, 2), (56, 128, 3, 1), (56, 128, 3, 2), (28, 256, 3, 1),
                 (28, 256, 3, 2), (14, 512, 3, 1), (14, 512, 3, 2), (7, 1024, 3, 1)]
    layers = [Layer(f"C{i + 1}", "conv", hw, ic, oc, k, s) for i, (hw, ic, oc, k, s) in enumerate(conv)]
    layers += [Layer(f"D{i + 1}", "depthwise", hw, c, c, k, s) for i, (hw, c, k, s) in enumerate(depthwise)]
    layers += [Layer("dense", "dense", 1, 512, 1000), Layer("gemm", "gemm", 1024, 1024, 1024)]
    return {layer.name: layer for layer in layers}


LAYERS = _table2()


# -- the workload as arrays, as an ONNX model, and as PyTorch calls --------------------------------
@dataclass
class Workload:
    feeds: dict            # ONNX input name -> array
    weight: np.ndarray | None
    model: object          # onnx.ModelProto


def make_workload(layer: Layer, rng: np.random.Generator) -> Workload:
    """Random inputs in [-1, 1), weights scaled by 1/sqrt(fan-in) (outputs stay near 1), and the
    one-node ONNX model computing the layer."""
    from onnx import TensorProto, helper, numpy_helper

    def uniform(shape, scale=1.0):
        return (rng.uniform(-1.0, 1.0, shape) * scale).astype(np.float32)

    inits = []
    if layer.kind in ("conv", "depthwise"):
        group = layer.ic if layer.kind == "depthwise" else 1
        wshape = (layer.oc, layer.ic // group, layer.k, layer.k)
        weight = uniform(wshape, 1 / math.sqrt(wshape[1] * layer.k * layer.k))
        feeds = {"x": uniform((1, layer.ic, layer.hw, layer.hw))}
        out_shape = [1, layer.oc, layer.out_hw, layer.out_hw]
        pad = layer.k // 2
        node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[layer.k, layer.k],
                                strides=[layer.s, layer.s], pads=[pad] * 4, group=group)
        inits.append(numpy_helper.from_array(weight, "w"))
    elif layer.kind == "dense":                   # the classifier: x (1, ic), W (oc, ic), y = x W^T
        weight = uniform((layer.oc, layer.ic), 1 / math.sqrt(layer.ic))
        feeds = {"x": uniform((1, layer.ic))}
        out_shape = [1, layer.oc]
        node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
        inits.append(numpy_helper.from_array(weight, "w"))
    else:                                         # gemm: both operands are inputs
        weight = None
        feeds = {"x": uniform((layer.hw, layer.ic)), "b": uniform((layer.ic, layer.oc))}
        out_shape = [layer.hw, layer.oc]
        node = helper.make_node("MatMul", ["x", "b"], ["y"])
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(a.shape)) for n, a in feeds.items()]
    output = helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph([node], layer.name, inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    return Workload(feeds, weight, model)


def blocked_model(layer: Layer, work: Workload):
    """(compiled model, its input) of a conv layer as it runs between the other layers of a
    model: its input in the blocked layout the layer before it writes (NCHW[b]c; the image itself
    for a stem conv, whose few channels do not fill a block), its output left blocked for the
    layer after it, no layout change at either edge (except for a conv the compiler leaves out
    of the blocked layout, which runs as in the model).  None for other kinds of layers."""
    if layer.kind != "conv":
        return None
    import tensorforge
    from tensorforge.graph.builder import GraphBuilder
    from tensorforge.graph.passes.alter_layout import block_for
    from tensorforge.graph.pipeline import optimize
    from tensorforge.ops.nn_conv_nchwc import blocked_layout, pack_weight, to_nchwc
    from tensorforge.target import Target

    target = Target.parse(TARGET)
    x = work.feeds["x"]
    half = max(target.simd_lanes("float32") // 2, 1)
    b = GraphBuilder(f"{layer.name}_blocked")
    attrs = {"strides": (layer.s, layer.s), "padding": (layer.k // 2,) * 4, "dilations": (1, 1)}
    if layer.ic % half == 0:
        bi = block_for(layer.ic, "float32", target)
        x = to_nchwc(x, bi)
        attrs["data_layout"] = blocked_layout(bi)
    block_out = block_for(layer.oc, "float32", target)
    if "data_layout" in attrs:
        # what the compiler makes of the layer between blocked neighbours: a conv it leaves out
        # of the blocked layout (with 16 registers, a stride-2 conv with 7 output columns is a
        # GEMM on its windows) runs as in the model, a layout change in and its epilogue out
        # (the graph passes decide; only such a layer is compiled so)
        g = GraphBuilder(f"{layer.name}_between")
        gin = g.input("x", x.shape, "float32")
        y = g.add1("conv2d", [g.add1("nchwc_to_nchw", [gin]), g.const(work.weight, "w")],
                   {k: v for k, v in attrs.items() if k != "data_layout"})
        between = g.finish([g.add1("nchw_to_nchwc", [y], {"block": block_out})])
        if not any(n.op.startswith("conv2d") for n in optimize(between, target).nodes):
            return tensorforge.compile(between, target=TARGET), x
    xin = b.input("x", x.shape, "float32")
    w = b.const(pack_weight(work.weight, block_out), "w")
    model = tensorforge.compile(b.finish([b.add1("conv2d_nchwc", [xin, w], attrs)]), target=TARGET)
    return model, x


def torch_call(torch, layer: Layer, work: Workload) -> Callable:
    """A no-argument callable running the layer in PyTorch on the same arrays."""
    F = torch.nn.functional
    xs = {n: torch.from_numpy(a) for n, a in work.feeds.items()}
    w = torch.from_numpy(work.weight) if work.weight is not None else None
    x = xs["x"]
    if layer.kind in ("conv", "depthwise"):
        group = layer.ic if layer.kind == "depthwise" else 1
        return lambda: F.conv2d(x, w, stride=layer.s, padding=layer.k // 2, groups=group)
    if layer.kind == "dense":
        return lambda: F.linear(x, w)
    b = xs["b"]
    return lambda: torch.matmul(x, b)


def import_torch():
    """PyTorch, or None (its column is skipped).

    PyTorch's libgomp spins about 0.2 s after each parallel region by default, which in this
    interleaved benchmark takes a core from the runtime timed next (tensorforge's pool then runs
    a 2-thread loop on its caller alone); unless the environment chose an OpenMP wait policy, its
    workers spin briefly (GOMP_SPINCOUNT=3000, about 0.1 ms) and then sleep, as in e2e.py."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["GOMP_SPINCOUNT"] = "3000"
    try:
        import torch
    except ImportError:
        return None
    return torch


# -- timing ----------------------------------------------------------------------------------------
def sample_seconds(fn: Callable, number: int) -> float:
    """Seconds per call over `number` calls, after one untimed call."""
    fn()
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


def interleaved_medians(fns: dict[str, Callable], repeat: int) -> dict[str, float]:
    """Median seconds per call for each runtime; the runtimes take turns sample by sample."""
    single = min(sample_seconds(fn, 1) for fn in fns.values())
    number = max(1, min(1000, math.ceil(SAMPLE_SECONDS / max(single, 1e-7))))
    names = list(fns)
    samples = {n: [] for n in names}
    for r in range(repeat):
        for n in names[r % len(names):] + names[:r % len(names)]:   # rotate who goes first
            time.sleep(PARK_S)
            samples[n].append(sample_seconds(fns[n], number))
    return {n: statistics.median(s) for n, s in samples.items()}


# -- one layer -------------------------------------------------------------------------------------
@dataclass
class Row:
    layer: str
    shape: str
    threads: int
    gflop: float
    compile_s: float
    tf_gflops: float
    ort_gflops: float
    torch_gflops: float | None
    peak_gflops: float
    tf_blocked_gflops: float | None = None

    @property
    def tf_over_ort(self) -> float:
        return self.tf_gflops / self.ort_gflops

    @property
    def tf_over_torch(self) -> float | None:
        return self.tf_gflops / self.torch_gflops if self.torch_gflops else None

    @property
    def tf_pct_peak(self) -> float:
        return 100.0 * self.tf_gflops / self.peak_gflops

    @property
    def blocked_pct_peak(self) -> float | None:
        return 100.0 * self.tf_blocked_gflops / self.peak_gflops if self.tf_blocked_gflops else None

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(tf_over_ort=self.tf_over_ort, tf_over_torch=self.tf_over_torch,
                 tf_pct_peak=self.tf_pct_peak, tf_blocked_pct_peak=self.blocked_pct_peak,
                 ort_pct_peak=100.0 * self.ort_gflops / self.peak_gflops,
                 torch_pct_peak=100.0 * self.torch_gflops / self.peak_gflops if self.torch_gflops else None)
        return d


def run_layer(layer: Layer, thread_counts: list[int], repeat: int, peak: _peak.FmaPeak, torch,
              rng: np.random.Generator) -> list[Row]:
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.ops.nn_conv_nchwc import to_nchw
    from tensorforge.runtime.module import set_num_threads

    work = make_workload(layer, rng)
    start = time.perf_counter()
    model = tensorforge.compile(from_onnx(work.model), target=TARGET)
    compile_s = time.perf_counter() - start
    inputs = [work.feeds[n] for n in model.input_names]
    blocked = blocked_model(layer, work)
    rows = []
    for threads in thread_counts:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(work.model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        set_num_threads(threads)
        expected = sess.run(None, work.feeds)[0]
        np.testing.assert_allclose(model(*inputs)[0], expected, rtol=1e-3, atol=1e-3,
                                   err_msg=f"{layer.name}: tensorforge differs from ONNX Runtime")
        fns = {"tf": lambda: model(*inputs)}
        if blocked is not None:
            bmodel, bx = blocked
            np.testing.assert_allclose(to_nchw(bmodel(bx)[0]), expected, rtol=1e-3, atol=1e-3,
                                       err_msg=f"{layer.name}: the blocked layer differs from ONNX Runtime")
            fns["tf_blocked"] = lambda bmodel=bmodel, bx=bx: bmodel(bx)
        # after tensorforge's: ONNX Runtime's workers keep spinning well past the pause (PARK_S),
        # so whatever runs right after it in most rounds finds one core taken
        fns["ort"] = lambda sess=sess: sess.run(None, work.feeds)
        with torch.inference_mode() if torch is not None else contextlib.nullcontext():
            if torch is not None:
                torch.set_num_threads(threads)
                fns["torch"] = torch_call(torch, layer, work)
                np.testing.assert_allclose(fns["torch"]().numpy(), expected, rtol=1e-3, atol=1e-3,
                                           err_msg=f"{layer.name}: PyTorch differs from ONNX Runtime")
            seconds = interleaved_medians(fns, repeat)
        gflops = {n: layer.flops / s / 1e9 for n, s in seconds.items()}
        rows.append(Row(layer.name, layer.shape(), threads, layer.flops / 1e9, compile_s,
                        gflops["tf"], gflops["ort"], gflops.get("torch"), peak.gflops[threads],
                        gflops.get("tf_blocked")))
    return rows


# -- report ----------------------------------------------------------------------------------------
HEADER = (f"{'layer':6s} {'T':>2s} {'shape':24s} {'tf':>7s} {'ort':>7s} {'torch':>7s} "
          f"{'tf/ort':>7s} {'tf %peak':>8s} {'blocked':>7s} {'%peak':>6s}")


def format_row(r: Row) -> str:
    torch_text = f"{r.torch_gflops:7.1f}" if r.torch_gflops is not None else f"{'-':>7s}"
    blocked = (f" {r.tf_blocked_gflops:7.1f} {r.blocked_pct_peak:5.1f}%" if r.tf_blocked_gflops
               else f" {'-':>7s} {'-':>6s}")
    return (f"{r.layer:6s} {r.threads:2d} {r.shape:24s} {r.tf_gflops:7.1f} {r.ort_gflops:7.1f} "
            f"{torch_text} {r.tf_over_ort:7.2f} {r.tf_pct_peak:7.1f}%{blocked}")


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


GROUPS = {
    "3x3 conv2d": lambda layer: layer.kind == "conv" and layer.k == 3,
    "conv2d C1-C12": lambda layer: layer.kind == "conv",
    "depthwise": lambda layer: layer.kind == "depthwise",
    "all layers": lambda layer: True,
}


def summary(rows: list[Row]) -> list[dict]:
    """Geometric means of tf/ort (and tf/torch) per group of layers and thread count."""
    out = []
    for threads in sorted({r.threads for r in rows}):
        for group, member in GROUPS.items():
            sel = [r for r in rows if r.threads == threads and member(LAYERS[r.layer])]
            if not sel:
                continue
            torch_ratios = [r.tf_over_torch for r in sel if r.tf_over_torch is not None]
            out.append({"group": group, "threads": threads, "layers": [r.layer for r in sel],
                        "tf_over_ort": geomean([r.tf_over_ort for r in sel]),
                        "tf_over_torch": geomean(torch_ratios) if len(torch_ratios) == len(sel) else None,
                        "tf_pct_peak": geomean([r.tf_pct_peak for r in sel]),
                        "blocked_pct_peak": geomean([r.blocked_pct_peak for r in sel])
                        if all(r.blocked_pct_peak for r in sel) else None})
    return out


def machine() -> str:
    """The CPU, as /proc/cpuinfo names it, and the core count."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        model = names[0] if names else model
    except OSError:
        pass
    return f"{platform.machine()} {model}, {os.cpu_count()} cores"


def write_json(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def parse_layers(text: str) -> list[Layer]:
    by_lower = {name.lower(): layer for name, layer in LAYERS.items()}
    chosen = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        if name.lower() not in by_lower:
            raise SystemExit(f"unknown layer {name!r}; layers are {', '.join(LAYERS)}")
        chosen.append(by_lower[name.lower()])
    return chosen


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", default=",".join(LAYERS), help="comma-separated subset, e.g. C1,C5,D3,gemm")
    ap.add_argument("--threads", default="1", help="comma-separated thread counts, e.g. 1,2")
    ap.add_argument("--repeat", type=int, default=20, help="timed samples per runtime (median)")
    ap.add_argument("--json", metavar="PATH", help="also write the numbers as JSON")
    opts = ap.parse_args(argv)
    layers = parse_layers(opts.layers)
    try:
        thread_counts = [int(t) for t in opts.threads.split(",")]
    except ValueError:
        raise SystemExit(f"--threads expects comma-separated integers, got {opts.threads!r}") from None
    if opts.repeat < 1 or any(t < 1 for t in thread_counts):
        raise SystemExit("--repeat and --threads must be positive")
    try:
        import onnxruntime as ort
    except ImportError:
        raise SystemExit("benchmarks/ops.py needs onnxruntime (pip install -e .[dev])") from None

    torch = import_torch()
    peak = _peak.measure(thread_counts)
    print(f"machine: {machine()}")
    print(peak.describe())
    if _peak.scaling_warning(peak):
        print(_peak.scaling_warning(peak))
    versions = f"onnxruntime {ort.__version__}, " + (f"torch {torch.__version__}" if torch else
                                                      "torch not installed (its column is skipped)")
    print(f"{versions}; tensorforge target {TARGET!r}; OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')} GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '-')}")
    print(f"GFLOP/s, batch 1, fp32, median of {opts.repeat} samples; tf/ort > 1: tensorforge is faster")
    print(HEADER, flush=True)
    rng = np.random.default_rng(0)
    rows: list[Row] = []
    for layer in layers:
        for row in run_layer(layer, thread_counts, opts.repeat, peak, torch, rng):
            rows.append(row)
            print(format_row(row), flush=True)
    lines = summary(rows)
    for s in lines:
        torch_text = f", tf/torch {s['tf_over_torch']:.2f}" if s["tf_over_torch"] is not None else ""
        print(f"geometric mean, {s['group']} ({len(s['layers'])}), {s['threads']} thread(s): "
              f"tf/ort {s['tf_over_ort']:.2f}{torch_text}, tf {s['tf_pct_peak']:.1f}% of peak"
              + (f" ({s['blocked_pct_peak']:.1f}% blocked)" if s["blocked_pct_peak"] else ""))
    if opts.json:
        write_json(opts.json, {
            "machine": machine(), "target": TARGET, "repeat": opts.repeat,
            "onnxruntime": ort.__version__, "torch": torch.__version__ if torch else None,
            "peak": {"vector_bits": peak.vector_bits, "chains": peak.chains,
                     "gflops": {str(t): g for t, g in peak.gflops.items()}},
            "rows": [r.to_json() for r in rows], "summary": lines})
        print(f"wrote {opts.json}")


if __name__ == "__main__":
    sys.exit(main())
