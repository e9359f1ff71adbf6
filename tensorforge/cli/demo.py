"""`tensorforge demo`: compile, verify and time a zoo model against ONNX Runtime (no files
needed), or with --gemm a hand-scheduled fp32 GEMM against NumPy."""
from __future__ import annotations

import argparse
import time

from ..errors import UsageError
from .common import progress
from .common import threads as thread_count
from .peer import compare, ort_session


def demo(opts: argparse.Namespace) -> int:
    if opts.gemm:
        return _demo_gemm(opts)
    return _demo_model(opts)


def _median_ms(fn, repeat: int = 10) -> float:
    from tensorforge.testing.timing import median_seconds
    return median_seconds(fn, repeat) * 1e3


def _demo_model(opts: argparse.Namespace) -> int:
    import tensorforge
    from tensorforge.frontend import from_onnx
    from tensorforge.testing import models

    name = opts.model
    if name not in models.NAMES:
        raise UsageError(f"no zoo model {name!r}; the zoo has {', '.join(models.NAMES)}")
    progress(f"[1/4] building {name} from the model zoo (random weights, no download)")
    proto, feeds = models.get(name)
    graph = from_onnx(proto)
    progress(f"[2/4] compiling {len(graph.nodes)} graph nodes for {opts.target!r} ...")
    t0 = time.perf_counter()
    model = tensorforge.compile(graph, target=opts.target)
    progress(f"      {len(model.spec.steps)} fused kernels, compiled in {time.perf_counter() - t0:.1f} s; "
              f"{model.info['plan'].summary()}")
    inputs = [feeds[n] for n in model.input_names]
    outs = model(*inputs)
    sess = ort_session(proto.SerializeToString(), thread_count())
    if sess is not None:
        ref, peer = sess.run(None, feeds), "ONNX Runtime"
    else:
        from tensorforge.graph.reference import run_reference
        ref, peer = run_reference(graph, *inputs), "the NumPy op references"
    err, ok = compare(outs, ref)
    progress(f"[3/4] checked against {peer}: max abs difference {err:.1e} -> {'OK' if ok else 'MISMATCH'}")
    if not ok:
        return 1
    threads = thread_count()
    print(f"[4/4] median latency, batch 1, {threads} thread(s):")
    t_tf = _median_ms(lambda: model(*inputs))
    print(f"      tensorforge   {t_tf:9.2f} ms")
    if sess is not None:
        t_ort = _median_ms(lambda: sess.run(None, feeds))
        print(f"      onnxruntime   {t_ort:9.2f} ms   (tensorforge / onnxruntime = {t_tf / t_ort:.2f})")
    if opts.precision != "fp32":
        from .precision_report import print_report, random_inputs
        progress(f"compiling {name} again with precision={opts.precision} ...")
        low = tensorforge.compile(graph, target=opts.target, precision=opts.precision)
        print_report(opts.precision, model, low, lambda k: inputs if k == 0 else random_inputs(model, k),
                     20, _median_ms)
    return 0


def _demo_gemm(opts: argparse.Namespace) -> int:
    import numpy as np

    import tensorforge
    from tensorforge.testing.gemm import gemm_schedule

    n = opts.size
    print(f"[1/4] tensor expression + schedule: C = A @ B, {n}x{n}x{n} fp32 (packed B, 8x32 register tiles)")
    s, args = gemm_schedule(n, n, n)
    t0 = time.perf_counter()
    func = tensorforge.lower(s, args, name="gemm")
    t1 = time.perf_counter()
    print(f"[2/4] lowered to a loop program in {t1 - t0:.2f} s; compiling C ...", flush=True)
    mod = tensorforge.build(func, target=opts.target)
    t2 = time.perf_counter()
    print(f"      built in {t2 - t1:.2f} s (cached on disk for next time)")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    mod(a, b, c)
    expected = a @ b
    err = float(np.max(np.abs(c - expected)))
    ok = np.allclose(c, expected, rtol=1e-3, atol=1e-3)
    print(f"[3/4] verified against numpy.matmul: max abs error {err:.2e} -> {'OK' if ok else 'MISMATCH'}")
    if not ok:
        return 1

    t_tf = _median_ms(lambda: mod(a, b, c), 7) / 1e3
    t_np = _median_ms(lambda: np.matmul(a, b, out=c), 7) / 1e3
    gflop = 2.0 * n ** 3 / 1e9
    threads = thread_count()
    print(f"[4/4] median latency with {threads} thread(s) (numpy uses its own BLAS threads):")
    print(f"      tensorforge {t_tf * 1e3:8.2f} ms  {gflop / t_tf:7.1f} GFLOP/s")
    print(f"      numpy       {t_np * 1e3:8.2f} ms  {gflop / t_np:7.1f} GFLOP/s")
    print(f"      ratio tensorforge/numpy speed: {t_np / t_tf:.2f}")
    if opts.show_source:
        print(mod.source)
    return 0
