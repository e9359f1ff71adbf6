"""FusedGroup -> (TE outputs, Schedule) -> PrimFunc (the `groups -> kernels` arrow).

The group's nodes become one chain of te.compute stages over placeholders for the group's
inputs.  Stages of injective ops that are not group outputs are inlined into their readers; the
master op's stages (a conv's padding stage, say) are left to the master's schedule template.
"""
from __future__ import annotations

import functools
import hashlib
import json
import warnings
from dataclasses import dataclass
from pathlib import Path

from . import te
from .graph.fuse import FusedGroup
from .ops import registry
from .ops.registry import COMPLEX, REDUCTION
from .ops.schedules import get_template, require_tunable
from .te.tensor import ComputeOp
from .tir import nodes as N


@dataclass
class LoweredGroup:
    group: FusedGroup
    func: N.PrimFunc
    args: tuple        # graph Values, in the kernel's parameter order (inputs, then outputs)


def _stages_of(tensors) -> set:
    seen, todo = set(), [t.op for t in tensors]
    while todo:
        op = todo.pop()
        if op in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(op)
        todo.extend(t.op for t in op.input_tensors())
    return seen


def group_to_te(group: FusedGroup, shapes: dict | None = None):
    """Build the group's TE: returns (placeholders, {Value: te.Tensor}, master output tensors,
    set of ops created by the master node itself, not by the producers fused before it).
    `shapes`: the inputs' shapes where they are not the Values' own (shape expressions for a
    kernel over any size, shape_generic.py)."""
    env = {}
    placeholders = []
    for k, v in enumerate(group.inputs):
        p = te.placeholder(shapes[v] if shapes else v.shape, v.dtype, name=f"p{k}_{_ident(v.name)}")
        env[v] = p
        placeholders.append(p)
    master_outs, master_ops = [], set()
    for node in group.nodes:
        opdef = registry.get(node.op)
        ins = [env[v] if v is not None else None for v in node.inputs]
        outs = opdef.build_compute(ins, node.attrs)
        if len(outs) != len(node.outputs):
            raise ValueError(f"op {node.op}: compute returned {len(outs)} tensors for {len(node.outputs)} outputs")
        for v, t in zip(node.outputs, outs):
            env[v] = t
        if node is group.master:
            # the master's own stages only: its fused producers are inlined by the template
            master_outs = outs
            master_ops = _stages_of(outs) - _stages_of([t for t in ins if t is not None])
    return placeholders, env, master_outs, master_ops


def _ident(name: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in name)[:40]


def lower_group(group: FusedGroup, target, name: str, config=None) -> LoweredGroup:
    """`config`: a tuned ConfigEntity for the master's tunable template, or None for the
    template's heuristic default."""
    placeholders, env, master_outs, master_ops = group_to_te(group)
    s, outs = inlined_schedule(group, placeholders, env, master_ops)
    if group.pattern == COMPLEX:
        kind = "complex"
    elif group.pattern == REDUCTION:
        kind = "reduction"
    else:
        kind = "injective"
    master = master_outs if master_outs else outs
    template_name = template_for(group.master.op if group.master else None, kind, target)
    if config is not None:
        require_tunable(template_name).fn(s, master, outs, target, config)
    else:
        get_template(template_name)(s, master, outs, target, None)
    func = te_lower(s, placeholders + outs, name, target)
    return LoweredGroup(group, func, tuple(group.inputs) + tuple(group.outputs))


def inlined_schedule(group: FusedGroup, placeholders: list, env: dict, keep=frozenset()):
    """(schedule, output tensors) of a group's TE with every injective stage that is not an
    output (nor in `keep`, the master's own stages) inlined into its readers."""
    outs = [env[v] for v in group.outputs]
    # a group output that is also an input (an identity) needs a copy stage
    outs = [te.compute(t.shape, lambda *i, t=t: t[i], name="copy") if t in placeholders else t for t in outs]
    s = te.create_schedule([t.op for t in outs])
    out_ops = {t.op for t in outs}
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and op not in out_ops and op not in keep and not op.reduce_axis:
            stage.compute_inline()
    return s, outs


def template_for(op: str | None, kind: str, target) -> str:
    """The schedule template of a group on `target`: the one its master op names for the
    target's template suffix (`schedule={"cpu": ...}` on the @op record), else the generic
    "<pattern kind>.<suffix>" ("complex.cpu", "injective.gpu", ...)."""
    suffix = target.template_suffix
    named = registry.get(op).schedule.get(suffix) if op is not None else None
    return named or f"{kind}.{suffix}"


