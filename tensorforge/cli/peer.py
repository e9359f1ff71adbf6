"""The peer that `demo` and `bench` check and time tensorforge against: an ONNX Runtime session on
the CPU with a given thread count (None when onnxruntime is not installed), and the comparison
of two lists of outputs."""
from __future__ import annotations

from typing import Any

# outputs agree when every element is within these of the peer's (float32 models whose kernels
# sum in another order than the peer's)
RTOL, ATOL = 1e-3, 1e-4


def ort_session(model: Any, threads: int) -> Any:
    """An onnxruntime InferenceSession of `model` (a path, or a serialized ModelProto) running its
    ops on `threads` threads; None when onnxruntime is not installed."""
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def compare(outputs: list, reference: list) -> tuple[float, bool]:
    """(the largest absolute difference over all outputs, whether every output agrees within
    RTOL/ATOL, shapes included)."""
    import numpy as np

    err, ok = 0.0, len(outputs) == len(reference)
    for got, want in zip(outputs, reference):
        got, want = np.asarray(got), np.asarray(want)
        if got.shape != want.shape:
            return float("inf"), False
        if got.size:
            diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
            err = max(err, float(np.nanmax(diff)) if not np.isnan(diff).all() else 0.0)
        ok = ok and bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))
    return err, ok
