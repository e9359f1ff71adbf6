"""Tuning tasks: the `fused groups -> tasks` arrow of autotune/.

A task is one tunable workload: a template name, the shapes and dtypes of its inputs, the
op's attributes, the target, and (for group templates) the op whose computation is tuned.  A
task is a frozen value with a stable JSON form; `key` is its canonical JSON text, the identity
records are filed under.  Two groups that differ only in their epilogue (conv + relu, conv +
bias + add + relu) are one task, as in TVM: the knobs belong to the master op, and the best
config of the op alone is applied to every group that contains it.

`extract_tasks(graph, target)` walks the fused groups of the optimized graph and returns the
distinct tunable tasks with their occurrence counts.  `instantiate(task, config)` builds the
task's schedule for a config, and `build_candidate` lowers it to a PrimFunc.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..ops.schedules import Template, get_tunable, require_tunable
from ..te.space import ConfigEntity, ConfigSpace, as_config

TASK_FIELDS = ("template", "op", "inputs", "attrs")


def _freeze(value: Any, where: str) -> Any:
    """A JSON-compatible attribute value, with lists as tuples (hashable)."""
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        value = value.item()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v, where) for v in value)
    raise TypeError(f"{where}: attribute value {value!r} ({type(value).__name__}) has no JSON form, "
                    "so the workload cannot be a tuning task")


def _thaw(value: Any) -> Any:
    return list(_thaw(v) for v in value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Task:
    """One tunable workload on one target.  `inputs` holds (shape, dtype) per input (None for an
    absent optional input); `attrs` is a sorted tuple of (name, value)."""

    template: str
    inputs: tuple
    attrs: tuple = ()
    target: str = "c"
    op: str | None = None
    occurrences: int = field(default=1, compare=False)

    @staticmethod
    def create(template: str, inputs: Sequence, attrs: dict | None = None, target: Any = "c",
               op: str | None = None, occurrences: int = 1) -> "Task":
        """A task with normalized fields; `inputs` are (shape, dtype) pairs or None."""
        from ..target import Target

        specs = []
        for spec in inputs:
            if spec is None:
                specs.append(None)
                continue
            shape, dtype = spec
            specs.append((tuple(int(d) for d in shape), str(dtype)))
        frozen = tuple(sorted((str(n), _freeze(v, f"task {template} attr {n}")) for n, v in (attrs or {}).items()))
        return Task(template, tuple(specs), frozen, str(Target.parse(target)), op, occurrences)

    @staticmethod
    def for_op(op: str, inputs: Sequence, attrs: dict | None = None, target: Any = "c") -> "Task":
        """The task of graph op `op` on inputs of the given (shape, dtype): its template is the
        op's schedule template for the target's kind."""
        from ..ops import registry
        from ..target import Target

        tgt = Target.parse(target)
        opdef = registry.get(op)
        name = opdef.schedule.get(tgt.template_suffix)
        if name is None or get_tunable(name) is None:
            raise ValueError(f"op {op!r} has no tunable template for target {str(tgt)!r} "
                             f"(its {tgt.template_suffix} schedule template: {name})")
        return Task.create(name, inputs, opdef.attrs_with_defaults(dict(attrs or {})), tgt, op)

    # JSON ---------------------------------------------------------------------------------------
    def workload_json(self) -> dict:
        """The task without its target (records keep the target beside it)."""
        return {"template": self.template, "op": self.op,
                "inputs": [None if s is None else [list(s[0]), s[1]] for s in self.inputs],
                "attrs": {n: _thaw(v) for n, v in self.attrs}}

    def to_json(self) -> dict:
        return {**self.workload_json(), "target": self.target}

    @staticmethod
    def from_json(d: dict) -> "Task":
        missing = [f for f in TASK_FIELDS + ("target",) if f not in d]
        if missing:
            raise ValueError(f"task JSON lacks {missing}: {d}")
        return Task.create(d["template"], [None if s is None else (s[0], s[1]) for s in d["inputs"]],
                           d["attrs"], d["target"], d["op"])

    @property
    def key(self) -> str:
        """Canonical JSON text of the task (target included): its identity in record files."""
        return json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))

    @property
    def name(self) -> str:
        shapes = ", ".join("-" if s is None else "x".join(map(str, s[0])) or "scalar" for s in self.inputs)
        attrs = " ".join(f"{n}={_compact(v)}" for n, v in self.attrs)
        return f"{self.template}({shapes}{'; ' + attrs if attrs else ''})"

    def __repr__(self) -> str:
        extra = f" x{self.occurrences}" if self.occurrences != 1 else ""
        return f"Task[{self.target}] {self.name}{extra}"

    # The workload -----------------------------------------------------------------------------
    @property
    def tunable(self) -> Template:
        return require_tunable(self.template)

    @property
    def config_space(self) -> ConfigSpace:
        """The knobs the template declares for this task (cached per task)."""
        return _config_space(self)

    @property
    def flops(self) -> int:
        """Floating-point operations of one run: 2 per multiply-add of each reduction stage
        (one per output element when there is no reduction)."""
        return _flops(self)

    def reference_io(self, seed: int = 0) -> tuple[list, list]:
        """(input arrays, expected output arrays): seeded random inputs and the NumPy reference."""
        from ..ir.dtype import random_array

        rng = np.random.default_rng(seed)
        arrays = [None if s is None else random_array(s[0], s[1], rng) for s in self.inputs]
        attrs = {n: v for n, v in self.attrs}
        tmpl = self.tunable
        if tmpl.kind == "group":
            from ..ops import registry
            expected = registry.get(self.op).run_reference(arrays, attrs)
        else:
            out = tmpl.reference(*[a for a in arrays if a is not None], **attrs)
            expected = [np.asarray(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
        return [a for a in arrays if a is not None], expected


def _compact(v: Any) -> str:
    return "(" + ",".join(_compact(x) for x in v) + ")" if isinstance(v, tuple) else str(v)


def instantiate(task: Task, config: ConfigSpace | ConfigEntity | None = None):
    """The schedule of `task` under `config` (None or a fresh ConfigSpace: the default), and
    its argument tensors (inputs, then outputs)."""
    from .. import te
    from ..target import Target

    tmpl = task.tunable
    target = Target.parse(task.target)
    config = as_config(config)
    placeholders = [None if s is None else te.placeholder(s[0], s[1], name=f"in{k}")
                    for k, s in enumerate(task.inputs)]
    attrs = {n: v for n, v in task.attrs}
    if tmpl.kind == "group":
        from ..ops import registry
        outs = registry.get(task.op).build_compute(placeholders, attrs)
        s = te.create_schedule([t.op for t in outs])
        tmpl.fn(s, outs, outs, target, config)
    else:
        s, outs = tmpl.fn(config, target, placeholders, **attrs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
    return s, [p for p in placeholders if p is not None] + list(outs)


def build_candidate(task: Task, config: ConfigEntity | None, name: str = "candidate"):
    """The loop program (PrimFunc, after all loop-IR passes) of `task` under `config`."""
    from ..build_module import lower

    s, args = instantiate(task, config)
    return lower(s, args, name, target=task.target)      # with the passes the backend adds


@functools.lru_cache(maxsize=512)
def _config_space(task: Task) -> ConfigSpace:
    space = ConfigSpace()
    instantiate(task, space)
    return space


@functools.lru_cache(maxsize=512)
def _flops(task: Task) -> int:
    from ..ir.expr import IntImm
    from ..te.tensor import ComputeOp

    _, args = instantiate(task, None)
    outs = args[len([s for s in task.inputs if s is not None]):]
    seen, todo, total = set(), [t.op for t in outs], 0
    while todo:
        op = todo.pop()
        if op in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(op)
        todo.extend(t.op for t in op.input_tensors())
        if op.reduce_axis:
            size = math.prod(int(d.value) for d in op.output(0).shape if isinstance(d, IntImm))
            red = math.prod(int(iv.dom.extent.value) for iv in op.reduce_axis)
            total += 2 * size * red
    if total == 0:
        total = sum(math.prod(int(d.value) for d in t.shape) for t in outs)
    return total


def task_of_group(group, target) -> "Task | None":
    """The task of a fused group's master op, or None when its schedule template is not tunable
    (or an attribute has no JSON form)."""
    from ..ops import registry
    from ..target import Target

    node = group.master
    if node is None or group.pattern == "opaque":
        return None
    opdef = registry.get(node.op)
    name = opdef.schedule.get(Target.parse(target).template_suffix)
    if name is None or get_tunable(name) is None:
        return None
    try:
        return Task.create(name, [None if v is None else (v.shape, v.dtype) for v in node.inputs],
                           opdef.attrs_with_defaults(dict(node.attrs)), target, node.op)
    except TypeError:
        return None


def extract_tasks(graph, target: Any = "c", opt_level: int = 3, alternatives: bool = False) -> list[Task]:
    """The distinct tunable tasks of `graph` compiled for `target`, in order of first
    occurrence, each with `occurrences` = how many fused groups use it.  A group is tunable
    when its master op's schedule template is registered as tunable and declares knobs.

    With `alternatives`, the tasks of `other_forms` follow the model's own."""
    from ..graph.ir import Graph
    from ..target import Target

    if not isinstance(graph, Graph):
        raise TypeError(f"extract_tasks expects a tensorforge Graph (see tensorforge.frontend.from_onnx), "
                        f"got {type(graph).__name__}")
    tgt = Target.parse(target)
    own = _tunable(_task_counts(graph, tgt, opt_level))
    return own + other_forms(graph, tgt, opt_level, known=own) if alternatives else own


