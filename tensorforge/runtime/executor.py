"""The graph executor: runs compiled kernels and opaque steps over a static memory plan.

It needs only the runtime (NumPy, ctypes, the shared library) and, for opaque steps, the host
kernels of runtime/host_kernels.py; an exported model (`tensorforge.load`) runs without the
compiler.

A model description is plain data (`ModelSpec`), so it serializes to JSON:
  values:  name -> (shape, dtype, where): where is "input", "param", "arena" (byte offset), "output",
           "input_view" (an input's bytes under another shape: "source" names the input) or
           "output_view" (returned as the buffer of the "output" value "source" names, reshaped)
  steps:   ("kernel", symbol, [value names]) or ("opaque", op, attrs, [inputs], [outputs])
  runs:    stretches of consecutive kernel steps compiled into one C function each
           ({"symbol", "steps": [first, end), "slots": [value names]}): the function takes the
           array of the slots' pointers, calls the kernels in order and reports which one failed.
           A call makes one foreign call per run, not per kernel (the Python and ctypes cost of a
           call per kernel adds up over a model's dozens of kernels); `profile` calls kernels one
           by one to time them.
"""
from __future__ import annotations

import ctypes
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from ..ir import dtype as dt
from . import host_kernels
from .memory import HOST, Memory
from .module import load_library


@dataclass
class ModelSpec:
    name: str
    inputs: list            # value names, in call order
    outputs: list           # value names, in return order
    values: dict            # name -> {"shape": [...], "dtype": str, "where": str, "offset": int}
    steps: list             # dicts: {"kind": "kernel", "symbol", "args"} | {"kind": "opaque", "op", "attrs", "inputs", "outputs"}
    arena_bytes: int = 0
    labels: list = field(default_factory=list)   # a readable label per step (for profiles)
    runs: list = field(default_factory=list)     # {"symbol", "steps": [first, end), "slots"} (module docstring)


