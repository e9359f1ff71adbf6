"""Thread binding: loops bound to blockIdx / threadIdx become GPU kernels and their launch
dimensions (the loop-IR pass that turns a loop program into device code).

Algorithm.  The body is cut at its top level: global allocations become workspaces (buffers the
runtime provides, alive across kernels), and every remaining top-level loop nest becomes one
kernel, launched in program order.  Inside a kernel, a loop bound to tag t is replaced by its
body with `loop_var := min + t`, where t is the kernel's index Var for that tag.  The launch
extent of t is the largest extent of the loops bound to it (so a cooperative fetch bound to
threadIdx.x with 64 iterations and a compute loop bound to threadIdx.x with 32 share one block
of 64 threads); a loop with a smaller extent runs under `if t < extent`.  Extents come from bound
inference: they must be constants or expressions of the PrimFunc's shape variables.

A top-level nest with no bound loop would be run by every thread, so it is an error (bind its
outer loops to blockIdx.x and threadIdx.x); this pass does not bind loops by itself.

Invariant: each iteration of each bound loop runs in exactly one (block, thread) pair, and
kernels run in the order the nests had.
"""
from __future__ import annotations

from ...arith import Analyzer
from ...ir.expr import Expr, IntImm, Max, Var
from ...ir.functor import Mutator, free_vars, post_order_visit, substitute
from .. import nodes as N
from ..kernel import BLOCK_TAGS, KERNEL_ATTR, THREAD_TAGS, KernelInfo

_TAGS = BLOCK_TAGS + THREAD_TAGS


class ThreadBindingError(ValueError):
    """The loop program cannot be mapped onto GPU threads; the message says which loop."""


def lower_thread_binding(func: N.PrimFunc) -> N.PrimFunc:
    """`func` as workspaces plus one AttrStmt("device_kernel") per top-level loop nest."""
    workspaces: list[N.Buffer] = []
    nests: list[N.Stmt] = []
    _split_top(func, func.body, workspaces, nests)
    kernels = []
    for k, nest in enumerate(nests):
        name = f"{func.name}_kernel" if len(nests) == 1 else f"{func.name}_kernel{k}"
        kernels.append(_make_kernel(func, name, nest))
    body = N.seq(*kernels)
    for buf in reversed(workspaces):
        body = N.Allocate(buf, body)
    return func.with_body(body)


def _split_top(func: N.PrimFunc, s: N.Stmt, workspaces: list, nests: list) -> None:
    if isinstance(s, N.Allocate) and s.buffer.scope == N.GLOBAL:
        workspaces.append(s.buffer)
        _split_top(func, s.body, workspaces, nests)
    elif isinstance(s, N.SeqStmt):
        for x in s.seq:
            _split_top(func, x, workspaces, nests)
    elif isinstance(s, N.AttrStmt) and s.key == KERNEL_ATTR:
        nests.append(s)           # already a kernel (the pass ran before)
    elif isinstance(s, N.Allocate):
        inner: list = []
        _split_top(func, s.body, workspaces, inner)
        if len(inner) > 1:
            raise ThreadBindingError(
                f"{func.name}: buffer {s.buffer.name!r} in scope {s.buffer.scope!r} is used by "
                f"{len(inner)} loop nests; compute it at a loop inside the one nest that reads it")
        nests.append(N.Allocate(s.buffer, inner[0]) if inner else s)
    else:
        nests.append(s)


def _bound_loops(s: N.Stmt) -> list[N.For]:
    found: list[N.For] = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, N.For) and n.kind == N.THREAD_BINDING else None)
    return found


def _written(s: N.Stmt) -> list[str]:
    names: list[str] = []
    post_order_visit(s, lambda n: names.append(n.buffer.name) if isinstance(n, N.BufferStore)
                     and n.buffer.name not in names else None)
    return names


