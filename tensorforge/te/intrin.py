"""Tensor intrinsics: a compute pattern together with the code that implements it (the paper's
section 4.4, TVM's `decl_tensor_intrin`).

    A = te.placeholder((4,), "uint8", name="a")
    B = te.placeholder((16, 4), "int8", name="b")
    k = te.reduce_axis((0, 4), name="k")
    C = te.compute((16,), lambda j: te.sum(A[k].astype("int32") * B[j, k].astype("int32"), axis=k))
    dot = te.decl_tensor_intrin(C.op, lower_fn, name="vnni_dot_16x4")
    s[C2].tensorize(ji, dot)

`op` says what the intrinsic computes; `lower_fn(ins, outs)` says how, as loop-program
statements over the declared buffers (one per input placeholder and per output, in the order of
`op.input_tensors()` and `op.outputs`).  It returns one statement (the whole computation), or a
triple (body, reset, update): `reset` sets the output to the reduction's identity and `update`
accumulates into it, which is what a reduction split outside the tensorized loops needs.

A buffer declaration (`decl_buffer`) carries shape, dtype, strides, element offset and memory
scope.  Strides and offset left out become symbolic variables that `Stage.tensorize` binds to
the matched region of the real tensor (its base offset and row strides); ones given as numbers
must equal what the match finds.  `lower_fn` itself is called by the loop-program side
(`tir/tensorize.py`) on buffer objects that can form pointers (`access_ptr`), once per intrinsic.

This module is plain data: the matching and the rewriting live in `tir/tensorize.py`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..ir.expr import Expr, Var, convert
from .tensor import ComputeOp, PlaceholderOp, Tensor


class IntrinError(ValueError):
    """A tensor intrinsic is declared wrongly; the message names the intrinsic and the part."""


@dataclass(frozen=True, eq=False)
class BufferDecl:
    """How an intrinsic sees one of its operands in memory.

    `strides` are in elements, outermost first; `elem_offset` is the operand's first element in
    the memory `data` points to.  A `Var` in either is bound when the intrinsic is matched."""

    name: str
    shape: tuple
    dtype: str
    strides: tuple = ()
    elem_offset: Expr | None = None
    scope: str = "global"
    offset_factor: int = 1

    def with_defaults(self) -> "BufferDecl":
        """Strides and offset filled in with fresh variables where they were left out."""
        strides = self.strides or tuple(Var(f"{self.name}_s{d}") for d in range(len(self.shape)))
        offset = self.elem_offset if self.elem_offset is not None else Var(f"{self.name}_elem_offset")
        return BufferDecl(self.name, self.shape, self.dtype, strides, offset, self.scope, self.offset_factor)


def decl_buffer(shape: Sequence[Any], dtype: str = "float32", name: str = "buffer",
                strides: Sequence[Any] | None = None, elem_offset: Any = None, scope: str = "global",
                offset_factor: int = 1) -> BufferDecl:
    """Declare how an intrinsic's operand lies in memory (see `BufferDecl`)."""
    shape_t = tuple(convert(s) for s in shape)
    strides_t = tuple(convert(s) for s in strides) if strides else ()
    if strides_t and len(strides_t) != len(shape_t):
        raise IntrinError(f"buffer {name}: {len(strides_t)} strides for {len(shape_t)} dimensions")
    offset = convert(elem_offset) if elem_offset is not None else None
    return BufferDecl(name, shape_t, str(dtype), strides_t, offset, scope, int(offset_factor))


@dataclass(frozen=True, eq=False)
class TensorIntrin:
    """A declared tensor intrinsic: what it computes (`op`), its operands' buffers (inputs in
    the order of `op.input_tensors()`, then the outputs) and the function that produces its
    implementation.  `helpers` are (name, C text) pairs of functions its body calls, printed into
    the source of a kernel that uses it; `requires` names the CPU features it needs (checked
    when a kernel is compiled)."""

    name: str
    op: ComputeOp
    inputs: tuple           # tuple[Tensor]: the placeholders the pattern reads
    in_buffers: tuple       # tuple[BufferDecl], one per input
    out_buffers: tuple      # tuple[BufferDecl], one per output of op
    lower_fn: Callable = field(repr=False)
    helpers: tuple = ()
    requires: tuple = ()

    @property
    def is_reduction(self) -> bool:
        return bool(self.op.reduce_axis)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name})"


def decl_tensor_intrin(op: ComputeOp, lower_fn: Callable, binds: dict | None = None,
                       name: str | None = None, helpers: Sequence[tuple[str, str]] = (),
                       requires: Sequence[str] = ()) -> TensorIntrin:
    """Declare a tensor intrinsic: `op` (a te.compute over placeholders) is the pattern,
    `lower_fn(ins, outs)` its implementation; `binds` maps a placeholder or output tensor to its
    `decl_buffer` (the others get compact buffers with strides bound at the match)."""
    pattern = op.op if isinstance(op, Tensor) else op
    if not isinstance(pattern, ComputeOp):
        raise IntrinError(f"decl_tensor_intrin: the pattern must be a te.compute operation, got {op!r}")
    op = pattern
    if not callable(lower_fn):
        raise IntrinError(f"decl_tensor_intrin({op.name}): lower_fn must be callable, got {lower_fn!r}")
    name = name or op.name
    binds = dict(binds or {})
    inputs = tuple(op.input_tensors())
    for t in inputs:
        if not isinstance(t.op, PlaceholderOp):
            raise IntrinError(f"tensor intrinsic {name}: input {t.name} is computed; the pattern may "
                              "read placeholders only")
    for t in binds:
        if t not in inputs and t not in op.outputs:
            raise IntrinError(f"tensor intrinsic {name}: binds names {getattr(t, 'name', t)!r}, which "
                              "the pattern neither reads nor writes")

    def buffer_of(t: Tensor, role: str) -> BufferDecl:
        decl = binds.get(t)
        if decl is None:
            decl = decl_buffer(t.shape, t.dtype, name=f"{t.name}_{role}")
        if not isinstance(decl, BufferDecl):
            raise IntrinError(f"tensor intrinsic {name}: binds[{t.name}] must come from te.decl_buffer")
        if decl.dtype != t.dtype:
            raise IntrinError(f"tensor intrinsic {name}: buffer {decl.name} is {decl.dtype} but "
                              f"tensor {t.name} is {t.dtype}")
        if len(decl.shape) != len(t.shape):
            raise IntrinError(f"tensor intrinsic {name}: buffer {decl.name} has {len(decl.shape)} "
                              f"dimensions but tensor {t.name} has {len(t.shape)}")
        return decl.with_defaults()

    ins = tuple(buffer_of(t, "in") for t in inputs)
    outs = tuple(buffer_of(t, "out") for t in op.outputs)
    for h in helpers:
        if not (isinstance(h, tuple) and len(h) == 2 and all(isinstance(x, str) for x in h)):
            raise IntrinError(f"tensor intrinsic {name}: helpers are (function name, C text) pairs")
    return TensorIntrin(name, op, inputs, ins, outs, lower_fn, tuple(helpers), tuple(requires))
