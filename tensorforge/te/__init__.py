"""Tensor expressions and schedules, in the TE vocabulary TVM users know.

    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
"""
from ..ir.expr import CommReducer, Expr, IterVar, Range, Reduce, Var, cast, const, convert, max_value, min_value
from .intrin import BufferDecl, IntrinError, TensorIntrin, decl_buffer, decl_tensor_intrin
from .math import (
                   abs,
                   acos,
                   acosh,
                   all,
                   any,
                   asin,
                   asinh,
                   atan,
                   atan2,
                   atanh,
                   ceil,
                   cos,
                   cosh,
                   erf,
                   exp,
                   exp2,
                   expm1,
                   floor,
                   fmod,
                   if_then_else,
                   isinf,
                   isnan,
                   log,
                   log1p,
                   log2,
                   pow,
                   power,
                   round,
                   rsqrt,
                   sigmoid,
                   sin,
                   sinh,
                   sqrt,
                   tan,
                   tanh,
                   trunc,
)
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .tensor import (  # noqa: A004 - the reducers shadow builtins on purpose
                   ComputeOp,
                   Operation,
                   PlaceholderOp,
                   Tensor,
                   TensorError,
                   comm_reducer,
                   compute,
                   max,
                   min,
                   placeholder,
                   prod,
                   reduce_axis,
                   sum,
                   thread_axis,
                   var,
)
