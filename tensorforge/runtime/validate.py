"""Checks a model description (`ModelSpec`, read from a `.tfm` file's model.json) before it runs.

The kernels of a model are native code that trusts its arguments: a value whose shape in
model.json is smaller than the buffer a kernel was compiled for is read and written out of
bounds.  So a loaded spec is checked for consistency before the executor is built:

- every value has a shape of non-negative integers, a scalar dtype of numbers (ir/dtype.SCALAR_TYPES,
  bfloat16 and the narrow types included), and a place
  (input, param, arena or output); arena values lie inside the arena, params match their arrays;
- every value is accounted for: inputs and params are given, every other value is written by a
  step, and steps read and write only declared values;
- every kernel step passes values whose shapes and dtypes are those of the buffers it was
  compiled for (recorded per kernel at compile time, `params`), and kernel runs cover kernel
  steps only.

This catches a damaged or hand-edited file; it does not make an untrusted file safe to load:
a `.tfm` carries native code (see the README's trust model).
"""
from __future__ import annotations

import numpy as np

from ..ir import dtype as dt

PLACES = ("input", "param", "arena", "output", "input_view", "output_view")


class SpecError(ValueError):
    """A model description that does not agree with itself or with its kernels."""


def _shape(name: str, info) -> tuple[int, ...]:
    shape = info.get("shape") if isinstance(info, dict) else None
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                               for d in shape):
        raise SpecError(f"value {name!r} has no valid shape (a list of non-negative integers): {shape!r}")
    return tuple(shape)


def _dtype(name: str, info: dict) -> np.dtype:
    dtype = info.get("dtype")
    if not isinstance(dtype, str) or dtype not in dt.SCALAR_TYPES:
        raise SpecError(f"value {name!r} has no valid dtype: {dtype!r}")
    return dt.to_numpy(dtype)


def _names(what: str, names, values: dict, allow_none: bool = False) -> list:
    if not isinstance(names, list):
        raise SpecError(f"{what} is not a list of value names")
    for n in names:
        if n is None and allow_none:
            continue
        if not isinstance(n, str) or n not in values:
            raise SpecError(f"{what} names {n!r}, which is not a value of the model")
    return names


def validate_spec(spec, params: dict) -> None:
    """Raise SpecError naming the first inconsistency of `spec` (with its `params`)."""
    values = spec.values
    if not isinstance(values, dict):
        raise SpecError("the model's values are not a table")
    arena = spec.arena_bytes
    if not isinstance(arena, int) or isinstance(arena, bool) or arena < 0:
        raise SpecError(f"arena size {arena!r} is not a non-negative integer")
    layout = {}
    for name, info in values.items():
        shape, dtype = _shape(name, info), _dtype(name, info)
        where = info.get("where")
        if where not in PLACES:
            raise SpecError(f"value {name!r} has an unknown place {where!r}")
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if where == "arena":
            offset = info.get("offset")
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0 or offset + nbytes > arena:
                raise SpecError(f"value {name!r} ({nbytes} bytes at offset {offset!r}) lies outside the "
                                f"{arena}-byte arena")
        if where == "param":
            array = params.get(name)
            if array is None:
                raise SpecError(f"param {name!r} has no array in params.npz")
            if tuple(array.shape) != shape or array.dtype != dtype:
                raise SpecError(f"param {name!r}: params.npz holds {array.dtype.name}{list(array.shape)}, "
                                f"the model expects {dtype.name}{list(shape)}")
        if "source" in info and where == "arena":
            source = values.get(info["source"])
            if not isinstance(source, dict) or source.get("where") != "arena" or source.get("offset") != info.get("offset"):
                raise SpecError(f"value {name!r} is a view of {info['source']!r}, which is not at its offset in the arena")
        if where in ("input_view", "output_view"):
            kind = where[:-len("_view")]
            source = values.get(info.get("source"))
            if not isinstance(source, dict) or source.get("where") != kind:
                raise SpecError(f"value {name!r} is a view of {info.get('source')!r}, which is not an {kind}")
            if int(np.prod(_shape(info["source"], source), dtype=object)) * _dtype(info["source"], source).itemsize \
                    != nbytes:
                raise SpecError(f"value {name!r} ({nbytes} bytes) is a view of {kind} {info['source']!r} "
                                "of another size")
        layout[name] = (shape, dtype, where)
    extra = sorted(set(params) - {n for n, v in layout.items() if v[2] == "param"})
    if extra:
        raise SpecError(f"params.npz holds arrays that are not params of the model: {extra}")
    inputs = _names("the input list", spec.inputs, values)
    outputs = _names("the output list", spec.outputs, values)
    for n in inputs:
        if layout[n][2] != "input":
            raise SpecError(f"input {n!r} is placed in {layout[n][2]!r}, not given as an input")
    written = {n for n, v in layout.items() if v[2] in ("input", "param", "input_view")}
    if not isinstance(spec.steps, list):
        raise SpecError("the model's steps are not a list")
    for k, step in enumerate(spec.steps):
        written |= _check_step(k, step, values, layout)
    written |= {n for n, v in layout.items() if v[2] == "output_view" and values[n]["source"] in written}
    for n, (_, _, where) in layout.items():
        if n not in written:
            raise SpecError(f"value {n!r} ({where}) is written by no step")
    for n in outputs:
        if n not in written:
            raise SpecError(f"output {n!r} is written by no step")
    if spec.labels and (not isinstance(spec.labels, list) or len(spec.labels) != len(spec.steps)):
        raise SpecError(f"{len(spec.labels)} step labels for {len(spec.steps)} steps")
    _check_runs(spec)


