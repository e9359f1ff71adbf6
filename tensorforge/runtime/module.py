"""A compiled library as a callable Python object: shared library -> `Module` -> results.

Every call checks its arguments *before* entering C (count, array type, dtype, contiguity,
rank, every dimension against the buffer's constant or symbolic shape, writability of outputs),
so bad input raises a TypeError/ValueError that names the argument instead of crashing the
process.  Arrays are passed zero-copy (their data pointers), then the values of the shape
variables the arrays bound, in `PrimFunc.shape_vars` order (the convention of codegen/c.py).

Thread count: `set_num_threads(n)` applies to every library loaded in the process; the default
is $TENSORFORGE_NUM_THREADS, else the number of cores this process may run on.
"""
from __future__ import annotations

import ctypes
import os
import time
import weakref
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E
from .ndarray import NDArray


@dataclass(frozen=True)
class ParamSpec:
    """One buffer argument of a kernel: its name, element dtype, shape (integer expressions:
    constants, shape variables, or expressions of them) and whether the kernel writes it."""

    name: str
    dtype: str
    shape: tuple
    written: bool


@dataclass(frozen=True)
class KernelSignature:
    """What the runtime needs to call one compiled kernel: its name, its buffer arguments in
    order, then the shape variables passed after them (the convention of codegen/c.py).  The
    compiler derives it from a PrimFunc (`codegen.analysis.kernel_signature`); the runtime
    never sees the loop program."""

    name: str
    params: tuple[ParamSpec, ...]
    shape_vars: tuple = ()

# ctypes type of each integer shape-variable dtype (codegen/c.py declares them with these types).
_CTYPES = {"int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
           "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16,
           "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64}

# Kernel status codes (codegen/c.py) -> what they mean.
_STATUS = {1: "a heap allocation inside the kernel failed (out of memory)"}

_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer

_libraries: "weakref.WeakSet[ctypes.CDLL]" = weakref.WeakSet()
_num_threads: int | None = None


def get_num_threads() -> int:
    global _num_threads
    if _num_threads is None:
        env = os.environ.get("TENSORFORGE_NUM_THREADS")
        if env:
            try:
                _num_threads = max(1, int(env))
            except ValueError:
                raise ValueError(f"TENSORFORGE_NUM_THREADS must be an integer, got {env!r}") from None
        else:
            try:
                _num_threads = max(1, len(os.sched_getaffinity(0)))
            except (AttributeError, OSError):
                _num_threads = max(1, os.cpu_count() or 1)
    return _num_threads


def set_num_threads(n: int) -> None:
    """Use `n` threads in the parallel loops of every loaded (and later loaded) library."""
    global _num_threads
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"set_num_threads expects a positive integer, got {n!r}")
    _num_threads = int(n)
    for lib in list(_libraries):
        ctypes.c_int32.in_dll(lib, "tf_num_threads").value = _num_threads


def configure_openmp_waiting() -> None:
    """How idle OpenMP workers wait, for libraries built by clang (its libomp reads this once,
    when it loads): they sleep at once (KMP_BLOCKTIME=0) unless the user chose otherwise.

    Libraries built by GCC do not use an OpenMP runtime at all: their parallel loops run on
    tensorforge's own pool (runtime/thread_pool.py), which spins about 0.1 ms and then sleeps
    whatever OMP_WAIT_POLICY or GOMP_SPINCOUNT say, so libgomp's settings are left to the
    other libraries in the process."""
    os.environ.setdefault("KMP_BLOCKTIME", "0")


def load_library(path: str) -> ctypes.CDLL:
    """Load a kernel library; the thread pool its parallel loops run on is loaded first."""
    from . import thread_pool
    thread_pool.load()
    configure_openmp_waiting()
    lib = ctypes.CDLL(path)
    ctypes.c_int32.in_dll(lib, "tf_num_threads").value = get_num_threads()
    _libraries.add(lib)
    return lib


class _Param:
    """What one buffer argument must look like."""

    def __init__(self, position: int, buf: ParamSpec):
        self.position, self.name, self.written = position, buf.name, buf.written
        self.dtype = dt.to_numpy(buf.dtype)
        self.ndim = len(buf.shape)
        self.dims = buf.shape
        const = [d.value if isinstance(d, E.IntImm) else None for d in buf.shape]
        self.const_shape = tuple(const) if None not in const else None
        # Dimensions by kind, so a call checks each with one comparison.
        self.const_dims = [(k, d.value) for k, d in enumerate(buf.shape) if isinstance(d, E.IntImm)]
        self.var_dims = [(k, d) for k, d in enumerate(buf.shape) if isinstance(d, E.Var)]
        self.expr_dims = [k for k, d in enumerate(buf.shape) if not isinstance(d, (E.IntImm, E.Var))]
        self.label = f"argument {position} ({buf.name!r})"


