"""The reference interpreter: run any PrimFunc on NumPy arrays, without a C compiler.

Tests use it to cross-check the C backend and every loop-IR pass.  `run(func, *arrays)` binds
the arrays to `func.params` (outputs are written in place) and the symbolic shape variables to
the array shapes; `python_source(func)` shows the program it runs.

How: `interp_source.translate` turns the PrimFunc once (cached per PrimFunc object) into the text
of one Python function (nested `for ... in range(...)`, NumPy buffer accesses, C integer and
float semantics), which is `exec`-ed.  That is far faster than walking the tree per iteration:
a 64^3 matmul nest runs in about 0.1 s.
"""
from __future__ import annotations

import itertools
import linecache
import sys
import weakref
from typing import Callable

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E
from . import nodes as N
from .interp_source import shape_text, translate

__all__ = ["run", "python_source"]


def run(func: N.PrimFunc, *arrays: np.ndarray) -> None:
    """Run `func` on NumPy `arrays` given in `func.params` order; outputs are written in place."""
    fn, _, shape_vars = _compile(func)
    sizes = _bind_shapes(func, arrays)
    # The generated code indexes flat views, which must alias the memory it writes.
    work = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
    with np.errstate(all="ignore"):  # float overflow, 0/0 and NaN casts are silent, as in C
        fn(*work, *(sizes[v] for v in shape_vars))
    for arr, w in zip(arrays, work):
        if w is not arr:
            arr[...] = w


def python_source(func: N.PrimFunc) -> str:
    """The Python text `run` executes for `func` (for reading and debugging)."""
    return _compile(func)[1]


def _bind_shapes(func: N.PrimFunc, arrays: tuple) -> dict:
    """Check the arrays against the parameters and bind the shape variables (Var -> int).
    Computed dimensions such as `n * 2` are checked by the generated code."""
    params = func.params
    if len(arrays) != len(params):
        names = ", ".join(b.name for b in params)
        raise ValueError(f"{func.name} takes {len(params)} arrays ({names}), got {len(arrays)}")
    sizes: dict = {}
    for i, (buf, arr) in enumerate(zip(params, arrays)):
        what = f"argument {i} ('{buf.name}') of {func.name}"
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"{what} must be a numpy.ndarray, got {type(arr).__name__}")
        if arr.dtype != dt.to_numpy(buf.dtype):
            raise ValueError(f"{what} expects dtype {buf.dtype}, got {arr.dtype}")
        ok = arr.ndim == buf.ndim
        for extent, size in zip(buf.shape, arr.shape) if ok else ():
            if isinstance(extent, E.IntImm):
                ok = ok and extent.value == size
            elif isinstance(extent, E.Var):
                ok = ok and sizes.setdefault(extent, size) == size
        if not ok:
            bound = "".join(f", {v.name}={n}" for v, n in sizes.items())
            raise ValueError(f"{what} expects shape {shape_text(buf)}{bound}, "
                             f"got shape {arr.shape}")
    return sizes


# The compiled kernel of each live PrimFunc: (function, source, shape-variable order).
_CACHE: "weakref.WeakKeyDictionary[N.PrimFunc, tuple[Callable, str, tuple]]" = \
    weakref.WeakKeyDictionary()
_serial = itertools.count(1)


def _compile(func: N.PrimFunc) -> tuple[Callable, str, tuple]:
    entry = _CACHE.get(func)
    if entry is None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 20000))  # the translator recurses once per tree level
        try:
            t = translate(func)
        finally:
            sys.setrecursionlimit(limit)
        filename = f"<tensorforge.interp {func.name} #{next(_serial)}>"
        # Registered while `func` lives, so that tracebacks show the generated lines.
        linecache.cache[filename] = (len(t.source), None, t.source.splitlines(True), filename)
        weakref.finalize(func, linecache.cache.pop, filename, None)
        exec(compile(t.source, filename, "exec"), t.namespace)
        entry = _CACHE[func] = (t.namespace["kernel"], t.source, t.shape_vars)
    return entry
