"""`tensorforge inspect`: what the compiler made of a model, and what a record file holds.

    inspect MODEL.onnx       graph after passes, fused groups, memory plan, compile and kernel times
    inspect MODEL.tfm        a compiled model: inputs, outputs, steps, memory, kernel times
    inspect --records FILE   per task: trials, errors, default and best time, speedup (report.py)
"""
from __future__ import annotations

import argparse
import os

from ..errors import InputError, UsageError
from . import options
from .common import is_compiled_model, load_compiled, load_graph


def inspect(opts: argparse.Namespace) -> int:
    if not opts.model and not opts.records:
        raise UsageError("give a MODEL (.onnx or .tfm), --records FILE, or both")
    if opts.records:
        inspect_records(opts.records)
    if not opts.model:
        return 0
    if is_compiled_model(opts.model):
        if opts.shape:
            raise UsageError("--shape applies to an ONNX model; a compiled model's shapes are fixed")
        return _inspect_compiled(opts)
    return _inspect_onnx(opts)


def _inspect_onnx(opts: argparse.Namespace) -> int:
    import tensorforge

    graph = load_graph(opts.model, options.shapes(opts.shape))
    model = tensorforge.compile(graph, target=opts.target, precision=opts.precision)
    info = model.info
    print(info["graph"])
    print(f"\n# {len(info['groups'])} fused groups")
    for k, g in enumerate(info["groups"]):
        print(f"  {k:3d} [{g.pattern}] {' + '.join(n.op for n in g.nodes)}")
    print("\n# " + info["plan"].summary())
    print("# compile time: " + ", ".join(f"{k} {v:.2f} s" for k, v in info["timings"].items()))
    _print_profile(model)
    if opts.precision != "fp32":
        from tensorforge.testing.timing import median_seconds

        from .precision_report import print_report, random_inputs
        print()
        reference = tensorforge.compile(graph, target=opts.target)
        print_report(opts.precision, reference, model, lambda k: random_inputs(model, k), 20,
                     lambda fn: median_seconds(fn, 10) * 1e3)
    if opts.source:
        print(model.source)
    return 0


def _inspect_compiled(opts: argparse.Namespace) -> int:
    model = load_compiled(opts.model)
    spec = model.spec
    print(f"# {opts.model}: compiled model {spec.name}")
    for what, names in (("input", spec.inputs), ("output", spec.outputs)):
        for name in names:
            v = spec.values[name]
            print(f"{what:6s} {name}: {v['dtype']}{list(v['shape'])}")
    kernels = sum(1 for st in spec.steps if st["kind"] == "kernel")
    print(f"\n# {len(spec.steps)} steps: {kernels} compiled kernels, {len(spec.steps) - kernels} run by NumPy")
    labels = spec.labels or [st.get("symbol") or st.get("op", "?") for st in spec.steps]
    for k, label in enumerate(labels):
        print(f"  {k:3d} {label}")
    weights = sum(int(a.nbytes) for a in model.params.values())
    print(f"\n# memory: {_mib(spec.arena_bytes)} arena for intermediate values, {_mib(weights)} of weights "
          f"({len(model.params)} arrays)")
    _print_profile(model)
    if opts.source:
        print(model.source or "# (this file holds no kernel source)")
    return 0


def _print_profile(model) -> None:
    inputs = [_example(model.spec.values[n]) for n in model.input_names]
    print("\n# per-kernel time (mean of 10 runs)")
    for label, secs in model.profile(*inputs, repeat=10):
        print(f"  {secs * 1e3:9.3f} ms  {label}")


def _example(info: dict):
    """A random input of the value's shape; zeros for integer and boolean inputs (indices,
    token ids), which random values would send out of range."""
    import numpy as np

    shape, dtype = tuple(info["shape"]), np.dtype(info["dtype"])
    if dtype.kind == "f":
        return np.random.default_rng(0).standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def _mib(nbytes: int) -> str:
    return f"{nbytes / 2 ** 20:.2f} MiB" if nbytes >= 2 ** 20 else f"{nbytes / 1024:.1f} KiB"


def inspect_records(path: str) -> None:
    from ..autotune.records import load_records
    from ..autotune.report import format_summary, summarize

    if not os.path.exists(path):
        raise InputError(f"no record file {path}")
    records = load_records(path)
    summaries = summarize(records)
    trials = sum(s.trials for s in summaries)
    threads = sorted({r.threads for r in records if r.threads is not None})
    measured = f"measured with {'/'.join(map(str, threads))} thread(s)" if threads else "thread count not recorded"
    print(f"# {path}: {len(records)} records of {len(summaries)} task(s): {trials} tuning trials, "
          f"{len(records) - trials} confirmation records; {measured}")
    print(format_summary(summaries))