def evaluate_shape(e, env: dict) -> int:
    """Value of an integer shape expression (or a plain int) over bound shape variables."""
    if isinstance(e, (int, np.integer)):
        return int(e)
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.Cast):
        return evaluate_shape(e.value, env)
    ops = {E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
           E.FloorDiv: lambda a, b: a // b, E.FloorMod: lambda a, b: a % b, E.Min: min, E.Max: max}
    if type(e) in ops:
        return ops[type(e)](evaluate_shape(e.a, env), evaluate_shape(e.b, env))
    raise ValueError(f"cannot evaluate shape expression {e}")


class Function:
    """One kernel of a Module: `f(*arrays)` checks the arguments and runs the kernel."""

    def __init__(self, func: KernelSignature, cfunc):
        self.name = func.name
        self.params = [_Param(k, b) for k, b in enumerate(func.params)]
        self.shape_vars = tuple(func.shape_vars)
        direct = {d for p in self.params for d in p.dims if isinstance(d, E.Var)}
        missing = [v.name for v in self.shape_vars if v not in direct]
        if missing:
            raise ValueError(f"{func.name}: shape variable(s) {', '.join(missing)} are not a dimension "
                             "of any parameter buffer, so a call cannot infer them")
        self._int_limits = [(int(np.iinfo(v.dtype).min), int(np.iinfo(v.dtype).max))
                            for v in self.shape_vars]
        cfunc.argtypes = [ctypes.c_void_p] * len(self.params) + [_CTYPES[v.dtype] for v in self.shape_vars]
        cfunc.restype = ctypes.c_int32
        self._cfunc = cfunc

    def __repr__(self) -> str:
        return f"<tensorforge Function {self.name}({', '.join(p.name for p in self.params)})>"

    def __call__(self, *args) -> None:
        status = self._cfunc(*self.pack(args))
        if status:
            self._fail(status)

    def _fail(self, status: int):
        raise RuntimeError(f"kernel {self.name} failed with status {status}: "
                           f"{_STATUS.get(status, 'unknown error')}")

    def pack(self, args: Sequence) -> list:
        """Check `args` against the parameters and return the C argument list."""
        if len(args) != len(self.params):
            names = ", ".join(p.name for p in self.params)
            raise TypeError(f"{self.name}() takes {len(self.params)} array arguments ({names}), "
                            f"got {len(args)}")
        env: dict = {}
        out: list = []
        deferred: list = []   # (param, axis, size) of dimensions that are shape expressions
        for p, arg in zip(self.params, args):
            if type(arg) is NDArray:
                arr, ptr = arg._array, arg._ptr
            elif isinstance(arg, np.ndarray):
                arr, ptr = arg, None
            else:
                raise TypeError(f"{self.name}: {p.label} must be a NumPy array or tensorforge.nd "
                                f"array, got {type(arg).__name__}")
            if arr.dtype != p.dtype:
                raise TypeError(f"{self.name}: {p.label} has dtype {arr.dtype}, expected {p.dtype}")
            if arr.shape != p.const_shape:
                self._check_shape(p, arr.shape, env, deferred)
            flags = arr.flags
            if not flags.c_contiguous:
                raise ValueError(f"{self.name}: {p.label} is not C-contiguous; pass "
                                 "np.ascontiguousarray(x)")
            if p.written and not flags.writeable:
                raise ValueError(f"{self.name}: {p.label} is written by the kernel but is read-only")
            if ptr is None:
                # addressof(from_buffer) is ~5x cheaper than arr.ctypes.data but needs a
                # writable, non-empty buffer.
                # (extension dtypes such as bfloat16 have no buffer format: their pointer is ctypes.data)
                ptr = _addressof(_from_buffer(arr)) if flags.writeable and arr.size and arr.dtype.isbuiltin == 1 \
                    else arr.ctypes.data
            out.append(ptr)
        for p, axis, size in deferred:   # all variables are bound now
            if evaluate_shape(p.dims[axis], env) != size:
                raise ValueError(f"{self.name}: {p.label} has dimension {axis} of size {size}, "
                                 f"expected {self._expected(p, env)}")
        if len(set(out)) != len(out):   # outputs must not be another argument's memory (restrict)
            for p in self.params:
                if p.written and out.count(out[p.position]) > 1 and args[p.position].size:
                    raise ValueError(f"{self.name}: {p.label} is written by the kernel and is also "
                                     "passed as another argument; use distinct arrays")
        for var, (lo, hi) in zip(self.shape_vars, self._int_limits):
            value = env[var]
            if not lo <= value <= hi:
                raise ValueError(f"{self.name}: shape variable {var.name}={value} does not fit {var.dtype}")
            out.append(value)
        return out

    def _check_shape(self, p: _Param, shape: tuple, env: dict, deferred: list) -> None:
        if len(shape) != p.ndim:
            raise ValueError(f"{self.name}: {p.label} has {len(shape)} dimensions {shape}, expected "
                             f"{p.ndim}: {self._expected(p, env)}")
        for axis, want in p.const_dims:
            if shape[axis] != want:
                raise ValueError(f"{self.name}: {p.label} has shape {shape}, expected "
                                 f"{self._expected(p, env)}")
        for axis, var in p.var_dims:
            got = shape[axis]
            bound = env.setdefault(var, got)
            if bound != got:
                raise ValueError(f"{self.name}: {p.label} has shape {shape}, but its dimension "
                                 f"{axis} is {var.name}, which an earlier argument set to {bound}")
        for axis in p.expr_dims:
            deferred.append((p, axis, shape[axis]))

    @staticmethod
    def _expected(p: _Param, env: dict) -> str:
        dims = []
        for d in p.dims:
            try:
                dims.append(str(evaluate_shape(d, env)))
            except (KeyError, ValueError):
                dims.append(str(d))
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


class Module:
    """Compiled kernels from one library.  `m(*args)` runs its only kernel; `m["name"]` or
    `m.get_function("name")` picks one; `m.source` is the generated code."""

    def __init__(self, funcs: Sequence[KernelSignature], lib_path: str, source: str,
                 symbols: dict | None = None, target=None):
        self.lib_path, self.source, self.target = lib_path, str(source), target
        self.signatures = tuple(funcs)
        self._lib = load_library(lib_path)
        symbols = symbols or {}
        self._functions: dict[str, Function] = {}
        for f in funcs:
            self._functions[f.name] = Function(f, getattr(self._lib, symbols.get(f.name, f.name)))

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def get_function(self, name: str) -> Function:
        try:
            return self._functions[name]
        except KeyError:
            raise KeyError(f"module has no function {name!r}; it has: "
                           f"{', '.join(self._functions)}") from None

    __getitem__ = get_function

    def raw_function(self, name: str):
        """Kernel `name` as a bare C function of its buffer pointers, without argument checks
        (its own ctypes object, so setting its types affects no other caller)."""
        fn = self.get_function(name)
        raw = self._lib[fn._cfunc.__name__]
        raw.argtypes, raw.restype = [ctypes.c_void_p] * len(fn.params), ctypes.c_int32
        return raw

    def __call__(self, *args) -> None:
        if len(self._functions) != 1:
            raise TypeError(f"module has {len(self._functions)} functions "
                            f"({', '.join(self._functions)}); pick one with module[name]")
        next(iter(self._functions.values()))(*args)

    def __repr__(self) -> str:
        return f"<tensorforge Module {self.function_names} from {self.lib_path}>"

    def time_evaluator(self, name: str, number: int = 10, repeat: int = 3,
                       min_repeat_ms: float = 0) -> Callable[..., list[float]]:
        """A function that runs kernel `name` on given arguments and returns `repeat` timings in
        seconds, each the mean over `number` back-to-back calls (`number` grows until one
        repeat lasts `min_repeat_ms`).  One untimed call comes first (warm-up).  Arguments
        are checked once, outside the timed loop."""
        fn = self.get_function(name)
        if number < 1 or repeat < 1:
            raise ValueError("time_evaluator needs number >= 1 and repeat >= 1")

        def evaluate(*args) -> list[float]:
            c_args = fn.pack(args)
            cfunc, n = fn._cfunc, number
            status = cfunc(*c_args)
            results = []
            for _ in range(repeat):
                while True:
                    start = time.perf_counter()
                    for _ in range(n):
                        status |= cfunc(*c_args)
                    elapsed = time.perf_counter() - start
                    if elapsed * 1e3 >= min_repeat_ms:
                        break
                    # Grow toward the target duration (at least doubling) and measure again.
                    n = max(2 * n, int(n * min_repeat_ms / max(elapsed * 1e3, 1e-3)) + 1)
                results.append(elapsed / n)
            if status:
                fn._fail(status)
            return results

        return evaluate