def _check_step(k: int, step, values: dict, layout: dict) -> set:
    """The values step `k` writes (for a kernel: every argument it may write)."""
    if not isinstance(step, dict) or step.get("kind") not in ("kernel", "opaque"):
        raise SpecError(f"step {k} is neither a kernel nor an opaque step")
    if step["kind"] == "opaque":
        if not isinstance(step.get("op"), str):
            raise SpecError(f"step {k} names no op")
        _names(f"step {k} ({step['op']}) inputs", step.get("inputs"), values, allow_none=True)
        return set(_names(f"step {k} ({step['op']}) outputs", step.get("outputs"), values))
    symbol = step.get("symbol")
    if not isinstance(symbol, str) or not symbol.isidentifier():
        raise SpecError(f"step {k} names no kernel symbol")
    args = _names(f"kernel {symbol} arguments", step.get("args"), values)
    buffers = step.get("params")
    if not isinstance(buffers, list) or len(buffers) != len(args):
        raise SpecError(f"kernel {symbol} has no record of its {len(args)} buffers")
    for arg, buf in zip(args, buffers):
        shape, dtype, _ = layout[arg]
        if not (isinstance(buf, list) and len(buf) == 2 and buf[0] == list(shape) and buf[1] == dtype.name):
            raise SpecError(f"kernel {symbol} was compiled for {_show(buf)} where value {arg!r} is "
                            f"{dtype.name}{list(shape)}")
    return set(args)


def _show(buf) -> str:
    if isinstance(buf, list) and len(buf) == 2:
        return f"{buf[1]}{buf[0]}"
    return repr(buf)


def _check_runs(spec) -> None:
    if not isinstance(spec.runs, list):
        raise SpecError("the model's kernel runs are not a list")
    n = len(spec.steps)
    for run in spec.runs:
        steps = run.get("steps") if isinstance(run, dict) else None
        if not (isinstance(steps, list) and len(steps) == 2 and all(isinstance(s, int) for s in steps)
                and 0 <= steps[0] < steps[1] <= n):
            raise SpecError(f"kernel run {run!r} does not cover a range of steps")
        if not isinstance(run.get("symbol"), str) or not run["symbol"].isidentifier():
            raise SpecError(f"kernel run over steps {steps} names no symbol")
        slots = _names(f"kernel run {run['symbol']} slots", run.get("slots"), spec.values)
        expected: list = []          # the order driver._kernel_runs compiled the run's calls with
        for k in range(*steps):
            step = spec.steps[k]
            if step["kind"] != "kernel":
                raise SpecError(f"kernel run {run['symbol']} covers step {k}, which is not a kernel")
            expected += [a for a in step["args"] if a not in expected]
        if slots != expected:
            raise SpecError(f"kernel run {run['symbol']} passes {slots}, its steps take {expected}")
