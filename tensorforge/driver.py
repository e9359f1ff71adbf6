"""`compile()`: a Graph through the whole spine to a runnable Model, one named step per arrow.

    graph --optimize--> graph --fuse--> fused groups --apply records--> configs
          --plan kernels--> steps + the kernels they call
          --lower each kernel--> loop programs --build--> one library
            (or, when a build record names the library of these kernels, that library)
          --plan memory--> ModelSpec --> Model

Each step is a function below with one job; `timings` records the three that cost time.  The
low-level path for one schedule (`lower`, `build`) is in build_module.py.
"""
from __future__ import annotations

import dataclasses
import functools
import time
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from . import build_records, compile_progress, parallel_lowering
from .arith.recursion import deep_recursion
from .backends import backend_for
from .batch_buckets import DEFAULT_BATCH_BUCKETS
from .build_module import build, lower  # noqa: F401 - the public API re-exports them from here
from .calibrate import ensure_calibrated
from .compile_progress import CompileProgress
from .frontend.onnx_program import OnnxProgram
from .frontend.torch import TorchProgram
from .frontend.torch_staged import StagedTorchProgram
from .graph.fuse import FusedGroup, fuse
from .graph.ir import Graph, freeze_attr
from .graph.passes.alter_layout_winograd import choosing_tiles
from .graph.passes.lower_precision import lower_precision_units
from .graph.passes.share_equal_params import SharedParams
from .graph.pipeline import optimize
from .graph.plan_memory import plan_memory
from .lowering import CachedText, cache_path, lower_group_cached, text_path
from .ops import registry
from .runtime.executor import ModelSpec
from .runtime.memory import HOST, aligned
from .runtime.module import get_num_threads
from .staged import ShapeSpecializedModel, StagedModel, StagedTorchModel
from .target import Target


