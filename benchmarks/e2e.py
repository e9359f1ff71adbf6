"""Whole models from the zoo: tensorforge (default schedules) against ONNX Runtime, interleaved
in one run, batch 1, with 1 thread (and 2 with --threads 1,2).  Prints compile times, median
latencies and the ratio tensorforge / ONNX Runtime per model, and the geometric mean.

    python benchmarks/e2e.py [--models resnet18,mobilenet] [--repeat 20] [--threads 1,2]
"""
from __future__ import annotations

import argparse
import math
import statistics
import time


import numpy as np  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat, warmup_s=0.1) * 1e3


def main() -> None:
    import onnxruntime as ort

    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.runtime.module import set_num_threads
    from tensorforge.testing import models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=",".join(models.NAMES))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--threads", default="1")
    opts = ap.parse_args()
    rows = []
    for name in opts.models.split(","):
        proto, feeds = models.get(name)
        t0 = time.perf_counter()
        graph = from_onnx(proto)
        model = tensorforge.compile(graph, target="c -mcpu=native")
        compile_s = time.perf_counter() - t0
        inputs = [feeds[n] for n in model.input_names]
        ref = None
        for threads in [int(t) for t in opts.threads.split(",")]:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            so.inter_op_num_threads = 1
            sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
            ref = sess.run(None, feeds)
            got = model(*inputs)
            err = max(float(np.max(np.abs(a - b))) for a, b in zip(got, ref))
            set_num_threads(threads)
            tf_ms, ort_ms = [], []
            for _ in range(3):  # interleave so that noise hits both
                tf_ms.append(median_ms(lambda: model(*inputs), max(1, opts.repeat // 3)))
                ort_ms.append(median_ms(lambda: sess.run(None, feeds), max(1, opts.repeat // 3)))
            tf, ortm = statistics.median(tf_ms), statistics.median(ort_ms)
            rows.append((name, threads, compile_s, tf, ortm, tf / ortm, err))
            print(f"{name:12s} {threads}T compile {compile_s:6.1f} s  tensorforge {tf:9.2f} ms  "
                  f"onnxruntime {ortm:8.2f} ms  ratio {tf / ortm:6.2f}  max|diff| {err:.1e}", flush=True)
    for threads in sorted({r[1] for r in rows}):
        ratios = [r[5] for r in rows if r[1] == threads]
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"geometric mean ratio tensorforge/onnxruntime, {threads} thread(s): {geo:.2f}")


if __name__ == "__main__":
    main()
