"""Check one op's TE compute against its NumPy reference on the C backend (and interpreter)."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from .registry import TensorType, get


def check_op(name: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
             rtol: float = 1e-5, atol: float = 1e-5, interpreter: bool = False, target: str = "c -O1") -> list:
    """Build `name` with a plain schedule (every stage at the root), run it on `inputs`, and
    compare each output with the reference (floats with rtol/atol, others exactly).  Opaque ops
    run their kernel instead.  Returns the outputs."""
    import tensorforge
    from ..tir import interp

    attrs = dict(attrs or {})
    opdef = get(name)
    types = [TensorType(a.shape, a.dtype.name) if a is not None else None for a in inputs]
    out_types = opdef.infer_types(types, attrs)
    expected = opdef.run_reference([a for a in inputs], attrs)
    assert len(expected) == len(out_types), f"{name}: reference gave {len(expected)} outputs, infer {len(out_types)}"
    for e, t in zip(expected, out_types):
        assert tuple(e.shape) == tuple(t.shape), f"{name}: reference shape {e.shape} != inferred {t.shape}"
    if opdef.is_opaque_kernel:
        got = opdef.run_kernel(list(inputs), attrs)
    else:
        placeholders = [te.placeholder(a.shape, a.dtype.name, name=f"in{k}") if a is not None else None
                        for k, a in enumerate(inputs)]
        outs = opdef.build_compute(placeholders, attrs)
        s = te.create_schedule([o.op for o in outs])
        args = [p for p in placeholders if p is not None] + outs
        func = tensorforge.lower(s, args, name=name.replace(".", "_"))
        arrays = [np.ascontiguousarray(a).reshape(a.shape) for a in inputs if a is not None]  # keeps 0-d
        got = [np.zeros(tuple(int(d.value) for d in o.shape), dt.to_numpy(o.dtype)) for o in outs]
        mod = tensorforge.build(func, target=target)
        mod(*arrays, *got)
        if interpreter:
            again = [np.zeros_like(g) for g in got]
            interp.run(func, *arrays, *again)
            for g, a in zip(got, again):
                np.testing.assert_allclose(a, g, rtol=rtol, atol=atol)
    for k, (g, e, t) in enumerate(zip(got, expected, out_types)):
        assert g.dtype == np.dtype(t.dtype), f"{name} output {k}: dtype {g.dtype} != inferred {t.dtype}"
        if dt.is_float(t.dtype):
            np.testing.assert_allclose(g, e.astype(g.dtype), rtol=rtol, atol=atol, err_msg=f"{name} output {k}")
        else:
            np.testing.assert_array_equal(g, e.astype(g.dtype), err_msg=f"{name} output {k}")
    return got