class GraphExecutor:
    """Calls: `ex(*arrays)` or `ex.run(name=array, ...)` -> list of output arrays.

    Buffers (params, the arena, inputs, outputs) come from `memory` (runtime/memory.py): the
    host's NumPy arrays unless a backend gives its own."""

    def __init__(self, spec: ModelSpec, lib_path: str | None, params: dict, memory: Memory = HOST,
                 host_steps: dict | None = None):
        self.spec = spec
        self.memory = memory
        self.lib = load_library(lib_path) if lib_path else None
        self.params = {k: memory.constant(v) for k, v in params.items()}
        self.arena = memory.empty((max(spec.arena_bytes, 1),), np.uint8)
        self.fixed: dict[str, np.ndarray] = {}
        for name, info in spec.values.items():
            shape, dtype = tuple(info["shape"]), dt.to_numpy(info["dtype"])
            if info["where"] == "param":
                self.fixed[name] = self.params[name]
            elif info["where"] == "arena":
                count = int(np.prod(shape, dtype=np.int64))
                view = self.arena[info["offset"]:info["offset"] + count * dtype.itemsize].view(dtype)
                self.fixed[name] = view.reshape(shape)
        self._steps = []
        for step in spec.steps:
            if step["kind"] == "kernel":
                fn = getattr(self.lib, step["symbol"])
                fn.argtypes = [ctypes.c_void_p] * len(step["args"])
                fn.restype = ctypes.c_int32
                # pointers of params and arena views are fixed: only inputs/outputs vary per call
                fixed_ptrs = [self.fixed[a].ctypes.data if a in self.fixed else None for a in step["args"]]
                self._steps.append(("kernel", fn, step["args"], fixed_ptrs))
            else:
                # an opaque step runs a host kernel, or the callable `host_steps` gives for its
                # index (a kernel another device runs, e.g. the accelerator's simulator)
                kernel = (host_steps or {}).get(len(self._steps)) or host_kernels.get(step["op"])
                self._steps.append(("opaque", kernel, step))
        self._input_info = [(n, tuple(spec.values[n]["shape"]), dt.to_numpy(spec.values[n]["dtype"]))
                            for n in spec.inputs]
        # values that reinterpret an input's bytes (a reshape of an input): the caller's array
        self._input_views = [(n, info["source"], tuple(info["shape"])) for n, info in spec.values.items()
                             if info["where"] == "input_view"]
        # per call: the outputs to allocate, and which results are copied (a value the model keeps)
        self._fresh_outputs = [(n, tuple(info["shape"]), info["dtype"]) for n, info in spec.values.items()
                               if info["where"] == "output"]
        self._copied = [spec.values[n]["where"] in ("param", "input", "arena") for n in spec.outputs]
        # outputs returned as another output's buffer under their own shape ("output_view")
        self._output_views = {n: (info["source"], tuple(info["shape"])) for n, info in spec.values.items()
                              if info["where"] == "output_view"}
        # the output arrays the last call returned (host memory only): a call reuses one that
        # nothing else references any more (see `_reusable`)
        self._returned: dict[str, np.ndarray] = {}
        # name -> (array, its data address) of the last call's inputs and outputs: NumPy builds
        # an object to answer `.ctypes.data` (about 1.5 us); holding the array keeps the
        # address valid (an array another reference holds cannot be resized)
        self._addresses: dict[str, tuple] = {}
        self._recycle = memory is HOST and _REFCOUNTS_EXACT
        # the plan of a call: kernel runs (one foreign call per run) and the remaining steps
        self._plan: list = []
        by_first = {r["steps"][0]: r for r in spec.runs} if self.lib is not None else {}
        k = 0
        while k < len(self._steps):
            run = by_first.get(k)
            if run is None:
                self._plan.append(("step", k))
                k += 1
                continue
            fn = getattr(self.lib, run["symbol"])
            fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32)]
            fn.restype = ctypes.c_int32
            slots = (ctypes.c_void_p * len(run["slots"]))()
            varying = []
            for i, name in enumerate(run["slots"]):
                if name in self.fixed:
                    slots[i] = self.fixed[name].ctypes.data
                else:
                    varying.append((i, name))
            self._plan.append(("run", fn, slots, varying, run["steps"][0]))
            k = run["steps"][1]
        self._runs_only = all(item[0] == "run" for item in self._plan)

    # -- calling --------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self.spec.inputs)

    @property
    def input_info(self) -> list[tuple[str, tuple, np.dtype]]:
        """(name, shape, dtype) of each input, in order."""
        return list(self._input_info)

    @property
    def output_names(self) -> list[str]:
        return list(self.spec.outputs)

    def __call__(self, *arrays) -> list[np.ndarray]:
        return self._run(inputs_by_position(self.spec, arrays))

    def run(self, **named) -> list[np.ndarray]:
        check_input_names(self.spec, named)
        return self._run(named)

    def run_with(self, named: dict, kernels: dict | None = None,
                 timings: list | None = None) -> list[np.ndarray]:
        """Run on `named` inputs one step at a time, with the kernel steps in `kernels`
        ({step index: a C function of the same buffer arguments, e.g. `Module.raw_function`})
        run instead of the model's own, and each step's seconds added to `timings[k]` when
        given.  This is how the tuner times candidate kernels inside the running model."""
        kernels = kernels or {}
        steps = list(self._steps)
        for k, fn in kernels.items():
            if not 0 <= k < len(steps) or steps[k][0] != "kernel":
                raise ValueError(f"step {k} of model {self.spec.name} is not a kernel step")
            _, _, args, fixed = steps[k]
            steps[k] = ("kernel", fn, args, fixed)
        saved, self._steps = self._steps, steps
        try:
            return self._run(named, timings if timings is not None else [0.0] * len(steps))
        finally:
            self._steps = saved

    def _check(self, named: dict) -> dict:
        env = {}
        for name, shape, dtype in self._input_info:
            env[name] = self.memory.from_host(checked_input(name, named[name], shape, dtype))
        for name, source, shape in self._input_views:
            env[name] = env[source].reshape(shape)      # contiguous (from_host): a view, no copy
        return env

    def _run(self, named: dict, timings: list | None = None) -> list[np.ndarray]:
        # what varies per call (inputs, their views, outputs); params and arena values are fixed
        local = self._check(named)
        for name, shape, dtype in self._fresh_outputs:
            last = self._reusable(name) if self._recycle else None
            local[name] = last if last is not None else self.memory.empty(shape, dtype)
        # a call that is only kernel runs reads nothing else; host steps and timings see all values
        env = local if timings is None and self._runs_only else {**self.fixed, **local}
        if timings is None:
            failed = ctypes.c_int32(0)
            for item in self._plan:
                if item[0] == "step":
                    self._step(item[1], env)
                    continue
                _, fn, slots, varying, first = item
                for i, name in varying:
                    slots[i] = self._address(name, env[name])
                status = fn(slots, ctypes.byref(failed))
                if status:
                    raise self._failure(first + failed.value, status)
            return self._results(env)
        for k in range(len(self._steps)):
            start = time.perf_counter()
            self._step(k, env)
            timings[k] += time.perf_counter() - start
        return self._results(env)

    def _address(self, name: str, a: np.ndarray) -> int:
        known = self._addresses.get(name)
        if known is not None and known[0] is a:
            return known[1]
        address = a.ctypes.data
        self._addresses[name] = (a, address)
        return address

    def _reusable(self, name: str) -> np.ndarray | None:
        """The array this output was returned in last time, when nothing references it any more
        (the caller dropped it and every view of it; a view, a torch tensor sharing its memory or
        a buffer export would each hold a reference): the call writes into it again.

        A fresh array of a few hundred KB or more is fresh pages from the operating system
        whenever the allocator has trimmed its heap in between (another library freeing large
        buffers does that), and touching them costs about 2 us per 4 KB page: more than the
        kernels of a conv layer with a large output."""
        last = self._returned.get(name)
        if last is None:
            return None
        held = _HELD_BY_TABLE + (self._addresses.get(name, (None,))[0] is last)
        if sys.getrefcount(last) != held:
            return None
        # an aligned output is a view of the bytes it was cut from: views the caller took of it
        # reference those, so they must have no holder but `last` either
        if last.base is not None and sys.getrefcount(last.base) != _HELD_BY_VIEW:
            return None
        return last

    def _step(self, k: int, env: dict) -> None:
        step = self._steps[k]
        if step[0] == "kernel":
            _, fn, args, fixed_ptrs = step
            status = fn(*[p if p is not None else env[a].ctypes.data for a, p in zip(args, fixed_ptrs)])
            if status:
                raise self._failure(k, status)
        else:
            _, kernel, info = step
            outs = kernel(*[env[i] if i is not None else None for i in info["inputs"]], **info["attrs"])
            outs = outs if isinstance(outs, (list, tuple)) else [outs]
            for name, value in zip(info["outputs"], outs):
                if name in env:     # an output nothing reads (topk's indices) has no buffer in the plan
                    np.copyto(env[name], np.asarray(value).reshape(env[name].shape), casting="unsafe")

    def _failure(self, k: int, status: int) -> RuntimeError:
        return RuntimeError(f"kernel {self.spec.labels[k] if self.spec.labels else k} failed with status {status}")

    def _results(self, env: dict) -> list[np.ndarray]:
        results = []
        for name, copied in zip(self.spec.outputs, self._copied):
            view = self._output_views.get(name)
            if view is not None:
                results.append(self.memory.to_host(env[view[0]]).reshape(view[1]))
                continue
            a = self.memory.to_host(env[name] if name in env else self.fixed[name])
            results.append(a.copy() if copied else a)
        if self._recycle:
            # the buffers, not the reshaped views of them the caller got: a caller's view
            # references its buffer (or the bytes under it), which `_reusable` counts
            for name, _, _ in self._fresh_outputs:
                a = env[name]
                # an array that owns its memory, or a view of one that does (aligned_empty):
                # further views reference the owner, whose count `_reusable` checks too
                if type(a) is np.ndarray and (a.base is None or (
                        type(a.base) is np.ndarray and a.base.base is None)):
                    self._returned[name] = a
        return results

    def profile(self, *arrays, repeat: int = 10) -> list[tuple[str, float]]:
        """Median-free simple profile: mean seconds per step over `repeat` runs, slowest first."""
        named = dict(zip(self.spec.inputs, arrays))
        timings = [0.0] * len(self._steps)
        self._run(named)
        for _ in range(repeat):
            self._run(named, timings)
        labels = self.spec.labels or [str(k) for k in range(len(self._steps))]
        rows = [(labels[k], timings[k] / repeat) for k in range(len(self._steps))]
        return sorted(rows, key=lambda r: -r[1])