def _make_kernel(func: N.PrimFunc, name: str, nest: N.Stmt) -> N.Stmt:
    if isinstance(nest, N.AttrStmt) and nest.key == KERNEL_ATTR:
        return nest
    loops = _bound_loops(nest)
    if not loops and _writes_scalars_only(nest):
        # a stage with no data axes (a reduction to a scalar) has nothing to bind: one thread
        return N.AttrStmt(KERNEL_ATTR, KernelInfo(name, ()), nest)
    if not loops:
        raise ThreadBindingError(
            f"{func.name}: the loop nest that writes {', '.join(_written(nest)) or 'nothing'} is not "
            "bound to GPU threads; bind its outer loops with s[T].bind(axis, te.thread_axis("
            "'blockIdx.x')) and s[T].bind(axis, te.thread_axis('threadIdx.x'))")
    allowed = set(func.shape_vars)
    extents: dict[str, list[Expr]] = {}
    for loop in loops:
        if loop.thread_tag not in _TAGS:
            raise ThreadBindingError(
                f"{func.name}: loop {loop.loop_var.name} is bound to {loop.thread_tag!r}, which "
                "is left after the virtual-thread pass; only blockIdx.* and threadIdx.* map to hardware")
        bad = [v.name for v in free_vars(loop.extent) if v not in allowed]
        if bad:
            raise ThreadBindingError(
                f"{func.name}: loop {loop.loop_var.name} bound to {loop.thread_tag} has extent "
                f"{loop.extent}, which depends on {', '.join(bad)}; a launch dimension may only "
                "depend on the argument shapes")
        extents.setdefault(loop.thread_tag, []).append(loop.extent)
    analyzer = Analyzer()
    threads = []
    for tag in _TAGS:
        if tag in extents:
            threads.append((tag, Var(tag, "int32"), _largest(analyzer, extents[tag])))
    info = KernelInfo(name, tuple(threads))
    body = _Substitute(info, analyzer, func.name).visit(nest)
    return N.AttrStmt(KERNEL_ATTR, info, body)


def _writes_scalars_only(s: N.Stmt) -> bool:
    """Whether every buffer `s` stores to holds one element (a 0-d tensor)."""
    stores: list[N.Buffer] = []
    post_order_visit(s, lambda n: stores.append(n.buffer) if isinstance(n, N.BufferStore) else None)
    return bool(stores) and all(all(isinstance(d, IntImm) and d.value == 1 for d in b.shape) for b in stores)


def _largest(analyzer: Analyzer, exts: list[Expr]) -> Expr:
    best = exts[0]
    for e in exts[1:]:
        if analyzer.can_prove(e <= best):
            continue
        best = e if analyzer.can_prove(best <= e) else Max(best, e)
    return analyzer.simplify(best)


class _Substitute(Mutator):
    def __init__(self, info: KernelInfo, analyzer: Analyzer, func_name: str):
        self.info, self.analyzer, self.func_name = info, analyzer, func_name
        self.active: dict = {}     # tag -> extent of the enclosing loop bound to it

    def visit_For(self, node: N.For):
        if node.kind != N.THREAD_BINDING:
            return self.generic_visit(node)
        # a loop bound to a tag inside another loop bound to it (a cooperative fetch attached
        # inside the compute's thread loop) takes the same index: the fetch's region does not
        # depend on the outer loop (bound inference relaxes it), so this is one thread's share
        # (threads past the outer loop's extent are guarded off, so the inner one may not be longer)
        tag = node.thread_tag
        outer = self.active.get(tag)
        if outer is not None and not self.analyzer.can_prove(node.extent <= outer):
            raise ThreadBindingError(
                f"{self.func_name}: loop {node.loop_var.name} bound to {tag} has extent {node.extent}, "
                f"more than the enclosing loop bound to {tag} ({outer}); split it to at most that many parts")
        self.active[tag] = node.extent
        try:
            body = self.visit(node.body)
        finally:
            if outer is None:
                del self.active[tag]
            else:
                self.active[tag] = outer
        var = self.info.var(tag)
        value = var if isinstance(node.min, IntImm) and node.min.value == 0 else node.min + var
        body = substitute(body, {node.loop_var: value})
        launch = self.info.extent(tag)
        if not self.analyzer.can_prove(node.extent >= launch):
            body = N.IfThenElse(var < node.extent, body)
        return body



