"""GPU kernels inside a loop program: what `lower_thread_binding` produces and the GPU code
generators and runtimes read.

After thread binding a PrimFunc for a GPU target has this shape:

    Allocate(workspace, global)         # zero or more: buffers shared by consecutive kernels
      SeqStmt(
        AttrStmt("device_kernel", KernelInfo(...), body),    # one per kernel, run in order
        ...)

Each kernel body reads the thread and block indices through the Vars listed in its
`KernelInfo.threads`; the launch extents there are constants or expressions of the PrimFunc's
shape variables.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..ir.expr import Expr, Var
from ..ir.functor import Mutator
from . import nodes as N

KERNEL_ATTR = "device_kernel"
BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class KernelInfo:
    """One kernel launch: its name and, per bound thread tag, the index Var and launch extent."""

    name: str
    threads: tuple          # ((tag, Var, extent Expr), ...) in BLOCK_TAGS + THREAD_TAGS order

    def extent(self, tag: str) -> Expr | int:
        for t, _, ext in self.threads:
            if t == tag:
                return ext
        return 1

    @property
    def grid(self) -> tuple:
        return tuple(self.extent(t) for t in BLOCK_TAGS)

    @property
    def block(self) -> tuple:
        return tuple(self.extent(t) for t in THREAD_TAGS)

    def var(self, tag: str) -> Var | None:
        return next((v for t, v, _ in self.threads if t == tag), None)

    def __str__(self) -> str:
        dims = ", ".join(f"{t}={e}" for t, _, e in self.threads)
        return f"kernel {self.name}({dims})"


@dataclass(frozen=True)
class DeviceProgram:
    """A thread-bound PrimFunc taken apart: global workspaces, then its kernels in launch order."""

    workspaces: tuple       # tuple[Buffer]
    kernels: tuple          # tuple[(KernelInfo, Stmt)]


def device_program(func: N.PrimFunc) -> DeviceProgram:
    """The workspaces and kernels of a PrimFunc that `lower_thread_binding` has processed;
    ValueError when it has not."""
    workspaces: list = []
    kernels: list = []

    def walk(s: N.Stmt) -> None:
        if isinstance(s, N.Allocate) and s.buffer.scope == N.GLOBAL:
            workspaces.append(s.buffer)
            walk(s.body)
        elif isinstance(s, N.SeqStmt):
            for x in s.seq:
                walk(x)
        elif isinstance(s, N.AttrStmt) and s.key == KERNEL_ATTR:
            kernels.append((s.value, s.body))
        else:
            raise ValueError(f"{func.name}: statement outside every GPU kernel after thread binding:\n{s}")

    walk(func.body)
    return DeviceProgram(tuple(workspaces), tuple(kernels))


def rename(func: N.PrimFunc, name: str) -> N.PrimFunc:
    """`func` named `name`, its kernels too (`<old>_kernel...` becomes `<name>_kernel...`), so a
    loop program reused under another name (the lowering cache) keeps kernel names unique."""
    if func.name == name:
        return func
    old = func.name

    def kernel_name(k: str) -> str:
        return name + k[len(old):] if k.startswith(old) else k

    class _Rename(Mutator):
        def visit_AttrStmt(self, node: N.AttrStmt):
            node = self.generic_visit(node)
            if node.key != KERNEL_ATTR:
                return node
            info = dataclasses.replace(node.value, name=kernel_name(node.value.name))
            return N.AttrStmt(node.key, info, node.body)

    return dataclasses.replace(func, name=name, body=_Rename().visit(func.body))
