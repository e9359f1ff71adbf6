"""Small tensor-expression workloads with NumPy references, shared by tests, the hypothesis
schedule fuzzer and examples.  Each builder returns a `Workload`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import te


@dataclass
class Workload:
    name: str
    outputs: list          # tensors to create the schedule from
    args: list             # argument order for lower/build
    reference: Callable    # NumPy reference: inputs -> output(s)


def matmul(n: int = 32, m: int = 24, k: int = 20, dtype: str = "float32") -> Workload:
    A = te.placeholder((n, k), dtype, name="A")
    B = te.placeholder((k, m), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return Workload("matmul", [C], [A, B, C], lambda a, b: a @ b)


def matmul_int8(n: int = 16, m: int = 24, k: int = 32) -> Workload:
    A = te.placeholder((n, k), "int8", name="A")
    B = te.placeholder((k, m), "int8", name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r].astype("int32") * B[r, j].astype("int32"), axis=r),
                   name="C")
    return Workload("matmul_int8", [C], [A, B, C],
                    lambda a, b: a.astype(np.int32) @ b.astype(np.int32))


def conv2d(n=1, c=3, h=10, w=9, f=4, kh=3, kw=3, pad=1, stride=1) -> Workload:
    """NCHW conv2d with an explicit zero-padding stage."""
    data = te.placeholder((n, c, h, w), name="data")
    kernel = te.placeholder((f, c, kh, kw), name="kernel")
    padded = te.compute(
        (n, c, h + 2 * pad, w + 2 * pad),
        lambda b, ch, y, x: te.if_then_else(
            te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), data[b, ch, y - pad, x - pad], 0.0),
        name="pad")
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    out = te.compute(
        (n, f, oh, ow),
        lambda b, o, y, x: te.sum(padded[b, rc, y * stride + ry, x * stride + rx] * kernel[o, rc, ry, rx],
                                  axis=[rc, ry, rx]),
        name="conv")

    def ref(d, k):
        p = np.pad(d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        res = np.zeros((n, f, oh, ow), np.float32)
        for y in range(kh):
            for x in range(kw):
                win = p[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride]
                res += np.einsum("bchw,oc->bohw", win, k[:, :, y, x])
        return res

    return Workload("conv2d", [out], [data, kernel, out], ref)


def softmax(n: int = 6, m: int = 33) -> Workload:
    X = te.placeholder((n, m), name="X")
    k1 = te.reduce_axis((0, m), name="k1")
    mx = te.compute((n,), lambda i: te.max(X[i, k1], axis=k1), name="rowmax")
    e = te.compute((n, m), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    k2 = te.reduce_axis((0, m), name="k2")
    total = te.compute((n,), lambda i: te.sum(e[i, k2], axis=k2), name="rowsum")
    out = te.compute((n, m), lambda i, j: e[i, j] / total[i], name="softmax")

    def ref(x):
        z = np.exp(x - x.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)

    return Workload("softmax", [out], [X, out], ref)


def elementwise_chain(n: int = 7, m: int = 37) -> Workload:
    """Broadcasting chain: relu(a * b[None, :] + c[:, None]) - 1."""
    a = te.placeholder((n, m), name="a")
    b = te.placeholder((m,), name="b")
    c = te.placeholder((n,), name="c")
    t1 = te.compute((n, m), lambda i, j: a[i, j] * b[j], name="mul")
    t2 = te.compute((n, m), lambda i, j: t1[i, j] + c[i], name="add")
    out = te.compute((n, m), lambda i, j: te.max(t2[i, j], 0.0) - 1.0, name="relu")
    return Workload("elementwise", [out], [a, b, c, out],
                    lambda x, y, z: np.maximum(x * y[None, :] + z[:, None], 0) - 1)


def reductions(n: int = 9, m: int = 21) -> Workload:
    """Row max and row sum of one input, two outputs."""
    X = te.placeholder((n, m), name="X")
    k1 = te.reduce_axis((0, m), name="k1")
    k2 = te.reduce_axis((0, m), name="k2")
    mx = te.compute((n,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    sm = te.compute((n,), lambda i: te.sum(X[i, k2] * 2.0, axis=k2), name="sm")
    return Workload("reductions", [mx, sm], [X, mx, sm], lambda x: (x.max(axis=1), (2 * x).sum(axis=1)))


ALL = {"matmul": matmul, "matmul_int8": matmul_int8, "conv2d": conv2d, "softmax": softmax,
       "elementwise": elementwise_chain, "reductions": reductions}
