"""int8 GEMM (u8 x s8 -> s32) at 1 thread: tensorforge's `matmul_int8.cpu` (tensorized with the
CPU's int8 unit) next to the machine's measured dot-product peak and to the peers, NumPy's int32
matmul and ONNX Runtime's MatMulInteger (when installed).  Every result is checked against NumPy
before it is timed.

    python benchmarks/gemm_int8.py                 # 1024^3
    python benchmarks/gemm_int8.py --size 512 --repeat 5
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")        # 1 thread, for every peer
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402


def best_seconds(fn, repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def ort_matmul_integer(a: np.ndarray, b: np.ndarray):
    """A callable running ONNX Runtime's MatMulInteger on (a, b) at 1 thread, or None."""
    try:
        import onnx
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    m, k = a.shape
    n = b.shape[1]
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["C"])], "g",
        [helper.make_tensor_value_info("A", TensorProto.UINT8, [m, k])],
        [helper.make_tensor_value_info("C", TensorProto.INT32, [m, n])],
        [onnx.numpy_helper.from_array(b, "B")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return lambda: sess.run(None, {"A": a})[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024, help="M = N = K")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    import _peak_int8

    import tensorforge
    from tensorforge.ops import x86_intrin as X
    from tensorforge.ops.schedules.cpu_matmul_int8 import matmul_int8_workload, pack_b_vnni
    from tensorforge.runtime import module as rt
    from tensorforge.target import Target

    n = args.size
    unit = X.int8_unit()
    lanes, peak = _peak_int8.measure()
    print(f"CPU int8 units: {', '.join(sorted(X.host_features())) or 'none'}; using {unit}")
    print(f"int8 dot-product peak ({lanes} lanes, vpdpbusd, 1 thread): {peak:.1f} GOP/s")
    if unit is None:
        print("this CPU has no int8 dot-product unit; nothing to measure")
        return 0
    rng = np.random.default_rng(0)
    a = rng.integers(0, 256, (n, n), dtype=np.uint8)
    b = rng.integers(-128, 128, (n, n), dtype=np.int8)
    expect = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    gop = 2.0 * n ** 3 / 1e9

    rt.set_num_threads(1)
    target = Target.parse("c")
    s, tensors = matmul_int8_workload(n, n, n, target)
    module = tensorforge.build(s, tensors)
    bp = pack_b_vnni(b, X.LANES[unit])
    c = np.full((n, n), -1, np.int32)
    module(a, bp, c)
    assert np.array_equal(c, expect), "tensorforge's int8 GEMM differs from NumPy"
    rows = [("tensorforge matmul_int8.cpu", best_seconds(lambda: module(a, bp, c), args.repeat))]

    a32, b32 = a.astype(np.int32), b.astype(np.int32)
    t0 = time.perf_counter()                 # NumPy has no integer BLAS: one run is seconds
    assert np.array_equal(a32 @ b32, expect)
    rows.append(("numpy int32 matmul", time.perf_counter() - t0))
    ort_run = ort_matmul_integer(a, b)
    if ort_run is not None:
        assert np.array_equal(ort_run(), expect), "ONNX Runtime's MatMulInteger differs from NumPy"
        rows.append(("onnxruntime MatMulInteger", best_seconds(ort_run, args.repeat)))
    else:
        print("onnxruntime is not installed: its MatMulInteger is left out")

    print(f"\nint8 GEMM {n}x{n}x{n}, 1 thread")
    print(f"{'implementation':32s} {'ms':>9s} {'GOP/s':>9s} {'% peak':>7s} {'vs tf':>7s}")
    tf_time = rows[0][1]
    for name, sec in rows:
        rate = gop / sec
        print(f"{name:32s} {sec * 1e3:9.2f} {rate:9.1f} {100 * rate / peak:6.1f}% {sec / tf_time:6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
