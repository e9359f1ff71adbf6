"""Vectorization: a loop marked `vectorized` becomes one statement on SIMD vectors.

The loop variable becomes `Ramp(min, 1, lanes)`; expressions that depend on it become vectors
(loop-invariant operands are broadcast, affine index arithmetic stays a Ramp so that loads and
stores of consecutive elements stay contiguous).  When the body holds something that has no safe
vector form (a call, a condition that depends on the lane, a load under a lane-dependent select, a
store of a vector to one address, a non-power-of-two extent) the loop stays a scalar loop of kind
`vectorized`, and the code generator asks the C compiler to vectorize it (`omp simd`).

A loop that fails so is tried once more with two allowances, and kept only when they bought a
load of contiguous runs (tir/lane_offsets.py): integer floor division and remainder by a positive
constant inside a load's index, where every lane then reads at a constant distance from lane 0
in runs (a depth-to-space: `x[b + (v % 2) * S + v // 2]`, two 4-element loads and a shuffle);
and loads under a lane-dependent select when the condition reads the same loads (a ReLU
`x < 0 ? 0 : x` over such a load: the condition reads x on every lane anyway).  The C compiler's
`omp simd` of those loops gathered element by element: a depth-to-space epilogue of 4 MB took
1.0 ms, as loads of runs 0.15 ms.  Every other loop vectorizes exactly as before.
"""
from __future__ import annotations

from ...arith.structural import structural_equal
from ...ir import dtype as dt
from ...ir import expr as E
from ...ir.functor import Mutator, post_order_visit, uses_var
from .. import nodes as N
from ..lane_offsets import shuffled_runs

MAX_LANES = 64
# float rounding calls: one instruction per lane, so a vector of them (a lane-wise helper the C
# compiler turns into SIMD rounding) keeps a requantizing epilogue on vectors; other math calls
# stay scalar for `omp simd`, which maps them onto the vector math library
ROUNDING = ("round", "floor", "ceil", "trunc")
ROUNDING_BYTES = 64     # ... on one 512-bit register: GCC 12 narrows wider vectors (to 8 bits) lane by lane
# float32 exp and sigmoid on one 512-bit register: the C printer gives them a vector helper that
# scales by 2^n with one AVX-512 instruction (codegen/c_vector.py), 2.2x the speed of the inline
# scalar exp under `omp simd`, bit for bit the same values; tanh and erf, whose inline rational
# clamps and bounds become one vminps each there instead of a compare and a blend
VECTOR_MATH = ("exp", "sigmoid", "tanh", "erf")
VECTOR_MATH_LANES = 16


class _CannotVectorize(Exception):
    pass


def _is_vec(e: E.Expr) -> bool:
    return dt.lanes(e.dtype) > 1


def _loads(e: E.Expr) -> list:
    found: list = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, N.BufferLoad) else None)
    return found


def _has_load(e: E.Expr) -> bool:
    return bool(_loads(e))


def _positive_const(e: E.Expr) -> bool:
    if isinstance(e, E.Broadcast):
        e = e.value
    return isinstance(e, E.IntImm) and e.value > 0