def _deep_recursion(fn):
    """`fn` with room for deep recursion (arith/recursion.py): a kernel of a few hundred fused
    element-wise ops is an expression deeper than Python's default 1000 frames, which lowering
    and printing walk recursively (a chain of 400 sin/cos nodes raised RecursionError)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with deep_recursion():
            return fn(*args, **kwargs)
    return wrapper


@_deep_recursion
def compile(graph, target="c", opt_level: int = 3, records=None, name: str | None = None,  # noqa: A001
            threads: int | None = None, precision: str = "fp32",
            batch_buckets: Sequence[int] | None = DEFAULT_BATCH_BUCKETS, sequence_buckets="auto",
            pad_values: dict | None = None, progress=None, shape_generic: bool = True):
    """Compile a Graph into a runnable Model: graph passes, fusion, one kernel per fused group
    (all built with one compiler call), a static memory plan.

    A model that is not one static graph compiles at call time, once per specialization: an
    OnnxProgram (from_onnx of a model with symbolic shapes, control flow, ...) gives a
    StagedModel, a TorchProgram (from_torch with symbolic dimensions) a ShapeSpecializedModel,
    a StagedTorchProgram (from_torch of a module with x[mask], nonzero, masked_select or unique) a
    StagedTorchModel.
    `batch_buckets`: the batch sizes a model with a symbolic batch compiles; another
    batch size runs as chunks of these where the model keeps batch rows apart (batch 7 as
    4 + 2 + 1; see batch_buckets.py).  () or None compiles every batch size as it comes.

    `sequence_buckets`: lengths, or {symbol: lengths}, a symbolic dimension other than the batch
    is padded to: a call whose length is not one runs at the next one up, its inputs padded
    (with 0, or `pad_values[input name]`: the attention mask's 0 marks padding) and its outputs
    cut back, so that a new length compiles nothing once its bucket exists.  The first padded
    call also runs the exact length and compares, padded at the end of the axes and, where that
    differs, at their start (a decoder's key/value cache); where both change the outputs (a
    model that pools over the length, or attends to every position with no mask) padding is
    turned off with a warning (see sequence_buckets.py).  {(symbol, linked, ...): lengths} pads
    the linked symbols by as much (a cache's past length with the mask over past and new tokens).
    "auto" (the default) starts sequence buckets of its own (sequence_buckets.AUTO_BUCKETS) once
    a symbol other than the batch has taken 8 values, with the symbols that keep a fixed distance
    from it linked, trusted after 3 padded calls compared with their exact lengths; a model for
    which padding is wrong just goes on compiling per length.  None turns buckets off.

    `shape_generic`: a staged ONNX program's stretches of element-wise ops and reductions are
    compiled once with shape variables after their second shape (shape_generic.py); False keeps
    one specialization per shape for them too.

    `precision`: "fp32" (the default) or "bf16": convolutions and matrix products with bfloat16
    operands and float32 accumulation, the rest in float32 (graph/passes/lower_precision.py);
    the model's info["precision_units"] says which units run the products.

    `progress`: a line on stderr while a compile lowers many kernels the cache lacks (True;
    None, the default: when stderr is a terminal and at least 12 are missing), a callable
    taking each progress text instead, or False for none (compile_progress.py).

    `records`: tuning records (a path or Record objects) to apply; only those measured with
    `threads` threads apply (default: the thread count this process runs kernels with).  They
    also choose the form of each 3x3 stride-1 conv (direct or Winograd, and its tile) where
    they time more than one (autotune/algorithms.py); info["algorithms"] lists those changed.
    """
    if isinstance(graph, (OnnxProgram, TorchProgram)):
        # not one static graph: compiled per specialization when called (stretch by stretch for
        # an ONNX program, per concrete input shape for an exported PyTorch program)
        _check_options(opt_level, threads)
        Target.parse(target)
        options = {"target": target, "opt_level": opt_level, "records": records, "threads": threads,
                   "precision": precision, "progress": progress}
        if isinstance(graph, StagedTorchProgram):
            return StagedTorchModel(graph, options, batch_buckets=batch_buckets)
        if isinstance(graph, OnnxProgram):
            return StagedModel(graph, options, batch_buckets=batch_buckets, sequence_buckets=sequence_buckets,
                               pad_values=pad_values, shape_generic=shape_generic)
        return ShapeSpecializedModel(graph, options, batch_buckets=batch_buckets, sequence_buckets=sequence_buckets,
                                     pad_values=pad_values)
    if (sequence_buckets and sequence_buckets != "auto") or pad_values:
        raise ValueError("sequence_buckets pads a symbolic dimension, and this graph has none (every shape is "
                         "static); from_onnx(path) without shapes keeps the model's symbols")
    if not isinstance(graph, Graph):
        raise TypeError(f"compile expects a tensorforge Graph (see tensorforge.frontend.from_onnx), "
                        f"got {type(graph).__name__}")
    _check_options(opt_level, threads)
    tgt = Target.parse(target)
    threads = threads or get_num_threads()
    timings: dict = {}
    backend = backend_for(tgt)
    # a device that takes only some kernels (backend.place) leaves the rest to its host target
    host = Target.parse(backend.host_target) if backend.host_target else tgt
    ensure_calibrated(host)
    records, choice = _algorithm_choice(records, host, threads)
    with _timed(timings, "graph passes + fusion"):
        graph, precision_units = lower_precision_units(graph, host, precision)
        with choosing_tiles(choice) if choice is not None else nullcontext():
            graph = optimize(graph, host, opt_level)
        # an output that is a reshape of a value the model computes is that value's buffer
        # under the output's shape: the producer writes it there, with no reshape in its kernel
        graph, output_views = split_output_views(graph) if backend.memory is HOST else (graph, {})
        groups = fuse(graph, enabled=opt_level >= 1)
        # a lone reshape of a tensor in a host arena reinterprets its bytes: no kernel, no copy
        groups, views = split_views(graph, groups) if backend.memory is HOST else (groups, {})
    configs = _apply_records(groups, records, host, threads)
    with _timed(timings, "placement"):
        placed = backend.place(groups, tgt) if backend.place else {}
    kernels = plan_kernels(groups, host, configs, placed)
    module, runs = build_or_restore(kernels, host, timings, progress)
    plan = plan_values(graph, groups, views)
    spec = model_spec(graph, groups, plan, kernels.steps, kernels.labels, runs, name or graph.name, views,
                      output_views)
    params = {v.name: a for v, a in graph.params.items()}
    pool = SHARED_PARAMS.get()
    if pool is not None and backend.memory is HOST:       # equal weights of earlier specializations
        params = pool.intern({k: aligned(a) for k, a in params.items()})
        graph = dataclasses.replace(graph, params={v: params[v.name] for v in graph.params})
    info = {"graph": graph, "groups": groups, "plan": plan, "timings": timings,
            "funcs": kernels.funcs, "target": tgt, "tuned_groups": len(configs), "threads": threads,
            "algorithms": choice.changes if choice is not None else [],
            "precision": precision, "precision_units": precision_units, "placed": placed,
            "placement": [(label, tgt.kind if k in placed else host.kind) for k, label in enumerate(kernels.labels)]}
    return backend.make_model(spec, module, params, info)


# a pool of parameter arrays shared by the models compiled while it is set (the specializations
# of one staged model, the variants of one torch.compile graph): see sharing_params
SHARED_PARAMS: ContextVar[SharedParams | None] = ContextVar("tensorforge_shared_params", default=None)


@contextmanager
def sharing_params(pool: SharedParams):
    """Models compiled inside hold a parameter equal to one in `pool` as that one array."""
    token = SHARED_PARAMS.set(pool)
    try:
        yield pool
    finally:
        SHARED_PARAMS.reset(token)


def _check_options(opt_level, threads) -> None:
    if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0, 1, 2 or 3, got {opt_level!r}")
    if threads is not None and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer, got {threads!r}")


@contextmanager
def _timed(timings: dict, step: str):
    start = time.perf_counter()
    yield
    timings[step] = time.perf_counter() - start


def _algorithm_choice(records, target, threads: int) -> tuple:
    """(records as a list, the chooser of conv forms they time), or (None, None) without records."""
    if records is None:
        return None, None
    from .autotune.algorithms import RecordChoice  # the tuner is optional at compile time
    from .autotune.records import _records
    records = list(_records(records))
    return records, RecordChoice(records, target, threads)


def _apply_records(groups, records, target, threads: int) -> dict:
    if records is None:
        return {}
    from .autotune.dispatch import apply_records  # the tuner is optional at compile time
    return apply_records(groups, records, target, threads)


@dataclass
class Kernels:
    """The lowered form of a graph's groups: one executor step per group (a kernel call or an
    opaque host step), the PrimFuncs to build (one per distinct group signature), a label per
    step, and where each kernel's printed C is cached (lowering.CachedText)."""

    steps: list = field(default_factory=list)
    funcs: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    texts: dict = field(default_factory=dict)
    pending: list = field(default_factory=list)     # PendingKernel, one per distinct signature


@dataclass(frozen=True)
class PendingKernel:
    """A kernel to lower: its name, the group it computes, the group's config (None: the
    template's default) and the path of its lowering cache entry."""
    name: str
    group: FusedGroup
    config: object
    path: Path


def plan_kernels(groups, target: Target, configs: dict, placed: dict | None = None) -> Kernels:
    """The steps and labels of `groups`, and the kernels they call (`pending`), not lowered yet."""
    out = Kernels()
    symbols: dict = {}      # group signature -> name of the kernel for it
    for k, g in enumerate(groups):
        node = g.nodes[0]
        if placed and k in placed:
            out.steps.append(dict(placed[k].step))
            out.labels.append(f"{k}:{node.op}")
            continue
        if g.pattern == "opaque" and registry.get(node.op).is_opaque_kernel:
            attrs = registry.get(node.op).attrs_with_defaults(node.attrs)
            out.steps.append({"kind": "opaque", "op": node.op, "attrs": attrs,
                              "inputs": [v.name if v is not None else None for v in node.inputs],
                              "outputs": [v.name for v in node.outputs]})
            out.labels.append(f"{k}:{node.op}")
            continue
        args = [v.name for v in tuple(g.inputs) + tuple(g.outputs)]
        sig = _group_signature(g, configs.get(id(g)))
        if sig not in symbols:
            fname = f"k{k}_{g.nodes[-1].op if g.master is None else g.master.op}".replace(".", "_")
            out.pending.append(PendingKernel(fname, g, configs.get(id(g)), cache_path(sig, target)))
            symbols[sig] = fname
        # the same computation on values of the same shapes: one kernel serves both
        out.steps.append({"kind": "kernel", "symbol": symbols[sig], "args": args})
        out.labels.append(f"{k}:{'+'.join(n.op for n in g.nodes)}")
    return out


def lower_pending(kernels: Kernels, target: Target, missing: list, bar: CompileProgress | None = None) -> None:
    """Lower the kernels `plan_kernels` left pending, into `kernels.funcs` (in their order); the
    `missing` ones (not in the lowering cache) on all cores when there are enough
    (parallel_lowering.py).  `bar` counts each missing kernel lowered."""
    lowered = parallel_lowering.prelower(missing, target, backend_for(target), bar.lowered if bar is not None else None)
    counted = {p.name for p in missing} if bar is not None else set()
    for p in kernels.pending:
        func = lowered.get(p.name)
        if func is None:
            func = lower_group_cached(p.group, target, p.name, p.config, p.path)
            if p.name in counted:
                bar.lowered()
        kernels.funcs.append(func)
        kernels.texts[p.name] = CachedText(text_path(p.path))


def build_kernels(kernels: Kernels, target: Target, key: str | None = None):
    """Build every kernel into one library with the target's backend; returns (module, runs).
    Where the backend supports them, consecutive kernel steps are also compiled into one C
    function each (`runs`, see _kernel_runs); kernel steps then name the built symbols.  With
    a build record `key` (build_records.py), the build is recorded under it."""
    if not kernels.funcs:
        return None, []
    backend = backend_for(target)
    sequences = []
    if backend.supports_sequences and not any(f.shape_vars for f in kernels.funcs):
        sequences = _kernel_runs(kernels.steps)
    module = backend.build(kernels.funcs, target, sequences=[(r["symbol"], r["calls"]) for r in sequences],
                           text_cache=kernels.texts)
    if key is not None:
        build_records.keep(key, kernels, backend, target, module, bool(sequences))
    _name_built(kernels.steps, {f.name: build_records.buffer_record(f) for f in kernels.funcs}, module)
    return module, _run_entries(sequences)


def _name_built(steps: list, buffers: dict, module) -> None:
    """Kernel steps name the built kernel's C symbol and record its buffers ({kernel name:
    buffer record}), which are checked when an exported model is loaded."""
    for step in steps:
        if step["kind"] == "kernel":
            step["params"] = buffers[step["symbol"]]
            step["symbol"] = _symbol(module, step["symbol"])


def _run_entries(runs: list) -> list:
    """What the model spec keeps of each kernel run (_kernel_runs): its symbol, steps and slots."""
    return [{"symbol": r["symbol"], "steps": r["steps"], "slots": r["slots"]} for r in runs]


def build_or_restore(kernels: Kernels, target: Target, timings: dict, progress=None):
    """(module, runs) of `kernels` (plan_kernels): from the build recorded for them when the
    backend can load it again (nothing is lowered; kernels.funcs reads the loop programs back
    when looked at), else lowered (timed as "lowering") and built (as "compile")."""
    backend = backend_for(target)
    key = None
    if kernels.pending and backend.restore is not None:
        with _timed(timings, "restore"):
            runs = _kernel_runs(kernels.steps)
            key = build_records.record_key(kernels, [r["calls"] for r in runs], target, backend)
            found = build_records.restore(key, kernels, backend, target)
        if found is not None:
            module, record = found
            runs = runs if record.get("sequences") else []
            _name_built(kernels.steps, record["kernels"], module)
            kernels.funcs = build_records.LazyFuncs(kernels.pending, target)
            return module, _run_entries(runs)
    missing = [p for p in kernels.pending if not p.path.exists()]
    bar = compile_progress.start(progress, len(missing))
    try:
        with _timed(timings, "lowering"):
            lower_pending(kernels, target, missing, bar)
        if bar is not None:
            bar.compiling(len(kernels.funcs))
        with _timed(timings, "compile"):
            return build_kernels(kernels, target, key)
    finally:
        if bar is not None:
            bar.close()


# ops whose output, for a row-major tensor, is its input's bytes under another shape
VIEW_OPS = frozenset({"reshape", "flatten", "squeeze", "unsqueeze", "identity"})


def split_views(graph, groups) -> tuple[list, dict]:
    """(the groups that compute, {output Value: the Value whose bytes it reuses}): a group that
    is one view op on an intermediate tensor becomes an alias of that tensor in the arena, and
    one on a graph input an alias of the caller's array.  Params and outputs keep their own
    buffers."""
    external = set(graph.params) | set(graph.outputs)
    views: dict = {}
    kept = []
    for g in groups:
        node = g.nodes[0]
        if len(g.nodes) == 1 and node.op in VIEW_OPS and len(node.outputs) == 1 and node.inputs[0] is not None:
            source, out = views.get(node.inputs[0], node.inputs[0]), node.outputs[0]
            if source not in external and out not in external and out not in graph.inputs \
                    and source.dtype == out.dtype and source.size == out.size:
                views[out] = source
                continue
        kept.append(g)
    return kept, views


def split_output_views(graph) -> tuple:
    """(the graph, {output Value: the Value whose buffer it reinterprets}): a graph output made
    by a view op (reshape, flatten, ...) of a value some node computes, which nothing else reads
    and which is no graph input, param or other output, is dropped; that value becomes the graph
    output in its place, and the model returns its buffer under the output's shape.  (A reshape
    fused into the producer's kernel would make it write a scratch tile and copy it.)"""
    outputs = list(graph.outputs)
    produced, readers = graph.producers(), graph.consumers()
    external = set(graph.inputs) | set(graph.params)
    dropped, views = set(), {}
    for i, out in enumerate(outputs):
        node = produced.get(out)
        if node is None or node.op not in VIEW_OPS or len(node.outputs) != 1 or outputs.count(out) != 1:
            continue
        source = node.inputs[0]
        if source is None or source in external or source in outputs or len(readers.get(source, ())) != 1 \
                or source not in produced or out in readers or source.dtype != out.dtype \
                or source.size != out.size:
            continue
        outputs[i] = source
        views[out] = source
        dropped.add(node)
    if not views:
        return graph, {}
    return graph.with_nodes([n for n in graph.nodes if n not in dropped], outputs=outputs), views


def plan_values(graph, groups, views: dict | None = None):
    """The static memory plan of the values passed between groups (graph inputs, params and
    outputs live outside the arena); a view shares its source's bytes, which stay live as long
    as the view is read."""
    views = views or {}
    external = set(graph.inputs) | set(graph.params) | set(graph.outputs)
    steps = [(tuple(views.get(v, v) for v in g.inputs), g.outputs) for g in groups]
    plan = plan_memory(steps, external)
    for out, source in views.items():
        if source not in external:              # a view of an input is the caller's array
            plan.offsets[out] = plan.offsets[source]
    plan.graph_bytes = sum(v.nbytes for n in graph.nodes for v in n.outputs if v not in external)
    return plan


def model_spec(graph, groups, plan, steps: list, labels: list, runs: list, name: str,
               views: dict | None = None, output_views: dict | None = None) -> ModelSpec:
    """The plain-data description the executor runs: every value with its shape, dtype and
    place (input, param, output, or an offset in the arena), the steps and the kernel runs.
    `output_views` ({output: the graph output whose buffer it is}, split_output_views) name the
    outputs the caller gets in place of those graph outputs."""
    _check_unique_names(graph)
    values = {}
    for v in graph.inputs:
        values[v.name] = {"shape": list(v.shape), "dtype": v.dtype, "where": "input", "offset": 0}
    for v in graph.params:
        values[v.name] = {"shape": list(v.shape), "dtype": v.dtype, "where": "param", "offset": 0}
    for g in groups:
        for v in g.outputs:
            where = "output" if v in graph.outputs else "arena"
            values[v.name] = {"shape": list(v.shape), "dtype": v.dtype, "where": where,
                              "offset": plan.offsets.get(v, 0)}
    inputs = set(graph.inputs)
    for v, source in (views or {}).items():
        # "source": the value whose bytes a view reuses (an executor without an arena, such as
        # the device executor, shares that value's buffer)
        values[v.name] = {"shape": list(v.shape), "dtype": v.dtype, "where": "input_view", "offset": 0,
                          "source": source.name} if source in inputs else \
            {"shape": list(v.shape), "dtype": v.dtype, "where": "arena", "offset": plan.offsets[v],
             "source": source.name}
    returned = {source: out for out, source in (output_views or {}).items()}
    for out, source in (output_views or {}).items():
        values[out.name] = {"shape": list(out.shape), "dtype": out.dtype, "where": "output_view", "offset": 0,
                            "source": source.name}
    return ModelSpec(name, [v.name for v in graph.inputs], [returned.get(v, v).name for v in graph.outputs],
                     values, steps, plan.total_bytes, labels, runs)


def _kernel_runs(steps: list) -> list[dict]:
    """Each stretch of consecutive kernel steps as one C function that calls them in order (the
    executor then makes one foreign call per stretch instead of one per kernel): its symbol,
    the steps [first, end) it covers, its pointer slots (value names) and its calls."""
    runs: list[dict] = []
    k = 0
    while k < len(steps):
        if steps[k]["kind"] != "kernel":
            k += 1
            continue
        first, slots, calls = k, [], []
        while k < len(steps) and steps[k]["kind"] == "kernel":
            for a in steps[k]["args"]:
                if a not in slots:
                    slots.append(a)
            calls.append((steps[k]["symbol"], [slots.index(a) for a in steps[k]["args"]]))
            k += 1
        runs.append({"symbol": f"tf_run_{len(runs)}", "steps": [first, k], "slots": slots, "calls": calls})
    return runs


def _group_signature(group, config) -> tuple:
    """What a group's kernel depends on: its nodes' ops and attributes, how they are wired to
    each other and to the group's inputs, the shapes and dtypes of inputs and outputs, and the
    schedule config.  Two groups with one signature compute the same function of their
    arguments (values are passed to kernels, never built into them)."""
    where: dict = {v: ("in", i) for i, v in enumerate(group.inputs)}
    nodes = []
    for k, n in enumerate(group.nodes):
        ins = tuple(None if v is None else where[v] for v in n.inputs)
        attrs = tuple(sorted((name, freeze_attr(v)) for name, v in n.attrs.items()))
        nodes.append((n.op, attrs, ins, tuple((tuple(v.shape), v.dtype) for v in n.outputs),
                      n is group.master))
        for j, v in enumerate(n.outputs):
            where[v] = ("node", k, j)
    return (group.pattern, tuple(nodes), tuple((tuple(v.shape), v.dtype) for v in group.inputs),
            tuple(where[v] for v in group.outputs), None if config is None else repr(config.to_json()))


def _symbol(module, name: str) -> str:
    """The C symbol of kernel `name` in `module` (the code generator may rename it)."""
    cfunc = getattr(module.get_function(name), "_cfunc", None)
    return cfunc.__name__ if cfunc is not None else name     # device modules keep their names


def _check_unique_names(graph) -> None:
    seen = set()
    for v in list(graph.inputs) + list(graph.params) + [o for n in graph.nodes for o in n.outputs]:
        if v.name in seen:
            raise ValueError(f"value name {v.name!r} is used twice in graph {graph.name}")
        seen.add(v.name)
