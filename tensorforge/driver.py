"""The pipeline as straight-line code: schedule -> loop program -> passes -> backend module.

(`compile()` for whole graphs joins this file with the graph compiler.)
"""
from __future__ import annotations

from typing import Sequence

from .te.schedule import Schedule
from .te.tensor import Tensor
from .tir import nodes as N
from .tir.build import schedule_to_primfunc
from .tir.pipeline import run_pipeline


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main") -> N.PrimFunc:
    """The loop program of `sch` with `args` as its parameters, after all loop-IR passes.
    `print()` it to read it."""
    if not isinstance(sch, Schedule):
        raise TypeError(f"lower expects a te.Schedule, got {type(sch).__name__}")
    return run_pipeline(schedule_to_primfunc(sch, args, name))


def build(inputs, args: Sequence[Tensor] | None = None, target="c", name: str = "main"):
    """Compile to a callable Module.

    `inputs` is a Schedule (with `args`), a PrimFunc, or a list of PrimFuncs (several kernels go
    into one library with one compiler call).
    """
    from .backends import backend_for
    from .target import Target

    tgt = Target.parse(target)
    if isinstance(inputs, Schedule):
        if args is None:
            raise TypeError("build(schedule, args): the argument tensors are required")
        funcs = [lower(inputs, args, name)]
    elif isinstance(inputs, N.PrimFunc):
        funcs = [inputs]
    elif isinstance(inputs, (list, tuple)) and all(isinstance(f, N.PrimFunc) for f in inputs):
        funcs = list(inputs)
        names = [f.name for f in funcs]
        if len(set(names)) != len(names):
            raise ValueError(f"functions in one module need distinct names, got {names}")
    else:
        raise TypeError("build expects a Schedule (with args), a PrimFunc or a list of PrimFuncs")
    return backend_for(tgt).build(funcs, tgt)


def compile(graph, target="c", opt_level: int = 3, records=None, name: str | None = None):  # noqa: A001
    """Compile a Graph into a runnable Model: graph passes, fusion, one kernel per fused group
    (all built with one compiler call), a static memory plan."""
    import time

    from .graph.fuse import fuse
    from .graph.ir import Graph
    from .graph.pipeline import optimize
    from .graph.plan_memory import plan_memory
    from .lowering import cache_path, lower_group_cached, text_path
    from .runtime.executor import ModelSpec
    from .runtime.model import Model
    from .target import Target

    if not isinstance(graph, Graph):
        raise TypeError(f"compile expects a tensorforge Graph (see tensorforge.frontend.from_onnx), "
                        f"got {type(graph).__name__}")
    tgt = Target.parse(target)
    timings = {}
    t0 = time.perf_counter()
    graph = optimize(graph, opt_level)
    groups = fuse(graph, enabled=opt_level >= 1)
    t1 = time.perf_counter()
    timings["graph passes + fusion"] = t1 - t0
    configs = _tuned_configs(groups, records, tgt) if records is not None else {}
    steps, funcs, labels = [], [], []
    kernels: dict = {}      # group signature -> symbol of the kernel already built for it
    texts: dict = {}        # kernel name -> where its printed C is cached
    for k, g in enumerate(groups):
        if g.pattern == "opaque":
            node = g.nodes[0]
            steps.append({"kind": "opaque", "op": node.op, "attrs": dict(node.attrs),
                          "inputs": [v.name if v is not None else None for v in node.inputs],
                          "outputs": [v.name for v in node.outputs]})
            labels.append(f"{k}:{node.op}")
            continue
        args = [v.name for v in tuple(g.inputs) + tuple(g.outputs)]
        sig = _group_signature(g, configs.get(id(g)))
        if sig in kernels:
            # the same computation on values of the same shapes: one kernel serves both
            steps.append({"kind": "kernel", "symbol": kernels[sig], "args": args})
        else:
            fname = f"k{k}_{g.nodes[-1].op if g.master is None else g.master.op}".replace(".", "_")
            path = cache_path(sig, tgt)
            funcs.append(lower_group_cached(g, tgt, fname, configs.get(id(g)), path))
            texts[fname] = text_path(path)
            steps.append({"kind": "kernel", "symbol": fname, "args": args})
            kernels[sig] = fname
        labels.append(f"{k}:{'+'.join(n.op for n in g.nodes)}")
    t2 = time.perf_counter()
    timings["lowering"] = t2 - t1
    module = None
    runs: list = []
    if funcs:
        from .backends import backend_for
        sequences = _kernel_runs(steps) if tgt.kind == "c" and not any(f.shape_vars for f in funcs) else []
        module = backend_for(tgt).build(funcs, tgt, sequences=[(r["symbol"], r["calls"]) for r in sequences],
                                        text_cache=texts) if tgt.kind == "c" else build(funcs, target=tgt)
        runs = [{"symbol": r["symbol"], "steps": r["steps"], "slots": r["slots"]} for r in sequences]
        buffers = {f.name: _buffer_record(f) for f in funcs}
        for step in steps:
            if step["kind"] == "kernel":
                step["params"] = buffers[step["symbol"]]    # checked when an exported model is loaded
                step["symbol"] = _symbol(module, step["symbol"])
    t3 = time.perf_counter()
    timings["C compile"] = t3 - t2

    external = set(graph.inputs) | set(graph.params) | set(graph.outputs)
    plan = plan_memory([(g.inputs, g.outputs) for g in groups], external)
    plan.graph_bytes = sum(v.nbytes for n in graph.nodes for v in n.outputs if v not in external)
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
    _check_unique_names(graph)
    spec = ModelSpec(name or graph.name, [v.name for v in graph.inputs], [v.name for v in graph.outputs],
                     values, steps, plan.total_bytes, labels, runs)
    params = {v.name: a for v, a in graph.params.items()}
    info = {"graph": graph, "groups": groups, "plan": plan, "timings": timings, "funcs": funcs,
            "target": tgt, "tuned_groups": len(configs)}
    return Model(spec, module.lib_path if module else None, params, module.source if module else "", info)