class _Vectorizer:
    """Rewrites a loop body with the loop variable replaced by a Ramp of `lanes` lanes."""

    def __init__(self, var: E.Var, start: E.Expr, lanes: int, relaxed: bool = False):
        self.var, self.start, self.lanes = var, start, lanes
        self.relaxed = relaxed      # the two allowances of the module docstring
        self.in_index = 0           # > 0 while vectorizing a load's index
        self.run_loads = 0          # loads of contiguous runs made

    def bcast(self, e: E.Expr) -> E.Expr:
        return e if _is_vec(e) else E.Broadcast(e, self.lanes)

    # -- expressions ----------------------------------------------------------------------------
    def expr(self, e: E.Expr) -> E.Expr:
        if isinstance(e, E.Var):
            return E.Ramp(self.start, E.const(1, e.dtype), self.lanes) if e is self.var else e
        if isinstance(e, (E.IntImm, E.FloatImm, E.StringImm)):
            return e
        if not uses_var(e, self.var):
            return e
        if isinstance(e, E.BinaryOp):
            return self.binary(type(e), self.expr(e.a), self.expr(e.b))
        if isinstance(e, E.Cast):
            v = self.expr(e.value)
            if isinstance(v, E.Ramp) and e.dtype == "int64" and dt.element_of(v.dtype) == "int32":
                # a widened index (widen_indices.py) stays affine: loads stay contiguous
                return E.Ramp(E.Cast("int64", v.base), E.Cast("int64", v.stride), self.lanes)
            return E.Cast(dt.with_lanes(e.dtype, self.lanes), v) if _is_vec(v) else E.Cast(e.dtype, v)
        if isinstance(e, E.Not):
            return E.Not(self.expr(e.a))
        if isinstance(e, E.Select):
            c, t, f = self.expr(e.condition), self.expr(e.true_value), self.expr(e.false_value)
            if _is_vec(c) and (_has_load(t) or _has_load(f)) and not self._loads_in(c, t, f):
                raise _CannotVectorize("load under a lane-dependent select")
            if not (_is_vec(c) or _is_vec(t) or _is_vec(f)):
                return E.Select(c, t, f)
            if not _is_vec(c):
                # one condition for all lanes: only the chosen arm runs, so a guarded vector
                # load (a padded copy of a channel block) stays safe
                return E.Select(c, self.bcast(t), self.bcast(f))
            return E.Select(self.bcast(c), self.bcast(t), self.bcast(f))
        if isinstance(e, N.BufferLoad):
            self.in_index += 1
            try:
                indices = tuple(self.expr(i) for i in e.indices)
            finally:
                self.in_index -= 1
            if self.relaxed and any(_is_vec(i) and not isinstance(i, E.Ramp) and _divides(i) for i in indices):
                if len(indices) != 1 or shuffled_runs(indices[0]) is None:
                    raise _CannotVectorize("a divided index that does not read contiguous runs")
                self.run_loads += 1
            return N.BufferLoad(e.buffer, indices)
        if isinstance(e, E.Call) and len(e.args) == 1 and (
                (e.op in ROUNDING and dt.is_float(e.dtype) and self.lanes * dt.itemsize(e.dtype) <= ROUNDING_BYTES)
                or (e.op in VECTOR_MATH and e.dtype == "float32" and self.lanes == VECTOR_MATH_LANES)):
            a = self.bcast(self.expr(e.args[0]))
            return E.Call(a.dtype, e.op, (a,))
        raise _CannotVectorize(type(e).__name__)

    def binary(self, cls: type, a: E.Expr, b: E.Expr) -> E.Expr:
        va, vb = _is_vec(a), _is_vec(b)
        if not va and not vb:
            return cls(a, b)
        if cls in (E.FloorDiv, E.FloorMod) and not dt.is_float(a.dtype):
            if self.relaxed and self.in_index and _positive_const(b):
                return cls(self.bcast(a), self.bcast(b))
            raise _CannotVectorize("integer floor division on vectors")
        # affine index arithmetic keeps Ramps
        ra, rb = isinstance(a, E.Ramp), isinstance(b, E.Ramp)
        if cls is E.Add and (ra or rb):
            if isinstance(a, E.Ramp) and isinstance(b, E.Ramp):
                return E.Ramp(a.base + b.base, a.stride + b.stride, self.lanes)
            if isinstance(a, E.Ramp) and not vb:
                return E.Ramp(a.base + b, a.stride, self.lanes)
            if isinstance(b, E.Ramp) and not va:
                return E.Ramp(a + b.base, b.stride, self.lanes)
        if cls is E.Sub and isinstance(a, E.Ramp) and not vb:
            return E.Ramp(a.base - b, a.stride, self.lanes)
        if cls is E.Sub and isinstance(b, E.Ramp) and not va:
            return E.Ramp(a - b.base, E.const(0, b.stride.dtype) - b.stride, self.lanes)
        if cls is E.Mul and isinstance(a, E.Ramp) and not vb:
            return E.Ramp(a.base * b, a.stride * b, self.lanes)
        if cls is E.Mul and isinstance(b, E.Ramp) and not va:
            return E.Ramp(a * b.base, a * b.stride, self.lanes)
        return cls(self.bcast(a), self.bcast(b))

    def _loads_in(self, c: E.Expr, t: E.Expr, f: E.Expr) -> bool:
        """(relaxed) Every load of the arms is one the condition also reads on every lane."""
        if not self.relaxed:
            return False
        read = _loads(c)
        return all(any(structural_equal(x, y) for y in read) for x in _loads(t) + _loads(f))

    # -- statements -----------------------------------------------------------------------------
    def stmt(self, s: N.Stmt) -> N.Stmt:
        if isinstance(s, N.BufferStore):
            index = tuple(self.expr(i) for i in s.indices)
            value = self.expr(s.value)
            if not any(_is_vec(i) for i in index):
                # the same address every lane: the scalar loop would store `lanes` times
                raise _CannotVectorize("store to a lane-independent address")
            return N.BufferStore(s.buffer, self.bcast(value), index)
        if isinstance(s, N.SeqStmt):
            return N.SeqStmt(tuple(self.stmt(x) for x in s.seq))
        if isinstance(s, N.For):
            if uses_var(s.min, self.var) or uses_var(s.extent, self.var):
                raise _CannotVectorize("inner loop bounds depend on the lane")
            return N.For(s.loop_var, s.min, s.extent, s.kind, self.stmt(s.body), s.thread_tag, s.annotations)
        if isinstance(s, N.IfThenElse):
            if uses_var(s.condition, self.var):
                raise _CannotVectorize("condition depends on the lane")
            other = self.stmt(s.else_case) if s.else_case is not None else None
            return N.IfThenElse(s.condition, self.stmt(s.then_case), other)
        if isinstance(s, N.LetStmt):
            if uses_var(s.value, self.var):
                raise _CannotVectorize("let value depends on the lane")
            return N.LetStmt(s.var, s.value, self.stmt(s.body))
        if isinstance(s, N.AttrStmt):
            return N.AttrStmt(s.key, s.value, self.stmt(s.body))
        raise _CannotVectorize(type(s).__name__)


class _VectorizeLoops(Mutator):
    def visit_For(self, node: N.For):
        node = self.generic_visit(node)
        if node.kind != N.VECTORIZED or not isinstance(node.extent, E.IntImm):
            return node
        lanes = node.extent.value
        if lanes < 2 or lanes > MAX_LANES or lanes & (lanes - 1):
            return node
        try:
            return _Vectorizer(node.loop_var, node.min, lanes).stmt(node.body)
        except _CannotVectorize:
            pass
        relaxed = _Vectorizer(node.loop_var, node.min, lanes, relaxed=True)
        try:
            body = relaxed.stmt(node.body)
        except _CannotVectorize:
            return node
        return body if relaxed.run_loads else node


def _divides(e: E.Expr) -> bool:
    found: list = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (E.FloorDiv, E.FloorMod)) else None)
    return bool(found)


def vectorize_loops(func: N.PrimFunc) -> N.PrimFunc:
    return func.with_body(_VectorizeLoops().visit(func.body))
