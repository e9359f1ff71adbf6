"""Code generation for the accelerator: a lowered loop program -> one instruction stream.

The loop program (after the common loop-IR passes) is a host program around coprocessor
statements, as in VTA where the host code calls the runtime's `LoadBuffer2D`, `PushGEMMOp`,
`PushALUOp` and `StoreBuffer2D`.  This module plays that host: it runs the host loops and turns
every coprocessor statement into instructions (ACCEL.md part 4):

- a *statement* is a perfect loop nest around one leaf: a store into an SRAM scope from a DRAM
  buffer (DMA LOAD; a `select` with a zero else-branch is padding), a store into DRAM from the
  accumulator (the truncating STORE; its value must be the int8 cast of an accumulator load),
  a store into the accumulator from accumulator loads (an ALU op: `x // 2**c` is SHR c, max/min
  with a constant are MAX/MIN, `+` is ADD with an immediate or a tensor operand, a copy is SHR 0),
  or a tensorized GEMM (reset or update).  The leaf's indices are evaluated over the nest's
  whole grid (index_eval.py) and patterns.py reads the instruction fields off the values.
- DMA insertion: the grid gives, per SRAM element, the DRAM element (or padding); the fewest
  2-D patterns are emitted.  ALU/GEMM: per grid point the micro-op (dst, src, wgt); the two
  outermost affine loops are folded into iter_out/iter_in (loop folding), the rest is a micro-op
  kernel, loaded once (LOAD UOP) and reused while it stays in the micro-op buffer.
- memory scopes: each SRAM buffer gets a region in its scope's buffer (a bump allocator
  released at the end of the allocation); an accumulator stage whose first writer is an
  elementwise ALU statement over another accumulator buffer at the same indices reuses that
  buffer's region in place (the storage rewrite VTA relies on); the old name is then dead.
- virtual threads: a loop bound to "vthread" is not run; the walk below it goes on once per
  thread in lockstep, every buffer gets one region per thread, and every statement is emitted
  once per thread, thread by thread (InjectVirtualThread with cthread semantics).
- tokens (tokens.py): per thread, consecutive statements on different modules are paired
  with a push/pop (CoProcSync on the unrolled program); the Assembler sets the flags.
Invariant: each thread's statements execute in program order as far as its data is concerned;
threads share no SRAM.  The compiler checks the stream (checker.check_stream) before use.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...ir import expr as E
from ...ops.accel_intrin import ACC_SCOPE, GEMM_CALL, INP_SCOPE, RESET_CALL, WGT_SCOPE
from ...tir import nodes as N
from .config import LOOP_ITER_BITS, AccelConfig
from .index_eval import evaluate, full, grid
from .isa import Alu, AluOp, Gemm, Insn, Load, MemType, Stage, Store, stage_of
from .patterns import FoldedUops, dma_patterns, fold_uops

ALIGN = 256          # every DRAM array starts at a multiple of every element size


class CodegenError(ValueError):
    """The loop program has a statement the accelerator cannot run; the message names it."""


@dataclass
class Block:
    """The instructions of one coprocessor statement for one virtual thread."""

    thread: int
    stage: Stage
    insns: list
    pop_from: Stage | None = None
    push_to: Stage | None = None


@dataclass(frozen=True)
class ParamLayout:
    """Where a PrimFunc parameter lives in the DRAM image."""

    name: str
    shape: tuple
    dtype: str
    byte_offset: int
    is_output: bool


@dataclass
class _Sram:
    name: str
    depth: int
    top: int = 0
    peak: int = 0

    def alloc(self, size: int, what: str) -> int:
        base = self.top
        self.top += size
        if self.top > self.depth:
            raise CodegenError(f"{what} needs {size} elements of the {self.name} buffer, but only "
                               f"{self.depth - base} of {self.depth} are free: choose smaller tiles "
                               "or fewer virtual threads")
        self.peak = max(self.peak, self.top)
        return base


@dataclass
class _UopCache:
    """The micro-op buffer: kernels by content, bump allocation, everything evicted when full."""

    depth: int
    dram_base: int                       # DRAM address (in micro-ops) of the kernel region
    resident: dict = field(default_factory=dict)
    top: int = 0
    kernels: list = field(default_factory=list)    # (n, 3) arrays, in DRAM order
    dram_top: int = 0

    def place(self, uops: np.ndarray) -> tuple[int, Load | None]:
        """The SRAM range start of `uops`, and the LOAD UOP to emit first when not resident."""
        key = uops.tobytes()
        if key in self.resident:
            return self.resident[key], None
        n = len(uops)
        if n > self.depth:
            raise CodegenError(f"a micro-op kernel of {n} micro-ops does not fit the micro-op "
                               f"buffer ({self.depth}); choose smaller tiles")
        if self.top + n > self.depth:
            self.resident.clear()
            self.top = 0
        base, self.top = self.top, self.top + n
        self.resident[key] = base
        self.kernels.append(uops)
        address = self.dram_base + self.dram_top
        self.dram_top += n
        return base, Load(memory_type=MemType.UOP, sram_base=base, dram_base=address, y_size=1,
                          x_size=n, x_stride=n)


class Emitter:
    """Walks one PrimFunc (see the module doc); `run()` returns the blocks and the layout."""

    def __init__(self, func: N.PrimFunc, config: AccelConfig):
        self.func, self.config = func, config
        c = config
        self.lanes = {INP_SCOPE: c.batch * c.block_in, WGT_SCOPE: c.block_out * c.block_in,
                      ACC_SCOPE: c.batch * c.block_out}
        self.sram = {INP_SCOPE: _Sram("input", c.inp_depth), WGT_SCOPE: _Sram("weight", c.wgt_depth),
                     ACC_SCOPE: _Sram("accumulator", c.acc_depth)}
        self.memtype = {INP_SCOPE: MemType.INP, WGT_SCOPE: MemType.WGT, ACC_SCOPE: MemType.ACC}
        self.params: dict[Any, tuple[N.Buffer, int]] = {}
        offset = 0
        for b in func.params:
            if b.scope != N.GLOBAL:
                raise CodegenError(f"{func.name}: parameter {b.name} is in scope {b.scope!r}; "
                                   "parameters live in DRAM (global)")
            self.params[b.data] = (b, offset)
            nbytes = int(np.prod([int(s.value) for s in b.shape])) * np.dtype(b.dtype).itemsize
            offset += -(-nbytes // ALIGN) * ALIGN
        self.uop_cache = _UopCache(c.uop_depth, offset // c.uop_elem_bytes)
        self.regions: dict[tuple, int] = {}           # (buffer var, thread) -> base element
        self.alias: dict[Any, Any] = {}               # buffer var -> the var whose region it reuses
        self.dead: set = set()                        # (buffer var, thread) reused by another name
        self.blocks: list[Block] = []
        self.outputs: set = set()
        self.max_iter = (1 << LOOP_ITER_BITS) - 1

    # -- results --------------------------------------------------------------------------------
    def run(self) -> tuple[list[Block], tuple[ParamLayout, ...], np.ndarray]:
        self._walk(self.func.body, [(0, {})])
        layouts = tuple(ParamLayout(b.name, tuple(int(s.value) for s in b.shape), b.dtype, off,
                                    var in self.outputs) for var, (b, off) in self.params.items())
        words = [_uop_words(k, self.config) for k in self.uop_cache.kernels]
        kernel_bytes = np.concatenate(words).view(np.uint8) if words else np.zeros(0, np.uint8)
        start = self.uop_cache.dram_base * self.config.uop_elem_bytes
        image = np.zeros(start + len(kernel_bytes), np.uint8)
        image[start:] = kernel_bytes
        return self.blocks, layouts, image

    # -- the host walk --------------------------------------------------------------------------
    def _walk(self, stmt: N.Stmt, envs: list) -> None:
        if isinstance(stmt, N.SeqStmt):
            for run in _stage_runs(stmt.seq):
                if len(run) == 1:
                    self._walk(run[0], envs)
                    continue
                for t, env in envs:          # one module's adjacent statements: one block per thread
                    for s in run:
                        self._walk(s, [(t, env)])
        elif isinstance(stmt, N.Allocate):
            self._allocate(stmt, envs)
        elif isinstance(stmt, N.AttrStmt):
            self._walk(stmt.body, envs)
        elif isinstance(stmt, N.LetStmt):
            self._walk(stmt.body, [(t, {**env, stmt.var: evaluate(stmt.value, env)}) for t, env in envs])
        elif isinstance(stmt, N.For) and stmt.kind == N.THREAD_BINDING:
            if stmt.thread_tag != "vthread":
                raise CodegenError(f"{self.func.name}: loop {stmt.loop_var.name} is bound to "
                                   f"{stmt.thread_tag!r}; the accelerator has only virtual threads")
            n = self._const(stmt.extent, envs, stmt.loop_var.name)
            self._walk(stmt.body, [(t * n + k, {**env, stmt.loop_var: k}) for t, env in envs for k in range(n)])
        elif isinstance(stmt, N.For) and _nest(stmt) is None:
            lo = self._const(stmt.min, envs, stmt.loop_var.name)
            for i in range(self._const(stmt.extent, envs, stmt.loop_var.name)):
                self._walk(stmt.body, [(t, {**env, stmt.loop_var: lo + i}) for t, env in envs])
        elif isinstance(stmt, (N.For, N.BufferStore, N.Tensorized)):
            loops, leaf = _nest(stmt) or ([], stmt)
            for t, env in envs:
                self._statement(loops, leaf, t, env)
        elif stmt == N.NOP:
            return
        else:
            raise CodegenError(f"{self.func.name}: the accelerator cannot run a "
                               f"{type(stmt).__name__} statement here:\n{stmt}")

    def _const(self, e: E.Expr, envs: list, what: str) -> int:
        values = {int(evaluate(e, env)) for _, env in envs}
        if len(values) != 1:
            raise CodegenError(f"{self.func.name}: the bound of loop {what} differs between "
                               "virtual threads")
        return values.pop()

    def _allocate(self, stmt: N.Allocate, envs: list) -> None:
        buf = stmt.buffer
        if buf.scope not in self.sram:
            raise CodegenError(f"{self.func.name}: buffer {buf.name} is in scope {buf.scope!r}; "
                               f"on the accelerator a temporary lives in {', '.join(self.sram)}")
        lanes = self.lanes[buf.scope]
        size = int(np.prod([int(s.value) for s in buf.shape]))
        if size % lanes:
            raise CodegenError(f"buffer {buf.name} holds {size} values, not whole "
                               f"{lanes}-lane elements of its scope {buf.scope}")
        sram = self.sram[buf.scope]
        mark = sram.top
        source = _in_place_source(stmt.body, buf) if buf.scope == ACC_SCOPE else None
        for t, _ in envs:
            if source is not None and (source, t) in self.regions:
                self.regions[(buf.data, t)] = self.regions[(source, t)]
                self.alias[buf.data] = source
            else:
                self.regions[(buf.data, t)] = sram.alloc(size // lanes, f"buffer {buf.name}")
        self._walk(stmt.body, envs)
        for t, _ in envs:
            self.regions.pop((buf.data, t), None)
            self.dead.discard((buf.data, t))
        sram.top = mark

    def _region(self, buf: N.Buffer, t: int) -> int:
        if (buf.data, t) in self.dead:
            raise CodegenError(f"{self.func.name}: buffer {buf.name} is read after its storage was "
                               "reused in place by a later stage")
        try:
            return self.regions[(buf.data, t)]
        except KeyError:
            raise CodegenError(f"{self.func.name}: buffer {buf.name} ({buf.scope}) is used outside "
                               "its allocation") from None

    # -- one coprocessor statement ------------------------------------------------------------
    def _statement(self, loops: list, leaf: N.Stmt, t: int, env: dict) -> None:
        extents = [int(evaluate(f.extent, env)) for f in loops]
        genv = dict(env)
        for f, g in zip(loops, grid(extents)):
            genv[f.loop_var] = int(evaluate(f.min, env)) + g
        if isinstance(leaf, N.Tensorized):
            insns = self._gemm(leaf, extents, genv, t)
        else:
            assert isinstance(leaf, N.BufferStore)
            dst = leaf.buffer
            if dst.scope == N.GLOBAL:
                insns = self._store(leaf, extents, genv, t)
            elif dst.scope in self.sram and _reads_only(leaf.value, N.GLOBAL):
                insns = self._load(leaf, extents, genv, t)
            elif dst.scope == ACC_SCOPE:
                insns = self._alu(leaf, extents, genv, t)
            else:
                raise CodegenError(f"{self.func.name}: cannot move data into {dst.name} "
                                   f"({dst.scope}) with:\n{leaf}")
        self._record(t, insns)

    def _record(self, t: int, insns: list) -> None:
        stage = stage_of(insns[0])
        previous = next((b.stage for b in reversed(self.blocks) if b.thread == t), None)
        if previous is not None and {previous, stage} == {Stage.LOAD, Stage.STORE}:
            self.blocks.append(Block(t, Stage.COMPUTE, []))     # tokens go through compute
        self.blocks.append(Block(t, stage, insns))

    def _lane_elements(self, index: np.ndarray, extents: list, lanes: int, what: str) -> tuple:
        """(element index grid, element grid shape) of a scalar index grid whose innermost loops
        run over the `lanes` values of one element."""
        flat = full(index, extents).reshape(-1)
        shape, p = list(extents), 1
        while p < lanes and shape:
            p *= shape.pop()
        rows = flat.reshape(-1, lanes) if p == lanes else None
        if rows is None or not (rows == rows[:, :1] + np.arange(lanes)).all() or (rows[:, 0] % lanes).any():
            raise CodegenError(f"{self.func.name}: {what}: the innermost loops must run over the "
                               f"{lanes} consecutive values of one buffer element")
        return rows[:, 0] // lanes, tuple(shape) or (1,)

    def _dram(self, buf: N.Buffer, elem_bytes: int) -> int:
        _, offset = self.params[buf.data]
        return offset // elem_bytes

    # LOAD ---------------------------------------------------------------------------------------
    def _load(self, st: N.BufferStore, extents: list, genv: dict, t: int) -> list:
        value, valid = st.value, None
        if isinstance(value, E.Select):
            if not (isinstance(value.false_value, E.IntImm) and value.false_value.value == 0):
                raise CodegenError(f"{self.func.name}: a padded copy must pad with 0:\n{st}")
            valid = full(evaluate(value.condition, genv), extents).reshape(-1)
            value = value.true_value
        if not (isinstance(value, N.BufferLoad) and value.buffer.dtype == st.buffer.dtype):
            raise CodegenError(f"{self.func.name}: a DMA load copies a DRAM buffer of the same "
                               f"type unchanged, not:\n{st}")
        scope = st.buffer.scope
        lanes = self.lanes[scope]
        dst, shape = self._lane_elements(evaluate(st.indices[0], genv), extents, lanes, f"copy into {st.buffer.name}")
        src_scalar = full(evaluate(value.indices[0], genv), extents).reshape(-1, lanes)
        ok = valid.reshape(-1, lanes) if valid is not None else np.ones_like(src_scalar, bool)
        if (ok.any(1) != ok.all(1)).any():
            raise CodegenError(f"{self.func.name}: padding of {st.buffer.name} splits a buffer element")
        rows_ok = ok[:, 0]
        contiguous = (src_scalar == src_scalar[:, :1] + np.arange(lanes)).all(1) & (src_scalar[:, 0] % lanes == 0)
        if not contiguous[rows_ok].all():
            raise CodegenError(f"{self.func.name}: copy into {st.buffer.name}: the DRAM side must hold "
                               "each buffer element as consecutive values")
        elem_bytes = self.config.acc_elem_bytes if scope == ACC_SCOPE else (
            self.config.inp_elem_bytes if scope == INP_SCOPE else self.config.wgt_elem_bytes)
        dram = np.where(rows_ok, src_scalar[:, 0] // lanes + self._dram(value.buffer, elem_bytes), -1)
        base = self._region(st.buffer, t)
        if not (dst == dst[0] + np.arange(dst.size)).all():
            raise CodegenError(f"{self.func.name}: copy into {st.buffer.name}: the SRAM side must be "
                               "written compactly in loop order")
        patterns = dma_patterns(dram, shape, base + int(dst[0]), allow_pad=True)
        if patterns is None:
            raise CodegenError(f"{self.func.name}: copy into {st.buffer.name}: its padding cannot be "
                               "expressed as DMA borders (at most 15 elements on each side of a tile)")
        kind = self.memtype[scope]
        return [Load(memory_type=kind, sram_base=p.sram_base, dram_base=p.dram_base, y_size=p.y_size,
                     x_size=p.x_size, x_stride=p.x_stride, y_pad_0=p.y_pad_0, y_pad_1=p.y_pad_1,
                     x_pad_0=p.x_pad_0, x_pad_1=p.x_pad_1) for p in patterns]

    # STORE --------------------------------------------------------------------------------------
    def _store(self, st: N.BufferStore, extents: list, genv: dict, t: int) -> list:
        value = st.value
        out_dtype = np.dtype(self.config.out_dtype).name
        if not (isinstance(value, E.Cast) and value.dtype == out_dtype and st.buffer.dtype == out_dtype
                and isinstance(value.value, N.BufferLoad) and value.value.buffer.scope == ACC_SCOPE):
            raise CodegenError(f"{self.func.name}: a store to DRAM must be the {out_dtype} cast of an "
                               f"accumulator value (the truncating STORE), not:\n{st}")
        src = value.value
        lanes = self.lanes[ACC_SCOPE]
        sram, shape = self._lane_elements(evaluate(src.indices[0], genv), extents, lanes, f"store of {src.buffer.name}")
        dram_scalar = full(evaluate(st.indices[0], genv), extents).reshape(-1, lanes)
        if not ((dram_scalar == dram_scalar[:, :1] + np.arange(lanes)).all() and not (dram_scalar[:, 0] % lanes).any()):
            raise CodegenError(f"{self.func.name}: store to {st.buffer.name}: each output element must "
                               "be consecutive values in DRAM")
        order = np.argsort(sram, kind="stable")
        sram, dram_el = sram[order], dram_scalar[order, 0] // lanes
        if not (sram == sram[0] + np.arange(sram.size)).all():
            raise CodegenError(f"{self.func.name}: store from {src.buffer.name}: the accumulator side "
                               "must be a compact block")
        if (order != np.arange(order.size)).any():
            shape = (sram.size,)
        dram = dram_el + self._dram(st.buffer, self.config.out_elem_bytes)
        patterns = dma_patterns(dram, shape, self._region(src.buffer, t) + int(sram[0]), allow_pad=False)
        if patterns is None:     # pragma: no cover - a store without padding always splits
            raise CodegenError(f"{self.func.name}: store to {st.buffer.name} has no DMA pattern")
        self.outputs.add(st.buffer.data)
        return [Store(sram_base=p.sram_base, dram_base=p.dram_base, y_size=p.y_size, x_size=p.x_size,
                      x_stride=p.x_stride) for p in patterns]

    # ALU ----------------------------------------------------------------------------------------
    def _alu(self, st: N.BufferStore, extents: list, genv: dict, t: int) -> list:
        op, operands, imm = _alu_op(st, self.func.name)
        lanes = self.lanes[ACC_SCOPE]
        dst_base = self._region(st.buffer, t)
        what = f"ALU stage {st.buffer.name}"
        dst, shape = self._lane_elements(evaluate(st.indices[0], genv), extents, lanes, what)
        dst = dst + dst_base
        elems = []
        for load in operands:
            e, _ = self._lane_elements(evaluate(load.indices[0], genv), extents, lanes, what)
            elems.append(e + self._region(load.buffer, t))
        in_place = [k for k, e in enumerate(elems) if np.array_equal(e, dst)]
        if not in_place:
            raise CodegenError(f"{self.func.name}: {what} is not in place: the accelerator's ALU "
                               f"writes its first operand; write {st.buffer.name} over one operand")
        first = operands[in_place[0]]
        if first.buffer.data is not st.buffer.data:
            self.dead.add((first.buffer.data, t))
        if imm is None:
            src = elems[1 - in_place[0]]
            if op not in (AluOp.ADD, AluOp.MIN, AluOp.MAX) and in_place[0] != 0:
                raise CodegenError(f"{self.func.name}: {what}: the in-place operand must come first")
        else:
            src = dst
        fields = np.stack([dst.reshape(shape), src.reshape(shape), np.zeros(shape, np.int64)])
        folded = fold_uops(fields, self.max_iter)
        use_imm = imm is not None
        return self._uop_insn(folded, lambda bgn, end, f: Alu(
            alu_opcode=op, use_imm=use_imm, imm=int(imm or 0), uop_bgn=bgn, uop_end=end,
            **{k: v for k, v in f.items() if not k.startswith("wgt_")}))

    # GEMM ---------------------------------------------------------------------------------------
    def _gemm(self, leaf: N.Tensorized, extents: list, genv: dict, t: int) -> list:
        impl = leaf.impl
        if not (isinstance(impl, N.Evaluate) and isinstance(impl.value, N.CallExtern)
                and impl.value.name in (GEMM_CALL, RESET_CALL)):
            raise CodegenError(f"{self.func.name}: tensor intrinsic {leaf.intrin} ({leaf.phase}) is not "
                               "the accelerator's GEMM; tensorize so that the reduction is split "
                               "(reset and update)")
        call = impl.value
        scopes = (ACC_SCOPE, INP_SCOPE, WGT_SCOPE)
        fields = []
        shape: tuple = ()
        for arg, scope in zip(call.args, scopes):
            load = arg.load
            if load.buffer.scope != scope:
                raise CodegenError(f"{self.func.name}: GEMM operand {load.buffer.name} is in "
                                   f"{load.buffer.scope}, expected {scope}")
            lanes = self.lanes[scope]
            scalar = full(evaluate(load.indices[0], genv), extents)
            if (scalar % lanes).any():
                raise CodegenError(f"{self.func.name}: GEMM operand {load.buffer.name} is not aligned "
                                   f"to its {lanes}-value elements")
            fields.append(scalar // lanes + self._region(load.buffer, t))
            shape = scalar.shape
        while len(fields) < 3:
            fields.append(np.zeros(shape, np.int64))
        folded = fold_uops(np.stack(fields), self.max_iter)
        reset = call.name == RESET_CALL
        return self._uop_insn(folded, lambda bgn, end, f: Gemm(
            reset=reset, uop_bgn=bgn, uop_end=end, wgt_factor_out=f.pop("wgt_factor_out"),
            wgt_factor_in=f.pop("wgt_factor_in"), **f))

    def _uop_insn(self, folded: FoldedUops, make) -> list:
        base, load = self.uop_cache.place(folded.uops)
        fo, fi = folded.factor_out, folded.factor_in
        factors = dict(iter_out=folded.iter_out, iter_in=folded.iter_in,
                       dst_factor_out=fo[0], dst_factor_in=fi[0], src_factor_out=fo[1],
                       src_factor_in=fi[1], wgt_factor_out=fo[2], wgt_factor_in=fi[2])
        insn: Insn = make(base, base + len(folded.uops), factors)
        return [load, insn] if load is not None else [insn]


# -- statement shapes --------------------------------------------------------------------------
def _stage_runs(seq: tuple) -> list[list]:
    """`seq` cut into runs of adjacent coprocessor statements of one module (VTA's
    LiftAttrScope): virtual threads replicate a run as a unit, so a thread's input and weight
    loads stay together.  Other statements are runs of their own."""
    runs: list[list] = []
    last = None
    for s in seq:
        stage = _statement_stage(s)
        if stage is not None and stage == last:
            runs[-1].append(s)
        else:
            runs.append([s])
        last = stage
    return runs


def _statement_stage(stmt: N.Stmt) -> Stage | None:
    """The module that runs a coprocessor statement (None for anything else)."""
    nest = _nest(stmt)
    if nest is None:
        return None
    leaf = nest[1]
    if isinstance(leaf, N.Tensorized):
        return Stage.COMPUTE
    assert isinstance(leaf, N.BufferStore)
    if leaf.buffer.scope == N.GLOBAL:
        return Stage.STORE
    if leaf.buffer.scope in (INP_SCOPE, WGT_SCOPE) and _reads_only(leaf.value, N.GLOBAL):
        return Stage.LOAD
    return Stage.COMPUTE


def _nest(stmt: N.Stmt) -> tuple[list, N.Stmt] | None:
    """(loops, leaf) when `stmt` is a perfect nest of plain loops around one store or tensorized
    statement; None otherwise."""
    loops = []
    while isinstance(stmt, N.For) and stmt.kind != N.THREAD_BINDING:
        loops.append(stmt)
        stmt = stmt.body
    if isinstance(stmt, (N.BufferStore, N.Tensorized)):
        return loops, stmt
    return None


def _loads(e: E.Expr) -> list:
    out: list = []

    def visit(x: Any) -> None:
        if isinstance(x, N.BufferLoad):
            out.append(x)
            return
        for name in ("a", "b", "value", "condition", "true_value", "false_value"):
            child = getattr(x, name, None)
            if isinstance(child, E.Expr):
                visit(child)

    visit(e)
    return out


def _reads_only(e: E.Expr, scope: str) -> bool:
    loads = _loads(e)
    return bool(loads) and all(ld.buffer.scope == scope for ld in loads)


def _alu_op(st: N.BufferStore, func_name: str) -> tuple[AluOp, list, int | None]:
    """(opcode, operand loads, immediate or None) of an accumulator statement."""
    v = st.value
    bad = CodegenError(f"{func_name}: the accelerator's ALU cannot compute:\n{st}\n(it has x // 2**c, "
                       "min, max and + with a constant or a second accumulator value)")
    if isinstance(v, N.BufferLoad):
        return AluOp.SHR, [v], 0
    if not isinstance(v, E.BinaryOp):
        raise bad
    a, b = v.a, v.b
    if isinstance(a, E.IntImm) and type(v) in (E.Add, E.Min, E.Max):
        a, b = b, a
    if not isinstance(a, N.BufferLoad):
        raise bad
    if isinstance(b, E.IntImm):
        c = int(b.value)
        if isinstance(v, E.FloorDiv) and c > 0 and c & (c - 1) == 0:
            return AluOp.SHR, [a], c.bit_length() - 1
        if isinstance(v, E.Sub):
            return AluOp.ADD, [a], -c
        ops = {E.Add: AluOp.ADD, E.Min: AluOp.MIN, E.Max: AluOp.MAX}
        if type(v) in ops:
            return ops[type(v)], [a], c
        raise bad
    if isinstance(b, N.BufferLoad) and b.buffer.scope == ACC_SCOPE:
        ops = {E.Add: AluOp.ADD, E.Min: AluOp.MIN, E.Max: AluOp.MAX}
        if type(v) in ops:
            return ops[type(v)], [a, b], None
    raise bad


def _in_place_source(body: N.Stmt, buf: N.Buffer) -> Any:
    """The accumulator buffer whose storage `buf` can reuse: the first statement writing `buf` is
    elementwise over it at the same index (None when there is no such statement)."""
    found: list = []

    def first_store(s: N.Stmt) -> None:
        if found:
            return
        if isinstance(s, N.BufferStore):
            if s.buffer.data is buf.data:
                found.append(s)
            return
        if isinstance(s, N.Tensorized):
            if any(getattr(a, "load", None) is not None and a.load.buffer.data is buf.data
                   for a in getattr(getattr(s.impl, "value", None), "args", ())):
                found.append(s)
            return
        for child in (getattr(s, "seq", None) or (getattr(s, "body", None),)):
            if isinstance(child, N.Stmt):
                first_store(child)

    first_store(body)
    if not found or not isinstance(found[0], N.BufferStore):
        return None
    from ...arith.structural import structural_equal
    st = found[0]
    for load in _loads(st.value):
        if load.buffer.scope == ACC_SCOPE and load.buffer.data is not buf.data \
                and structural_equal(load.indices[0], st.indices[0]):
            return load.buffer.data
    return None


def _uop_words(uops: np.ndarray, config: AccelConfig) -> np.ndarray:
    from .dram import uops_to_words
    from .isa import Uop
    return uops_to_words([Uop(int(d), int(s), int(w)) for d, s, w in uops], config)