def _kernel_runs(steps: list) -> list[dict]:
    """Each stretch of consecutive kernel steps as one C function that calls them in order (the
    executor then makes one foreign call per stretch instead of one per kernel): its symbol,
    the steps [first, end) it covers, its pointer slots (value names) and its calls."""
    runs, k = [], 0
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


def _freeze_attr(value):
    """A hashable, exact stand-in for an attribute value (arrays by dtype, shape and bytes)."""
    import hashlib

    import numpy as np

    if isinstance(value, np.ndarray):
        return ("ndarray", value.dtype.str, value.shape, hashlib.sha1(np.ascontiguousarray(value).tobytes()).hexdigest())
    if isinstance(value, (list, tuple)):
        return (type(value).__name__,) + tuple(_freeze_attr(v) for v in value)
    if isinstance(value, dict):
        return ("dict",) + tuple(sorted((str(k), _freeze_attr(v)) for k, v in value.items()))
    return (type(value).__name__, repr(value))


def _group_signature(group, config) -> tuple:
    """What a group's kernel depends on: its nodes' ops and attributes, how they are wired to
    each other and to the group's inputs, the shapes and dtypes of inputs and outputs, and the
    schedule config.  Two groups with one signature compute the same function of their
    arguments (values are passed to kernels, never built into them)."""
    where = {v: ("in", i) for i, v in enumerate(group.inputs)}
    nodes = []
    for k, n in enumerate(group.nodes):
        ins = tuple(None if v is None else where[v] for v in n.inputs)
        attrs = tuple(sorted((name, _freeze_attr(v)) for name, v in n.attrs.items()))
        nodes.append((n.op, attrs, ins, tuple((tuple(v.shape), v.dtype) for v in n.outputs),
                      n is group.master))
        for j, v in enumerate(n.outputs):
            where[v] = ("node", k, j)
    return (group.pattern, tuple(nodes), tuple((tuple(v.shape), v.dtype) for v in group.inputs),
            tuple(where[v] for v in group.outputs), None if config is None else repr(config.to_json()))


def _tuned_configs(groups, records, target) -> dict:
    """{id(group): best ConfigEntity} for the groups whose task has a successful record in
    `records` (a path or records); the others keep their default schedules."""
    import logging

    import warnings

    from .autotune.records import _records, best_configs
    from .autotune.space import ConfigError
    from .autotune.task import task_of_group
    from .runtime.module import get_num_threads

    all_records = list(_records(records))
    threads = get_num_threads()
    tasks = [(g, task_of_group(g, target)) for g in groups]
    tasks = [(g, t) for g, t in tasks if t is not None]
    bad: set = set()        # ids of records whose config does not fit their task's space
    while True:
        usable = [r for r in all_records if id(r) not in bad]
        best = best_configs(usable, target=target, threads=threads)
        anywhere = best_configs(usable, target=target)
        configs, elsewhere, before = {}, set(), len(bad)
        for g, task in tasks:
            record = best.get(task.key)
            if record is not None:
                try:
                    configs[id(g)] = task.config_space.from_json(record.config)
                except ConfigError:
                    bad.add(id(record))        # skip it: the next best record of the task competes
            elif task.key in anywhere:
                elsewhere.add(anywhere[task.key].threads)
        if len(bad) == before:
            break
    tunable = len(tasks)
    log = logging.getLogger("tensorforge")
    if bad:
        warnings.warn(f"skipped {len(bad)} tuning record(s) whose config is not valid for its kernel's "
                      "schedule template", RuntimeWarning, stacklevel=3)
    log.info("tuning records applied to %d of %d tunable kernels", len(configs), tunable)
    if elsewhere:
        log.warning("some kernels have tuning records only for %s thread(s), not for the %d this process "
                    "uses: they keep their default schedules (tune with --threads %d)",
                    "/".join(str(n) for n in sorted(elsewhere)), threads, threads)
    return configs


def _buffer_record(func) -> list:
    """[[shape, dtype], ...] of a kernel's buffers, in parameter order (runtime/validate.py)."""
    from .te.expr import IntImm
    return [[[int(d.value) if isinstance(d, IntImm) else str(d) for d in b.shape], b.dtype] for b in func.params]


def _symbol(module, name: str) -> str:
    """The C symbol of kernel `name` in `module` (the code generator may rename it)."""
    fn = module.get_function(name)
    return fn._cfunc.__name__


def _check_unique_names(graph) -> None:
    seen = set()
    for v in list(graph.inputs) + list(graph.params) + [o for n in graph.nodes for o in n.outputs]:
        if v.name in seen:
            raise ValueError(f"value name {v.name!r} is used twice in graph {graph.name}")
        seen.add(v.name)
