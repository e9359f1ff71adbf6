"""Whole models from the zoo: tensorforge (default schedules) against ONNX Runtime and PyTorch,
interleaved in one run, batch 1, with 1 thread (and 2 with --threads 1,2).  Prints compile times,
median latencies and the ratios tensorforge / ONNX Runtime and tensorforge / PyTorch per model,
and their geometric means.

    python benchmarks/e2e.py [--models resnet18,mobilenet] [--repeat 20] [--threads 1,2]
    python benchmarks/e2e.py --tuned [DIR]     # also: each model compiled with DIR/MODEL.jsonl

With --tuned, each model is also compiled with the tuning records in DIR (default
benchmarks/records/, made by `tensorforge tune MODEL --time-budget ... --records DIR/MODEL.jsonl`)
and timed in the same interleaved blocks; `tuned` is its latency and `tuned/ort` its ratio.  It
is compiled once per thread count, with that count set: compile applies only the records
measured with the thread count it runs with, so records tuned with 1 thread leave the 2-thread
"tuned" model at its defaults.

PyTorch runs the same ONNX graph rebuilt with PyTorch ops (benchmarks/torch_peer.py) under
torch.inference_mode() with torch.set_num_threads(threads); per model and thread count it uses the
fastest of eager, torch.jit.freeze and torch.jit.optimize_for_inference (for CNNs also each in
channels_last memory order) that agrees with eager, and names it in the torch column.  Its output
is checked against ONNX Runtime before timing.  Without PyTorch the column says n/a.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import time


import numpy as np  # noqa: E402


def median_ms(fn, repeat: int) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat, warmup_s=0.1) * 1e3


def import_torch_peer():
    """benchmarks/torch_peer.py, or None when PyTorch is not installed (its column says n/a).

    PyTorch's bundled libgomp and tensorforge's kernels end up sharing one OpenMP runtime (same
    soname), which reads its waiting policy once, when it loads; tensorforge's setting goes into
    the environment first so that tensorforge runs as it does without PyTorch in the process."""
    from tensorforge.runtime.module import configure_openmp_waiting
    configure_openmp_waiting()
    try:
        import torch_peer  # noqa: E402  (benchmarks/ is on sys.path when this file runs as a script)
    except ImportError:
        return None
    return torch_peer


def geomean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


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
    ap.add_argument("--tuned", nargs="?", const=os.path.join(os.path.dirname(os.path.abspath(__file__)), "records"),
                    help="also time each model compiled with DIR/MODEL.jsonl (default DIR: benchmarks/records)")
    opts = ap.parse_args()
    torch_peer = import_torch_peer()
    torch = torch_peer.torch if torch_peer else None
    print(f"onnxruntime {ort.__version__}, "
          + (f"torch {torch.__version__}" if torch else "torch not installed (its column says n/a)"), flush=True)
    rows = []
    for name in opts.models.split(","):
        proto, feeds = models.get(name)
        t0 = time.perf_counter()
        graph = from_onnx(proto)
        model = tensorforge.compile(graph, target="c -mcpu=native")
        compile_s = time.perf_counter() - t0
        inputs = [feeds[n] for n in model.input_names]
        records = None
        if opts.tuned:
            records = os.path.join(opts.tuned, f"{name}.jsonl")
            if not os.path.exists(records):
                print(f"{name}: no records at {records}; tuned column skipped", flush=True)
                records = None
        found = torch_peer.variants(proto, feeds) if torch_peer else None
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
            tuned = None
            if records is not None:
                # compiled with this thread count set: compile applies the records measured with it
                tuned = tensorforge.compile(graph, target="c -mcpu=native", records=records)
                print(f"{name}: records {records} applied to {tuned.info['tuned_groups']} kernel(s) "
                      f"at {threads} thread(s)", flush=True)
            peer = None
            if found is not None:
                torch.set_num_threads(threads)
                peer = torch_peer.fastest(found)     # the best mode can differ per thread count
                for a, b in zip(peer(*found.inputs), ref):
                    np.testing.assert_allclose(a.numpy(), b, rtol=1e-3, atol=1e-3,
                                               err_msg=f"{name}: PyTorch ({peer.mode}) differs from ONNX Runtime")
            if tuned is not None:
                tuned_out = tuned(*inputs)
                tuned_err = max(float(np.max(np.abs(a - b))) for a, b in zip(tuned_out, ref))
                assert all(np.allclose(a, b, rtol=1e-3, atol=1e-3) for a, b in zip(tuned_out, ref)), \
                    f"{name}: the tuned model differs from ONNX Runtime (max|diff| {tuned_err:.1e})"
            tf_ms, ort_ms, torch_ms, tuned_ms = [], [], [], []
            for _ in range(3):  # interleave so that noise hits all peers
                tf_ms.append(median_ms(lambda: model(*inputs), max(1, opts.repeat // 3)))
                if tuned is not None:
                    tuned_ms.append(median_ms(lambda: tuned(*inputs), max(1, opts.repeat // 3)))
                ort_ms.append(median_ms(lambda: sess.run(None, feeds), max(1, opts.repeat // 3)))
                if peer is not None:
                    torch_ms.append(median_ms(lambda: peer(*found.inputs), max(1, opts.repeat // 3)))
            tf, ortm = statistics.median(tf_ms), statistics.median(ort_ms)
            torchm = statistics.median(torch_ms) if torch_ms else None
            tunedm = statistics.median(tuned_ms) if tuned_ms else None
            rows.append((name, threads, compile_s, tf, ortm, tf / ortm, err, tf / torchm if torchm else None,
                         tunedm / ortm if tunedm else None))
            torch_text = (f"{'torch (' + peer.mode + ')':48s} {torchm:8.2f} ms  tf/torch {tf / torchm:6.2f}"
                          if peer is not None else "torch n/a")
            tuned_text = f"  tuned {tunedm:8.2f} ms  tuned/ort {tunedm / ortm:5.2f}" if tunedm else ""
            print(f"{name:12s} {threads}T compile {compile_s:6.1f} s  tensorforge {tf:9.2f} ms  "
                  f"onnxruntime {ortm:8.2f} ms  ratio {tf / ortm:6.2f}  max|diff| {err:.1e}  {torch_text}{tuned_text}",
                  flush=True)
    for threads in sorted({r[1] for r in rows}):
        sel = [r for r in rows if r[1] == threads]
        print(f"geometric mean ratio tensorforge/onnxruntime, {threads} thread(s): {geomean([r[5] for r in sel]):.2f}")
        if all(r[7] is not None for r in sel):
            print(f"geometric mean ratio tensorforge/torch, {threads} thread(s): {geomean([r[7] for r in sel]):.2f}")
        if any(r[8] is not None for r in sel):
            tuned_sel = [r for r in sel if r[8] is not None]
            print(f"geometric mean ratio tuned tensorforge/onnxruntime, {threads} thread(s), "
                  f"{len(tuned_sel)} model(s): {geomean([r[8] for r in tuned_sel]):.2f} "
                  f"(default on the same models: {geomean([r[5] for r in tuned_sel]):.2f})")


if __name__ == "__main__":
    main()