def te_lower(s, args, name, target=None):
    from .build_module import lower
    return lower(s, args, name, target=target)


# The lowering cache ---------------------------------------------------------------------------
# Lowering a group (TE -> loop program -> passes) takes 0.02-0.5 s of Python per kernel, the
# larger part of a warm compile: the C compile itself is cached by the source's hash.  A
# lowered PrimFunc is a plain data structure, so it is kept on disk, as JSON (tir/serialize.py:
# data, never code, is read back) with its size and checksum (runtime/cache_files.py), under a
# key made of what it depends on: the group's signature (ops, attributes, wiring, shapes,
# config: see driver._group_signature), the target, and the source of this package (any change
# to the compiler makes new keys), and the machine's calibrated defaults (a new calibration
# changes the default schedules).

@functools.cache
def package_fingerprint() -> str:
    """A hash of the package's Python sources (once per process)."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def cache_path(signature, target) -> Path:
    """Where the kernel lowered for a group `signature` on `target` is kept; the C text printed
    from it (codegen/c.py) is kept beside it, at `text_path(path)`."""
    from .runtime.cache_files import cache_dir
    key = hashlib.sha256(repr((signature, str(target), package_fingerprint(), machine_defaults(target))
                              ).encode()).hexdigest()[:40]
    return cache_dir() / "lowered" / f"{key}.ir"


def machine_defaults(target) -> str:
    """The machine-dependent choices default schedules make: the GEMM micro-kernel on CPUs, and
    the cores they split work over (parallel loops or none, an LSTM step's chunks), which differ
    between one machine's runs under different CPU affinities."""
    from .ops.schedules import gemm_kernel
    from .target import Target

    tgt = Target.parse(target)
    return f"{gemm_kernel.for_target(tgt)}, {tgt.num_cores} cores" if tgt.template_suffix == "cpu" else ""


def text_path(path: Path) -> Path:
    return path.with_name(path.stem + ".c.entry")


class CachedText:
    """The printed C of one kernel, kept at `path` beside its lowering cache entry
    (runtime/cache_files.py: JSON with its size and checksum); what codegen_c's `text_cache`
    asks for."""

    def __init__(self, path: Path):
        self.path = path

    def load(self, symbol: str) -> dict | None:
        """The entry printed for C name `symbol`, or None when there is none or it does not
        check out."""
        from .runtime.cache_files import DamagedEntry, read_entry
        try:
            payload = read_entry(self.path)
            entry = None if payload is None else json.loads(payload)
        except (DamagedEntry, ValueError):
            return None
        ok = isinstance(entry, dict) and entry.get("symbol") == symbol and all(
            isinstance(entry.get(k), t) for k, t in (("text", str), ("typedefs", dict), ("helpers", dict)))
        return entry if ok else None

    def store(self, entry: dict) -> None:
        from .runtime.cache_files import write_entry
        try:
            write_entry(self.path, json.dumps(entry).encode("utf-8"))
        except (OSError, TypeError, ValueError):
            pass                     # a read-only cache only costs time


def lower_group_cached(group: FusedGroup, target, name: str, config, path: Path) -> N.PrimFunc:
    """`lower_group(...).func`, from the lowering cache entry at `path` (see `cache_path`) when
    the same signature was lowered for the same target by the same compiler before (renamed to
    `name`)."""
    from .runtime.cache_files import DamagedEntry, read_entry, warn_rebuild, write_entry
    from .tir import serialize
    func = None
    try:
        payload = read_entry(path)
        func = None if payload is None else serialize.loads(payload)
    except (DamagedEntry, ValueError) as err:     # a damaged entry: lower again and overwrite it
        warn_rebuild(err, "lowering the kernel again")
    if isinstance(func, N.PrimFunc):
        from .tir.kernel import rename
        return rename(func, name)          # its GPU kernels too: names stay unique in a program
    func = lower_group(group, target, name, config).func
    try:
        write_entry(path, serialize.dumps(func).encode("utf-8"))
    except (OSError, TypeError, RecursionError) as err:   # a read-only cache only costs time
        warnings.warn(f"could not write the lowering cache ({err})", RuntimeWarning, stacklevel=2)
    return func
