"""Check one op's TE compute against its NumPy reference on the C backend (and interpreter).

Outputs start as values a kernel would not write by chance (`unwritten_fills`: NaN for floats;
for other dtypes two different fills, one run each), so an element the kernel never writes
fails the comparison instead of passing because the buffer happened to hold the answer."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .. import te
from ..ir import dtype as dt
from .registry import TensorType, get


def unwritten_fills(dtype: str | np.dtype) -> tuple:
    """The values an output is pre-filled with, one run per value: NaN for floats; for
    integers the byte patterns 0xA5.. and 0x5A.. (an element left unwritten cannot match the
    reference in both runs); True and False for booleans."""
    d = np.dtype(dtype)
    if d.kind == "f":
        return (np.nan,)
    if d.kind == "b":
        return (True, False)
    return tuple(np.frombuffer(bytes([b]) * d.itemsize, d)[0] for b in (0xA5, 0x5A))


def unwritten_array(shape: Sequence[int], dtype: str | np.dtype, run: int = 0) -> np.ndarray:
    """An output buffer of `shape` filled with the `run`-th of `unwritten_fills(dtype)` (the
    last one when there are fewer)."""
    fills = unwritten_fills(dtype)
    return np.full(tuple(shape), fills[min(run, len(fills) - 1)], np.dtype(dtype))


def fill_runs(dtypes: Sequence[str | np.dtype]) -> int:
    """How many runs `unwritten_fills` asks for, for outputs of these dtypes."""
    return max((len(unwritten_fills(d)) for d in dtypes), default=1)


def check_op(name: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
             rtol: float = 1e-5, atol: float = 1e-5, interpreter: bool = False, target: str = "c -O1") -> list:
    """Build `name` with a plain schedule (every stage at the root), run it on `inputs`, and
    compare each output with the reference (floats with rtol/atol, others exactly).  Opaque ops
    run their kernel instead.  Returns the outputs."""
    from ..build_module import build, lower
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
        func = lower(s, args, name=name.replace(".", "_"))
        arrays = [np.ascontiguousarray(a).reshape(a.shape) for a in inputs if a is not None]  # keeps 0-d
        shapes = [tuple(int(d.value) for d in o.shape) for o in outs]
        dtypes = [dt.to_numpy(o.dtype) for o in outs]
        mod = build(func, target=target)
        for run in range(fill_runs(dtypes)):
            got = [unwritten_array(sh, d, run) for sh, d in zip(shapes, dtypes)]
            mod(*arrays, *got)
            if run + 1 < fill_runs(dtypes):
                _compare(name, got, expected, out_types, rtol, atol, f" (outputs pre-filled, run {run})")
        if interpreter:
            again = [unwritten_array(sh, d) for sh, d in zip(shapes, dtypes)]
            interp.run(func, *arrays, *again)
            for g, a in zip(got, again):
                np.testing.assert_allclose(a, g, rtol=rtol, atol=atol)
    if len(got) != len(out_types):
        raise AssertionError(f"{name}: the kernel gave {len(got)} outputs, infer_types {len(out_types)}")
    _compare(name, got, expected, out_types, rtol, atol, "")
    return got


def _compare(name: str, got: list, expected: list, out_types: list, rtol: float, atol: float, where: str) -> None:
    """Every output against its reference: dtype first, then floats with rtol/atol, others exactly."""
    for k, (g, e, t) in enumerate(zip(got, expected, out_types)):
        assert g.dtype == np.dtype(t.dtype), f"{name} output {k}: dtype {g.dtype} != inferred {t.dtype}"
        if dt.is_float(t.dtype):
            np.testing.assert_allclose(g, e.astype(g.dtype), rtol=rtol, atol=atol,
                                       err_msg=f"{name} output {k}{where}")
        else:
            np.testing.assert_array_equal(g, e.astype(g.dtype), err_msg=f"{name} output {k}{where}")
