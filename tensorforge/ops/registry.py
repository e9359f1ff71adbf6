"""The operator registry: one `@op` record per operator carries everything about it.

    @op("nn.relu", pattern=INJECTIVE)
    class relu:
        def infer(x, **attrs):      return x                       # TensorType(s) of the outputs
        def compute(x, **attrs):    return te.compute(x.shape, lambda *i: te.max(x[i], 0.0))
        def reference(x, **attrs):  return np.maximum(x, 0)

`infer` receives TensorType(shape, dtype) per input (None for an absent optional input) and the
attributes; `compute` receives te.Tensors; `reference` receives NumPy arrays.  Each returns one
result or a tuple (one per output).  An op without `compute` is an opaque kernel: the executor runs
its `kernel` (default: its NumPy reference) between the compiled kernels.

Pattern kinds (the paper's four, for fusion): injective (elementwise, broadcast, reshape,
transpose, ...: each output element depends on a fixed set of input elements), reduction,
complex-out-fusable (conv2d, dense: elementwise ops can fuse onto the output), opaque.
Registration checks names, patterns and that the reference exists.

Narrow storage types (float8, float4, int4, uint4, int2, uint2: ir/dtype.NARROW_TYPES) reach only
the ops declared with `narrow=True`, the ones that move or convert elements without arithmetic
(reshape, transpose, gather, concat, cast_narrow, ...); `infer_types` refuses them as inputs or
outputs of any other op with an OpError that says to convert first.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from ..ir import dtype as dt
from ..runtime import host_kernels

INJECTIVE, REDUCTION, COMPLEX, OPAQUE = "injective", "reduction", "complex-out-fusable", "opaque"
PATTERNS = (INJECTIVE, REDUCTION, COMPLEX, OPAQUE)


class TensorType(NamedTuple):
    shape: tuple
    dtype: str


class OpError(ValueError):
    """Bad attributes or input types for an op; the message names the op."""


@dataclass(frozen=True)
class OpDef:
    name: str
    pattern: str
    infer: Callable
    reference: Callable
    compute: Callable | None = None
    kernel: Callable | None = None          # opaque ops: run on arrays by the executor
    schedule: dict = field(default_factory=dict)   # template suffix ("cpu", "gpu") -> template name
    attr_defaults: dict = field(default_factory=dict)
    # layout rule: alter_layout(node, target, ctx) -> replacement node(s) or None (ops/layout_rules.py)
    alter_layout: Callable | None = None
    narrow: bool = False                    # accepts narrow storage types (moves, never computes)
    # opaque ops: split_axes(rank, **attrs) -> the axes of input 0 along which each output index
    # reads only that index of input 0, and the other inputs not at all (graph/batch_split.py)
    split_axes: Callable | None = None

    @property
    def is_opaque_kernel(self) -> bool:
        return self.compute is None

    def attrs_with_defaults(self, attrs: dict) -> dict:
        if not self.attr_defaults:
            return dict(attrs)
        merged = dict(self.attr_defaults)
        merged.update(attrs)
        return merged

    def infer_types(self, input_types: list, attrs: dict) -> list[TensorType]:
        if not self.narrow:
            for k, t in enumerate(input_types):
                if isinstance(getattr(t, "dtype", None), str) and dt.is_narrow(t.dtype):
                    raise OpError(f"{self.name}: input {k} has dtype {t.dtype}, a storage-only type that "
                                  f"{self.name} cannot compute with; cast it to float32 (or dequantize it) first")
        out = self.infer(*input_types, **self.attrs_with_defaults(attrs))
        outs = list(out) if isinstance(out, (list, tuple)) and not isinstance(out, TensorType) else [out]
        types = [TensorType(tuple(int(d) for d in t.shape), str(t.dtype)) for t in outs]
        if not self.narrow:
            for t in types:
                if dt.is_narrow(t.dtype):
                    raise OpError(f"{self.name}: cannot produce {t.dtype}, a storage-only type; produce a "
                                  f"wider type and convert it with cast_narrow (or quantize it)")
        return types

    def run_reference(self, arrays: list, attrs: dict) -> list:
        import numpy as np
        out = self.reference(*arrays, **self.attrs_with_defaults(attrs))
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o) for o in outs]

    def run_kernel(self, arrays: list, attrs: dict) -> list:
        import numpy as np
        fn = self.kernel or self.reference
        out = fn(*arrays, **self.attrs_with_defaults(attrs))
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        return [np.asarray(o) for o in outs]

    def build_compute(self, tensors: list, attrs: dict) -> list:
        out = self.compute(*tensors, **self.attrs_with_defaults(attrs))
        return list(out) if isinstance(out, (list, tuple)) else [out]


_REGISTRY: dict[str, OpDef] = {}


def op(name: str, pattern: str, schedule: dict | None = None, attr_defaults: dict | None = None,
       narrow: bool = False) -> Callable:
    """Class decorator registering an operator; see the module docstring."""
    if pattern not in PATTERNS:
        raise ValueError(f"op {name}: pattern must be one of {PATTERNS}, got {pattern!r}")

    def wrap(cls: Any) -> Any:
        if name in _REGISTRY:
            raise ValueError(f"op {name} is registered twice")
        infer = getattr(cls, "infer", None)
        reference = getattr(cls, "reference", None)
        if infer is None or reference is None:
            raise ValueError(f"op {name} needs both infer and reference")
        compute = getattr(cls, "compute", None)
        if compute is None and pattern != OPAQUE:
            raise ValueError(f"op {name}: only opaque ops may lack a TE compute")
        _add(OpDef(name, pattern, infer, reference, compute, getattr(cls, "kernel", None),
                   dict(schedule or {}), dict(attr_defaults or {}), getattr(cls, "alter_layout", None),
                   narrow, getattr(cls, "split_axes", None)))
        return cls

    return wrap


def register(opdef: OpDef) -> OpDef:
    """Register a ready-made record (used by factories that define many similar ops)."""
    if opdef.name in _REGISTRY:
        raise ValueError(f"op {opdef.name} is registered twice")
    if opdef.pattern not in PATTERNS:
        raise ValueError(f"op {opdef.name}: bad pattern {opdef.pattern!r}")
    _add(opdef)
    return opdef


def _add(opdef: OpDef) -> None:
    """Record `opdef`; an op without a compute also becomes a host kernel of the runtime (its
    `kernel`, else its reference), unless the runtime has its own kernel of that name."""
    _REGISTRY[opdef.name] = opdef
    if opdef.is_opaque_kernel and opdef.name not in host_kernels.KERNELS:
        host_kernels.register(opdef.name, opdef.kernel or opdef.reference)


def get(name: str) -> OpDef:
    _load_families()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown op {name!r}") from None


def all_ops() -> dict[str, OpDef]:
    _load_families()
    return dict(_REGISTRY)


_LOADED = False


def _load_families() -> None:
    """Import every op family module once, so their decorators run."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    import importlib
    import pkgutil

    from .. import ops as package
    for info in pkgutil.iter_modules(package.__path__):
        if info.name not in ("registry", "schedules") and not info.name.startswith("_"):
            importlib.import_module(f"{package.__name__}.{info.name}")
