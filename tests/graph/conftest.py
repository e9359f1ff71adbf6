"""Private ops (names start with "t_") so graph-level tests do not depend on the op library."""
import numpy as np

from tensorforge import te
from tensorforge.ops import registry
from tensorforge.ops.registry import COMPLEX, INJECTIVE, OPAQUE, REDUCTION, TensorType


def _register():
    if "t_relu" in registry._REGISTRY:
        return

    @registry.op("t_relu", pattern=INJECTIVE)
    class relu:
        def infer(x):
            return x

        def compute(x):
            return te.compute(x.shape, lambda *i: te.max(x[i], te.const(0, x.dtype)), name="relu")

        def reference(x):
            return np.maximum(x, 0)

    @registry.op("t_add", pattern=INJECTIVE)
    class add:
        def infer(a, b):
            return TensorType(np.broadcast_shapes(a.shape, b.shape), a.dtype)

        def compute(a, b):
            from tensorforge.ops.common import broadcast_load
            shape = np.broadcast_shapes(tuple(int(d.value) for d in a.shape), tuple(int(d.value) for d in b.shape))
            return te.compute(shape, lambda *i: broadcast_load(a, i, shape) + broadcast_load(b, i, shape), name="add")

        def reference(a, b):
            return a + b

    @registry.op("t_dense", pattern=COMPLEX)
    class dense:
        def infer(x, w):
            return TensorType((x.shape[0], w.shape[0]), x.dtype)

        def compute(x, w):
            k = te.reduce_axis((0, x.shape[1]), name="k")
            return te.compute((x.shape[0], w.shape[0]), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k),
                              name="dense", tag="dense")

        def reference(x, w):
            return x @ w.T

    @registry.op("t_sum", pattern=REDUCTION)
    class rsum:
        def infer(x):
            return TensorType((x.shape[0],), x.dtype)

        def compute(x):
            k = te.reduce_axis((0, x.shape[1]), name="k")
            return te.compute((x.shape[0],), lambda i: te.sum(x[i, k], axis=k), name="sum")

        def reference(x):
            return x.sum(axis=1)

    @registry.op("t_sort", pattern=OPAQUE)
    class sort:
        def infer(x):
            return x

        def reference(x):
            return np.sort(x, axis=-1)


_register()
