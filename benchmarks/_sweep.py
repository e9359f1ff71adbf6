"""Shared by shape_sweep.py and op_sweep.py: run single-op ONNX models with tensorforge and ONNX
Runtime, check every output against ONNX Runtime's (rtol/atol 1e-3), time the two interleaved
(three samples each, medians) and report the ratios worst first with their geometric mean."""
from __future__ import annotations

import functools
import math
import statistics

import numpy as np


def run(cases, threads: int, calls: int) -> list[tuple]:
    """(tf/ort ratio, tf ms, ort ms, name) of each (name, model, feeds) case, printed as it goes;
    `calls` calls per sample."""
    import onnxruntime as ort

    import tensorforge
    from tensorforge.runtime.module import set_num_threads
    from tensorforge.testing.timing import median_seconds
    set_num_threads(threads)
    rows = []
    for name, model, feeds in cases:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ref = sess.run(None, feeds)
        compiled = tensorforge.compile(tensorforge.frontend.from_onnx(model), target="c -mcpu=native")
        arrays = [feeds[n] for n in compiled.input_names]
        for got, want in zip(compiled(*arrays), ref):
            np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=1e-3,
                                       atol=1e-3, err_msg=name)
        tf_ms, ort_ms = [], []
        for _ in range(3):
            tf_ms.append(1e3 * median_seconds(functools.partial(compiled, *arrays), calls))
            ort_ms.append(1e3 * median_seconds(functools.partial(sess.run, None, feeds), calls))
        t, o = statistics.median(tf_ms), statistics.median(ort_ms)
        rows.append((t / o, t, o, name))
        print(f"{t / o:6.2f}  tf {t:8.3f} ms  ort {o:8.3f} ms  {name}", flush=True)
    return rows


def report(rows: list[tuple], threads: int, above: float) -> None:
    """The rows worst first, their geometric mean and how many are above `above`."""
    print(f"\nworst first ({threads} thread(s)):")
    for ratio, t, o, name in sorted(rows, reverse=True):
        print(f"{ratio:6.2f}  tf {t:8.3f} ms  ort {o:8.3f} ms  {name}")
    gm = math.exp(sum(math.log(r[0]) for r in rows) / len(rows))
    print(f"geometric mean tf/ort over {len(rows)} cases: {gm:.2f}; above {above:g}: {sum(r[0] > above for r in rows)}")
