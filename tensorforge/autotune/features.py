"""Features of a candidate's loop program: the `config -> feature vector` arrow that the cost
model (cost_model.py) learns from, as in the paper's section 5.2.

Which program.  A candidate's full lowering (`build_candidate`) runs bound inference and loop
generation (`tir.build.schedule_to_primfunc`), then the loop-IR passes; for ResNet-18's C2 conv
that is about a third loop generation and two thirds passes (simplification mostly).  The
features read the program right after loop generation: the loops already carry their final
extents and their kinds (vectorized, unrolled, parallel), and the accesses are still
multi-dimensional, which makes strides easy to read.  Loops of extent 1 are skipped, so the
program reads like the simplified one.  A config whose template or lowering raises gets the
all-zero vector (no real program has it: a lowered program has at least one statement).

What is read.  Each `BufferStore` is a statement with its loop nest (outermost first) and its
accesses (the store, then the loads of its value).  The *hot* statement is the one executed
most often (the update of a reduction in every template here); the layout describes it in
detail and the rest of the program in aggregate:

  globals (N_GLOBAL = 16)
    0 log2(1 + float ops executed)          8 log2(1 + loops of extent > 1)
    1 log2(1 + statement executions)        9 depth of the hot nest
    2 share of executions in vector loops   10 log2(1 + bytes of local buffers)
    3 log2(1 + hot vector length)           11 log2(1 + bytes of global temporaries)
    4 log2(1 + hot parallel extent)         12 share of executions under a guard (if)
    5 share of executions in parallel loops 13 log2(1 + statements)
    6 log2(1 + hot unrolled iterations)     14 log2(1 + executions of the other statements)
    7 log2(1 + most unrolled iterations)    15 log2(1 + bytes the other statements access)
  per buffer slot k < K = 4 (N_BUFFER = 4): present, stored, local scope, log2(1 + bytes)
  per loop level l < L = 8 of the hot nest, innermost first (N_LOOP = 6):
    log2(1 + extent), one-hot kind (serial, parallel, vectorized, unrolled), depth / nest depth
  per (level l, buffer slot k) (N_ACCESS = 4), for the loops from level l inward:
    log2(1 + |stride|)        elements the address moves per iteration of the level's loop
    log2(1 + touched)         elements touched: product of the extents of the loops the index
                              depends on (capped at the buffer's size)
    log2(1 + touched bytes)
    log2(1 + reuse)           iterations / touched elements

Buffer slots: slot 0 is the buffer the hot statement stores to, the next slots its other
buffers in the order the value reads them.  That order is the compute definition's, so a slot
means the same operand for every config of a task and for every task of one template (what
transfer learning needs); sorting by touched bytes would swap slots between tasks.  Slots and
levels that do not exist stay zero.  A stride is the mean |address step| over the loop's first
(up to 8) iterations with the other loop variables at 0: exact for affine indices, and for a
fused loop it tells `f // 4` (a step now and then) from `f % 4` (steps back and forth).

Cost: featurizing is bound by loop generation (its bound inference mostly); reading the
program is a small part.  It costs a fraction of `build_candidate` (about a quarter), since it
stops before the later loop passes and the C compiler.  Vectors are cached per (task key, config index) in the process that asks; see
`FeatureExtractor` for the pool that spreads a large batch over processes.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import math
import os
import signal
import threading
import warnings
import weakref
from collections import OrderedDict
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, fields, is_dataclass
from typing import Callable, Sequence

import numpy as np

from ..ir import dtype as dt
from ..ir import expr as E
from ..te.space import ConfigEntity, ConfigSpace
from ..tir import nodes as N
from .task import Task, instantiate

K_BUFFERS = 4
L_LEVELS = 8
N_GLOBAL = 16
N_BUFFER = 4
N_LOOP = 6
N_ACCESS = 4
KINDS = (N.SERIAL, N.PARALLEL, N.VECTORIZED, N.UNROLLED)
GLOBALS = ("flops", "executions", "vector_share", "hot_vector_len", "hot_parallel_extent", "parallel_share",
           "hot_unrolled", "max_unrolled", "loops", "hot_depth", "local_bytes", "temp_bytes", "guarded_share",
           "statements", "other_executions", "other_bytes")
LENGTH = N_GLOBAL + K_BUFFERS * N_BUFFER + L_LEVELS * (N_LOOP + K_BUFFERS * N_ACCESS)

Featurizer = Callable[[Task, Sequence[ConfigEntity]], np.ndarray]


def feature_names() -> list[str]:
    """One name per position of the vector (the layout of the module docstring)."""
    names = list(GLOBALS)
    for k in range(K_BUFFERS):
        names += [f"b{k}.present", f"b{k}.stored", f"b{k}.local", f"b{k}.bytes"]
    for lv in range(L_LEVELS):
        names += [f"l{lv}.extent"] + [f"l{lv}.{kind}" for kind in KINDS] + [f"l{lv}.depth"]
        for k in range(K_BUFFERS):
            names += [f"l{lv}.b{k}.stride", f"l{lv}.b{k}.touched", f"l{lv}.b{k}.touched_bytes",
                      f"l{lv}.b{k}.reuse"]
    assert len(names) == LENGTH
    return names


# Reading the program -------------------------------------------------------------------------

@dataclass(frozen=True)
class _Loop:
    var: E.Var
    extent: int
    kind: str


@dataclass
class _Statement:
    loops: tuple                 # _Loop, outermost first, extent > 1 only
    store: N.BufferStore
    loads: list                  # BufferLoad, in the order the value reads them
    float_ops: int
    guarded: bool

    @property
    def executions(self) -> int:
        return math.prod(lp.extent for lp in self.loops)


def _int(e: E.Expr, default: int = 1) -> int:
    return int(e.value) if isinstance(e, E.IntImm) else default


def _children(e) -> list:
    """The sub-expressions of a dataclass expression (fields and tuples of them)."""
    out = []
    for f in fields(e):
        value = getattr(e, f.name)
        if isinstance(value, E.Expr):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(x for x in value if isinstance(x, E.Expr))
    return out


def _read_value(e: E.Expr, loads: list) -> int:
    """Collect the loads of a stored value (not looking into their indices); return how many
    floating-point operations it performs."""
    if isinstance(e, N.BufferLoad):
        loads.append(e)
        return 0
    if isinstance(e, (E.Var, E.IntImm, E.FloatImm, E.StringImm)):
        return 0
    ops = 0
    if isinstance(e, E.BinaryOp) and not isinstance(e, E.CmpOp) and dt.is_float(e.dtype):
        ops = 1
    elif isinstance(e, E.Call):
        ops = 1
    if is_dataclass(e):
        for child in _children(e):
            ops += _read_value(child, loads)
    return ops


def _collect(func: N.PrimFunc) -> tuple[list[_Statement], list[N.Buffer]]:
    """The statements of `func` with their loop nests, and its allocated buffers."""
    statements: list[_Statement] = []
    allocs: list[N.Buffer] = []

    def walk(s, loops: tuple, guarded: bool) -> None:
        if isinstance(s, N.For):
            ext = _int(s.extent)
            inner = loops + (_Loop(s.loop_var, ext, s.kind),) if ext > 1 else loops
            walk(s.body, inner, guarded)
        elif isinstance(s, N.SeqStmt):
            for x in s.seq:
                walk(x, loops, guarded)
        elif isinstance(s, N.IfThenElse):
            walk(s.then_case, loops, True)
            if s.else_case is not None:
                walk(s.else_case, loops, True)
        elif isinstance(s, N.Allocate):
            allocs.append(s.buffer)
            walk(s.body, loops, guarded)
        elif isinstance(s, (N.LetStmt, N.AttrStmt)):
            walk(s.body, loops, guarded)
        elif isinstance(s, N.BufferStore):
            loads: list = []
            ops = _read_value(s.value, loads)
            statements.append(_Statement(loops, s, loads, ops, guarded))

    walk(func.body, (), False)
    return statements, allocs


def _eval(e: E.Expr, env: dict) -> float:
    """The value of an index expression with loop variables from `env` (absent ones are 0)."""
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return env.get(e, 0)
    if isinstance(e, E.BinaryOp) and not isinstance(e, E.CmpOp):
        a, b = _eval(e.a, env), _eval(e.b, env)
        if isinstance(e, E.Add):
            return a + b
        if isinstance(e, E.Sub):
            return a - b
        if isinstance(e, E.Mul):
            return a * b
        if isinstance(e, (E.FloorDiv, E.Div)):
            return a // b if b else 0
        if isinstance(e, E.FloorMod):
            return a % b if b else 0
        if isinstance(e, E.Min):
            return min(a, b)
        if isinstance(e, E.Max):
            return max(a, b)
    if isinstance(e, E.Cast):
        return _eval(e.value, env)
    if isinstance(e, E.Select):
        return _eval(e.true_value, env)
    if isinstance(e, E.Ramp):
        return _eval(e.base, env)
    if isinstance(e, E.Broadcast):
        return _eval(e.value, env)
    if isinstance(e, E.Let):
        return _eval(e.body, {**env, e.var: _eval(e.value, env)})
    return 0


def _vars(e, found: set) -> set:
    if isinstance(e, E.Var):
        found.add(e)
    elif is_dataclass(e) and not isinstance(e, (E.IntImm, E.FloatImm)):
        for child in _children(e):
            _vars(child, found)
    return found


def _flat(buffer: N.Buffer, indices: tuple, env: dict) -> float:
    """The element offset of `buffer[indices]` (row-major)."""
    offset = 0
    for dim, idx in zip(buffer.shape, indices):
        offset = offset * _int(dim) + _eval(idx, env)
    return offset


STRIDE_STEPS = 8


def _stride(buffer: N.Buffer, indices: tuple, loop: _Loop) -> float:
    """Mean |address step| of `buffer[indices]` over the loop's first iterations (at most
    STRIDE_STEPS), the other loop variables at 0: the stride for an affine index; for fused
    loops it tells `f // 4` (a step now and then) from `f % 4` (steps back and forth)."""
    steps = min(loop.extent - 1, STRIDE_STEPS)
    addresses = [_flat(buffer, indices, {loop.var: v}) for v in range(steps + 1)]
    return sum(abs(b - a) for a, b in zip(addresses, addresses[1:])) / steps


def _elements(buffer: N.Buffer) -> int:
    return math.prod(_int(d) for d in buffer.shape)


def _log(x: float) -> float:
    return math.log2(1.0 + abs(x))


def program_features(func: N.PrimFunc) -> np.ndarray:
    """The feature vector of a loop program (layout: the module docstring)."""
    out = np.zeros(LENGTH, np.float32)
    statements, allocs = _collect(func)
    if not statements:
        return out
    hot = max(statements, key=lambda s: (s.executions, len(s.loads)))
    total = sum(s.executions for s in statements)

    def share(pred) -> float:
        return sum(s.executions for s in statements if pred(s)) / total

    def kind_extent(s: _Statement, kind: str) -> int:
        return math.prod(lp.extent for lp in s.loops if lp.kind == kind)

    others = [s for s in statements if s is not hot]
    access_bytes = lambda s: dt.itemsize(s.store.buffer.dtype) * (1 + len(s.loads))   # noqa: E731
    vector = [lp.extent for lp in hot.loops if lp.kind == N.VECTORIZED]
    parallel = any(lp.kind == N.PARALLEL for lp in hot.loops)
    g = {
        "flops": _log(sum(s.float_ops * s.executions for s in statements)),
        "executions": _log(total),
        "vector_share": share(lambda s: any(lp.kind == N.VECTORIZED for lp in s.loops)),
        "hot_vector_len": _log(vector[-1] if vector else 0),
        "hot_parallel_extent": _log(kind_extent(hot, N.PARALLEL) if parallel else 0),
        "parallel_share": share(lambda s: any(lp.kind == N.PARALLEL for lp in s.loops)),
        "hot_unrolled": _log(kind_extent(hot, N.UNROLLED)),
        "max_unrolled": _log(max(kind_extent(s, N.UNROLLED) for s in statements)),
        "loops": _log(len({lp.var for s in statements for lp in s.loops})),
        "hot_depth": len(hot.loops),
        "local_bytes": _log(sum(_elements(b) * dt.itemsize(b.dtype) for b in allocs if b.scope == N.LOCAL)),
        "temp_bytes": _log(sum(_elements(b) * dt.itemsize(b.dtype) for b in allocs if b.scope != N.LOCAL)),
        "guarded_share": share(lambda s: s.guarded),
        "statements": _log(len(statements)),
        "other_executions": _log(sum(s.executions for s in others)),
        "other_bytes": _log(sum(s.executions * access_bytes(s) for s in others)),
    }
    out[:N_GLOBAL] = [g[name] for name in GLOBALS]

    # buffer slots: the stored buffer, then the loaded ones in reading order
    slots: list[tuple[N.Buffer, list[tuple]]] = [(hot.store.buffer, [hot.store.indices])]
    for ld in hot.loads:
        for buf, sites in slots:
            if buf is ld.buffer:
                sites.append(ld.indices)
                break
        else:
            slots.append((ld.buffer, [ld.indices]))
    slots = slots[:K_BUFFERS]
    base = N_GLOBAL
    for k, (buf, _) in enumerate(slots):
        out[base + k * N_BUFFER: base + (k + 1) * N_BUFFER] = [
            1.0, 1.0 if k == 0 else 0.0, 1.0 if buf.scope == N.LOCAL else 0.0,
            _log(_elements(buf) * dt.itemsize(buf.dtype))]

    # loop levels of the hot nest, innermost first, with each buffer's access pattern there
    depth = len(hot.loops)
    base = N_GLOBAL + K_BUFFERS * N_BUFFER
    width = N_LOOP + K_BUFFERS * N_ACCESS
    deps = [set().union(*(_vars(i, set()) for idx in sites for i in idx)) for _, sites in slots]
    iterations, touched = 1, [1] * len(slots)
    for lv, lp in enumerate(reversed(hot.loops)):
        iterations *= lp.extent
        if lv >= L_LEVELS:
            continue
        at = base + lv * width
        out[at] = _log(lp.extent)
        out[at + 1 + KINDS.index(lp.kind if lp.kind in KINDS else N.SERIAL)] = 1.0
        out[at + 5] = (depth - 1 - lv) / depth
        for k, (buf, sites) in enumerate(slots):
            if lp.var in deps[k]:
                touched[k] = min(touched[k] * lp.extent, _elements(buf))
                stride = _stride(buf, sites[0], lp)
            else:
                stride = 0.0
            a = at + N_LOOP + k * N_ACCESS
            out[a:a + N_ACCESS] = [_log(stride), _log(touched[k]), _log(touched[k] * dt.itemsize(buf.dtype)),
                                   _log(iterations / touched[k])]
    return out


# Featurizing candidates ----------------------------------------------------------------------

def featurized_program(task: Task, config: ConfigEntity) -> N.PrimFunc:
    """The loop program the features read: `task` under `config` after loop generation."""
    from ..tir.build import schedule_to_primfunc

    s, args = instantiate(task, config)
    return schedule_to_primfunc(s, args, "candidate")


FEATURE_TIMEOUT = 10.0      # seconds one config may take to lower for its features (normally ~10 ms)


class _LoweringTimeout(Exception):
    pass


def _on_alarm(signum, frame):
    raise _LoweringTimeout()


@contextlib.contextmanager
def _time_limit(seconds: float):
    """Interrupt the block after `seconds` (SIGALRM), where that is possible: in the main thread
    of a POSIX process with no other timer armed.  Elsewhere the block runs unbounded."""
    usable = (hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
              and signal.getitimer(signal.ITIMER_REAL)[0] == 0)
    if not usable:
        yield
        return
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def config_features(task: Task, config: ConfigEntity) -> np.ndarray:
    """The feature vector of one candidate (all zeros when the candidate fails to lower, or
    takes longer than FEATURE_TIMEOUT to: a template that hangs must not stop the search)."""
    try:
        with _time_limit(FEATURE_TIMEOUT):
            func = featurized_program(task, config)
    except _LoweringTimeout:
        warnings.warn(f"{task.name}: config {config.index} took more than {FEATURE_TIMEOUT:g} s to lower "
                      "for its features; it gets the all-zero vector", RuntimeWarning, stacklevel=2)
        return np.zeros(LENGTH, np.float32)
    except Exception:       # noqa: BLE001 - a config that does not lower is a (failed) candidate too
        return np.zeros(LENGTH, np.float32)
    return program_features(func)


class _Cache:
    """{(task key, config index): vector}, least recently used tasks dropped past `limit`
    vectors in all."""

    def __init__(self, limit: int = 200_000):
        self.limit = limit
        self.tasks: OrderedDict[str, dict[int, np.ndarray]] = OrderedDict()
        self.count = 0

    def of(self, task_key: str) -> dict[int, np.ndarray]:
        table = self.tasks.get(task_key)
        if table is None:
            table = self.tasks[task_key] = {}
        self.tasks.move_to_end(task_key)
        return table

    def added(self, n: int) -> None:
        self.count += n
        while self.count > self.limit and len(self.tasks) > 1:
            _, old = self.tasks.popitem(last=False)
            self.count -= len(old)


_CACHE = _Cache()
PARALLEL_MIN = 64       # below this many uncached configs, starting processes costs more than it saves


def _features_job(task_json: dict, modules: list, indices: list) -> np.ndarray:
    """In a pool process: the feature vectors of configs `indices` of a task."""
    from ..errors import install_warning_format
    from .measure import _import

    install_warning_format()        # a warning from a pool process is one line too, with no source
    _import(modules)
    task = Task.from_json(task_json)
    space = task.config_space
    return np.stack([config_features(task, space.get(i)) for i in indices])


def default_parallel() -> int:
    """Half the CPUs: featurizing runs between measurements, beside the builder's and runner's
    processes.  (On 2 busy cores a 2-process pool featurized 500 conv configs slower than one
    process did: starting processes and importing costs about as much as it saves.)"""
    return max(1, (os.cpu_count() or 1) // 2)


class FeatureExtractor:
    """Featurizes candidates with the cache, serially for small batches and in a pool of
    `n_parallel` processes (default: `default_parallel()`; started with "spawn") for large
    ones.  The pool is stopped after each large batch unless `keep_pool` (then at `close`, or
    when the extractor is collected): a tuner needs it once, for its whole space, and the
    tuners of many tasks live side by side in one tuning run."""

    def __init__(self, n_parallel: int | None = None, parallel_min: int = PARALLEL_MIN, keep_pool: bool = False):
        self.n_parallel = max(1, n_parallel or default_parallel())
        self.parallel_min = parallel_min
        self.keep_pool = keep_pool
        self._pool: cf.ProcessPoolExecutor | None = None
        self._finalizer = None

    def __call__(self, task: Task, configs: Sequence[ConfigEntity]) -> np.ndarray:
        table = _CACHE.of(task.key)
        missing = list(dict.fromkeys(c.index for c in configs if c.index not in table))
        if missing:
            if self.n_parallel > 1 and len(missing) >= self.parallel_min:
                try:
                    vectors = self._parallel(task, missing)
                finally:
                    if not self.keep_pool:
                        self.close()
            else:
                space = task.config_space
                vectors = [config_features(task, space.get(i)) for i in missing]
            table.update(zip(missing, vectors))
            _CACHE.added(len(missing))
        if not configs:
            return np.zeros((0, LENGTH), np.float32)
        return np.stack([table[c.index] for c in configs])

    def _parallel(self, task: Task, indices: list[int]) -> list[np.ndarray]:
        from .measure import _spawn, template_modules

        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(self.n_parallel, mp_context=_spawn())
            self._finalizer = weakref.finalize(self, self._pool.shutdown, wait=False, cancel_futures=True)
        chunks = max(1, min(len(indices), 4 * self.n_parallel))
        size = -(-len(indices) // chunks)
        modules, task_json = template_modules([task]), task.to_json()
        try:
            futures = [self._pool.submit(_features_job, task_json, modules, indices[k:k + size])
                       for k in range(0, len(indices), size)]
            return [v for f in futures for v in f.result()]
        except BrokenProcessPool as err:
            # a worker died (killed, out of memory, or a script without the `__main__` guard
            # that "spawn" needs): carry on in this process
            warnings.warn(f"featurizing processes failed ({err}); featurizing serially", RuntimeWarning, stacklevel=3)
            self.close()
            space = task.config_space
            return [config_features(task, space.get(i)) for i in indices]

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> "FeatureExtractor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def extract_features(task: Task, configs: Sequence[ConfigEntity], n_parallel: int | None = None) -> np.ndarray:
    """Feature vectors of `configs` of `task`, shape (len(configs), LENGTH), cached per
    (task, config index).  A batch of at least PARALLEL_MIN uncached configs is spread over
    `n_parallel` processes (default: half the CPUs; 1: serial), started for this call."""
    with FeatureExtractor(n_parallel) as fx:
        return fx(task, configs)


def clear_cache() -> None:
    """Forget every cached feature vector (e.g. after a template changed in this process)."""
    _CACHE.tasks.clear()
    _CACHE.count = 0


# Knob features: the config itself -----------------------------------------------------------

def knob_features(space: ConfigSpace, configs: Sequence[ConfigEntity]) -> np.ndarray:
    """A cheap alternative with no lowering: each knob's value as numbers (split sizes as
    log2, a reorder's permutation, an annotation one-hot per axis, a plain knob's value or,
    for strings, its index).  The length depends on the space, so these do not transfer
    between tasks."""
    rows = [[x for knob, i in zip(space.knobs.values(), c.indices) for x in _knob_numbers(knob, i)]
            for c in configs]
    width = sum(len(_knob_numbers(k, 0)) for k in space.knobs.values())
    return np.asarray(rows, np.float32).reshape(len(configs), width)


def _knob_numbers(knob, index: int) -> list[float]:
    from ..te.space import ANNOTATIONS

    e = knob.entities[index]
    if knob.kind == "split":
        return [math.log2(max(1, s)) for s in e.size]
    if knob.kind == "reorder":
        return [float(p) for p in e.perm]
    if knob.kind == "annotate":
        return [1.0 if a == name else 0.0 for a in e.anns for name in ANNOTATIONS]
    value = e.val
    return [float(value) if isinstance(value, (bool, int, float)) else float(index)]