def other_forms(graph, target: Any = "c", opt_level: int = 3, known: Sequence[Task] = ()) -> list[Task]:
    """The tunable tasks of the forms `graph` could run its 3x3 stride-1 convs as (the direct
    conv, a Winograd conv of either tile size: autotune/algorithms.py) that are not in `known`
    (the model's own tasks, from extract_tasks), so that their records let compile choose."""
    from ..graph.passes.alter_layout_winograd import choosing_tiles
    from ..ops.nn_conv_winograd import TILES
    from ..target import Target
    from .algorithms import forced

    if opt_level < 3:                   # no Winograd pass: every conv keeps the direct form
        return []
    tgt = Target.parse(target)
    counts: dict[Task, int] = {}
    for tile in (0, *TILES):
        with choosing_tiles(forced(tile)):
            for task, n in _task_counts(graph, tgt, opt_level).items():
                counts.setdefault(task, n)
    seen = set(known)
    return [t for t in _tunable(counts) if t not in seen]


def _tunable(counts: dict) -> list[Task]:
    """The tasks of {task: occurrences} whose space has more than one config, with their counts."""
    return [Task(t.template, t.inputs, t.attrs, t.target, t.op, n) for t, n in counts.items() if t.config_space.size > 1]


def _task_counts(graph, tgt, opt_level: int) -> dict:
    """{task: fused groups using it} of `graph` optimized and fused for `tgt`."""
    from ..graph.fuse import fuse
    from ..graph.pipeline import optimize

    groups = fuse(optimize(graph, tgt, opt_level), enabled=opt_level >= 1)
    counts: dict[Task, int] = {}
    for g in groups:
        task = task_of_group(g, tgt)
        if task is not None:
            counts[task] = counts.get(task, 0) + 1
    return counts
