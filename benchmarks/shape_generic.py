"""Stretches on shape-generic kernels (tensorforge/shape_generic.py) against one specialization
per shape (`compile(..., shape_generic=False)`), and the generic kernels against kernels
compiled for one size.

    python benchmarks/shape_generic.py [--calls 20] [--threads 1,2] [--repeat 30]

1. Data-dependent rows: a detector-style tail, the rows of a (1000, 6) box table whose score
   passes a threshold (NonZero + Gather: a new count nearly every call), then boxes scaled and
   clipped, scores through a sigmoid, a sum per box and a mean over them.  Each of `--calls`
   calls gets a new random table; the table gives the seconds of every call (compiles
   included) with and without shape-generic stretches, and the outputs are compared with ONNX
   Runtime on every call.
2. Kernel speed: three element-wise/reduction stretches over 2^20 float32 values with a
   symbolic first dimension (sigmoid(2x) + x over rows of 256; the same with a sum per row of
   64; a 1-D vector and its sum), run on their generic kernels and on a model compiled for that
   one shape, medians of `--repeat` interleaved calls at each thread count, with the machine's
   FMA peak (benchmarks/_peak.py) for reference.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _tail_model():
    from onnx import TensorProto, helper
    f = TensorProto.FLOAT
    nodes = [
        helper.make_node("Gather", ["boxes", "col4"], ["score"], axis=1),
        helper.make_node("Greater", ["score", "thresh"], ["keep"]),
        helper.make_node("NonZero", ["keep"], ["idx2"]),
        helper.make_node("Squeeze", ["idx2", "ax0"], ["idx"]),
        helper.make_node("Gather", ["boxes", "idx"], ["kept"], axis=0),
        helper.make_node("Mul", ["kept", "scale"], ["scaled"]),
        helper.make_node("Clip", ["scaled", "lo", "hi"], ["clipped"]),
        helper.make_node("Sigmoid", ["clipped"], ["prob"]),
        helper.make_node("ReduceSum", ["prob", "ax1"], ["per_box"], keepdims=0),
        helper.make_node("ReduceMean", ["per_box"], ["mean"], axes=[0], keepdims=0),
    ]
    inits = [helper.make_tensor("col4", TensorProto.INT64, [], [4]), helper.make_tensor("thresh", f, [], [0.3]),
             helper.make_tensor("ax0", TensorProto.INT64, [1], [0]), helper.make_tensor("ax1", TensorProto.INT64, [1], [1]),
             helper.make_tensor("scale", f, [6], [640, 480, 640, 480, 1, 1]),
             helper.make_tensor("lo", f, [], [0.0]), helper.make_tensor("hi", f, [], [600.0])]
    g = helper.make_graph(nodes, "tail", [helper.make_tensor_value_info("boxes", f, [1000, 6])],
                          [helper.make_tensor_value_info("clipped", f, None), helper.make_tensor_value_info("per_box", f, None),
                           helper.make_tensor_value_info("mean", f, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def data_dependent(calls: int) -> None:
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    model = _tail_model()
    sess = ort.InferenceSession(model.SerializeToString())
    rng = np.random.default_rng(0)
    tables = [rng.random((1000, 6)).astype("float32") for _ in range(calls)]
    runs = {}
    for generic in (True, False):
        compiled = tensorforge.compile(from_onnx(model), shape_generic=generic, progress=False)
        seconds = []
        for t in tables:
            began = time.perf_counter()
            got = compiled(t)
            seconds.append(time.perf_counter() - began)
            for a, b in zip(got, sess.run(None, {"boxes": t})):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
        runs[generic] = (seconds, compiled.info)
    counts = [int((t[:, 4] > 0.3).sum()) for t in tables]
    print(f"1. data-dependent rows: {calls} calls, rows kept {min(counts)}-{max(counts)} "
          f"({len(set(counts))} distinct counts); outputs match ONNX Runtime (rtol/atol 1e-4) on every call")
    print(f"{'call':>4} {'rows':>5} {'shape-generic s':>16} {'per shape s':>12}")
    for k, n in enumerate(counts):
        print(f"{k:4d} {n:5d} {runs[True][0][k]:16.4f} {runs[False][0][k]:12.4f}")
    for generic in (True, False):
        seconds, info = runs[generic]
        print(f"{'shape-generic' if generic else 'per shape':>13}: total {sum(seconds):.2f} s, "
              f"median call {np.median(seconds) * 1e3:.2f} ms, {info['specializations']} specializations, "
              f"{info['shape_generic']['stretches']} generic stretch(es)")


def _stretch_model(kind: str, symbolic: bool, rows: int):
    from onnx import TensorProto, helper
    f = TensorProto.FLOAT
    width = {"rows256": [256], "rows64": [64], "vector": []}[kind]
    dims = (["n"] if symbolic else [rows]) + width
    nodes = [helper.make_node("Mul", ["x", "two"], ["a"]), helper.make_node("Sigmoid", ["a"], ["b"])]
    outs = []
    if kind == "rows256":
        nodes.append(helper.make_node("Add", ["b", "x"], ["y"]))
        outs = ["y"]
    else:
        nodes.append(helper.make_node("ReduceSum", ["b", "ax"], ["y"], keepdims=0))
        outs = ["b", "y"]
    inits = [helper.make_tensor("two", f, [], [2.0]),
             helper.make_tensor("ax", TensorProto.INT64, [1], [1 if kind == "rows64" else 0])]
    g = helper.make_graph(nodes, kind, [helper.make_tensor_value_info("x", f, dims)],
                          [helper.make_tensor_value_info(o, f, None) for o in outs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def kernel_speed(threads: list, repeat: int) -> None:
    import _peak
    import onnx

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime.module import set_num_threads
    peak = _peak.measure(threads)
    print(f"\n2. kernels over 2^20 float32 values, ms, median of {repeat} interleaved calls; {peak.describe()}")
    total = 1 << 20
    with tempfile.TemporaryDirectory() as tmp:
        for kind, width in (("rows256", 256), ("rows64", 64), ("vector", 1)):
            rows = total // width
            x = np.random.default_rng(1).random((rows, width) if kind != "vector" else (rows,)).astype("float32")
            models = {}
            for symbolic in (True, False):
                path = os.path.join(tmp, f"{kind}_{symbolic}.onnx")
                onnx.save(_stretch_model(kind, symbolic, rows), path)
                m = tensorforge.compile(from_onnx(path), batch_buckets=None, progress=False)
                if symbolic:      # two other sizes first: the stretch goes generic on the second
                    for r in (100, 101):
                        m(x[:r])
                models[symbolic] = m
            want = models[False](x)
            for a, b in zip(models[True](x), want):
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-3)
            assert models[True].info["shape_generic"]["stretches"] == 1
            row = []
            for t in threads:
                set_num_threads(t)
                times: dict = {True: [], False: []}
                for _ in range(repeat):
                    for symbolic in (True, False):
                        began = time.perf_counter()
                        models[symbolic](x)
                        times[symbolic].append(time.perf_counter() - began)
                g, s = (np.median(times[k]) * 1e3 for k in (True, False))
                row.append(f"{t}T generic {g:.3f} specialized {s:.3f} ({g / s:.2f}x)")
            print(f"  {kind:8s} " + "  ".join(row))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args(argv)
    data_dependent(args.calls)
    kernel_speed([int(t) for t in args.threads.split(",")], args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
