"""Tensor expressions and schedules, in the TE vocabulary TVM users know.

    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
"""
from ..ir.expr import (CommReducer, Expr, IterVar, Range, Reduce, Var, cast, const, convert,
                   max_value, min_value)
from .tensor import (ComputeOp, Operation, PlaceholderOp, Tensor, TensorError, comm_reducer,
                     compute, placeholder, reduce_axis, thread_axis, var)
from .tensor import sum, max, min, prod  # noqa: A004 - the reducers shadow builtins on purpose
from .math import (all, any, if_then_else, exp, exp2, log, log2, log1p, expm1, sqrt, rsqrt, tanh,
                   sigmoid, erf, abs, floor, ceil, round, trunc, sin, cos, tan, asin, acos, atan,
                   sinh, cosh, asinh, acosh, atanh, isnan, isinf, pow, power, atan2, fmod)
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .intrin import BufferDecl, IntrinError, TensorIntrin, decl_buffer, decl_tensor_intrin