# `sys.getrefcount` of an output referenced only by the executor: `_returned`, the local name in
# `_reusable` and getrefcount's own argument (and `_addresses`, when it holds the output too); of
# the bytes under an aligned output: the output's base pointer and the argument.  Exact under the
# GIL; builds without it defer reference counts, so there outputs are never reused.
_HELD_BY_TABLE = 3
_HELD_BY_VIEW = 2
_REFCOUNTS_EXACT = getattr(sys, "_is_gil_enabled", lambda: True)()


# Input checks shared by the host and device executors ---------------------------------------

def inputs_by_position(spec: ModelSpec, arrays: tuple) -> dict:
    """`model(*arrays)`: the arrays by input name; TypeError when their count is wrong."""
    if len(arrays) != len(spec.inputs):
        raise TypeError(f"model {spec.name} takes {len(spec.inputs)} input(s) "
                        f"({', '.join(spec.inputs)}), got {len(arrays)}")
    return dict(zip(spec.inputs, arrays))


def check_input_names(spec: ModelSpec, named: dict) -> None:
    """`model.run(**named)`: TypeError naming unknown and missing inputs."""
    unknown = sorted(set(named) - set(spec.inputs))
    missing = [n for n in spec.inputs if n not in named]
    if unknown or missing:
        raise TypeError(f"model {spec.name}: unknown input(s) {unknown}, missing {missing}; "
                        f"inputs are {spec.inputs}")


def checked_input(name: str, a, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """Input `name` as a NumPy array (a torch tensor converts), checked against its dtype and
    shape: TypeError or ValueError naming the input, the expected and the given."""
    if type(a) is np.ndarray and a.dtype == dtype and a.shape == shape:     # the common case, first
        return a
    if hasattr(a, "numpy") and not isinstance(a, (np.ndarray, np.generic)):
        a = a.numpy()
    if isinstance(a, np.generic):          # a NumPy scalar (np.float32(0.5)) is a 0-d array
        a = np.asarray(a)
    if not isinstance(a, np.ndarray):
        raise TypeError(f"input {name!r}: expected a NumPy array, got {type(a).__name__}")
    if a.dtype != dtype:
        raise TypeError(f"input {name!r}: expected dtype {dtype.name}, got {a.dtype.name}")
    if a.shape != shape:
        raise ValueError(f"input {name!r}: expected shape {shape}, got {a.shape}")
    return a
