"""Helpers for tests and examples: random inputs, reference checks of a schedule on every
backend and on the reference interpreter.  Outputs start as values a kernel would not write by
chance (NaN for floats; two different fills, one run each, for other dtypes:
`ops.testing.unwritten_fills`), and every output must have a reference."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..ir import dtype as dt
from ..ir.dtype import random_array
from ..ops.testing import fill_runs, unwritten_array, unwritten_fills
from ..te.tensor import PlaceholderOp, Tensor

__all__ = ["random_array", "make_arguments", "check_schedule", "check_candidate", "unwritten_fills",
           "unwritten_array"]


def make_arguments(args: Sequence[Tensor], seed: int = 0, shape_env: dict | None = None, run: int = 0):
    """Arrays for `args`: random data for placeholders; computed tensors filled with the
    `run`-th of `unwritten_fills` (NaN for floats).  Symbolic dimensions take their values from
    `shape_env` ({Var: int})."""
    from ..arith import simplify
    from ..ir.expr import IntImm
    from ..ir.functor import substitute
    rng = np.random.default_rng(seed)
    env = {k: v for k, v in (shape_env or {}).items()}
    arrays = []
    for t in args:
        shape = []
        for d in t.shape:
            value = simplify(substitute(d, {k: IntImm("int32", v) for k, v in env.items()}))
            if not isinstance(value, IntImm):
                raise ValueError(f"dimension {d} of {t.name} has no value in shape_env")
            shape.append(value.value)
        if isinstance(t.op, PlaceholderOp):
            arrays.append(random_array(shape, t.dtype, rng))
        else:
            arrays.append(unwritten_array(shape, dt.to_numpy(t.dtype), run))
    return arrays


def check_schedule(sch, args: Sequence[Tensor], reference: Callable, *, rtol: float = 1e-5,
                   atol: float = 1e-5, seed: int = 0, interpreter: bool = True, target: str = "c",
                   shape_env: dict | None = None, module=None):
    """Lower and build `sch`, run it on random inputs, and compare every output with
    `reference(*inputs)` (which returns one array or a tuple); with `interpreter=True` the
    reference interpreter runs the same loop program and must agree too.  Returns the PrimFunc."""
    from .. import driver
    from ..tir import interp

    func = driver.lower(sch, args)
    is_input = [isinstance(t.op, PlaceholderOp) for t in args]
    out_pos = [k for k, inp in enumerate(is_input) if not inp]
    runs = fill_runs([dt.to_numpy(args[k].dtype) for k in out_pos])
    mod = None
    if target is not None:
        mod = module or driver.build(func, target=target)
    for run in range(runs):
        arrays = make_arguments(args, seed, shape_env, run)
        inputs = [a for a, inp in zip(arrays, is_input) if inp]
        expected = reference(*inputs)
        expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
        if len(expected) != len(out_pos):
            names = ", ".join(args[k].name for k in out_pos)
            raise AssertionError(f"the reference gave {len(expected)} arrays for {len(out_pos)} outputs ({names})")
        results = []
        if mod is not None:
            c_arrays = [a.copy() for a in arrays]
            mod(*c_arrays)
            results.append((f"C backend (run {run})", c_arrays))
        if interpreter:
            i_arrays = [a.copy() for a in arrays]
            interp.run(func, *i_arrays)
            results.append((f"interpreter (run {run})", i_arrays))
        for label, result in results:
            for k, want in zip(out_pos, expected):
                got = result[k]
                if dt.is_float(args[k].dtype):
                    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                               err_msg=f"{label}: output {args[k].name}\n{func}")
                else:
                    np.testing.assert_array_equal(got, want, err_msg=f"{label}: output {args[k].name}\n{func}")
    return func


def check_candidate(task, config, *, rtol: float = 1e-4, atol: float = 1e-4, seed: int = 1) -> None:
    """Build a tuning task under `config` (a ConfigEntity, or None for the default), run it on
    seeded random inputs and compare every output with the task's NumPy reference (outputs
    start as values a kernel would not write, so an element it never writes fails)."""
    from ..autotune.task import build_candidate
    from ..build_module import build

    inputs, expected = task.reference_io(seed=seed)
    module = build(build_candidate(task, config))
    for run in range(fill_runs([e.dtype for e in expected])):
        outs = [unwritten_array(e.shape, e.dtype, run) for e in expected]
        module(*inputs, *outs)
        for got, want in zip(outs, expected):
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=str(config))
