"""Reductions within a warp, per device (the `WarpLowering`s of tir/passes/select_allreduce.py).

CUDA: a warp is 32 threads; `__shfl_xor_sync` exchanges a register between lanes, so five
butterfly steps (lane distance 16, 8, 4, 2, 1) leave every lane holding the combination of all
32 values.  Any single-value reducer works (the combiner is applied to the exchanged values),
for the types the shuffle moves (32- and 64-bit integers and floats).

OpenCL: a warp is a sub-group, which exists only where the device reports cl_khr_subgroups; its
size is read from the device (a probe kernel's sub-group size for a 1-D work-group), and the
built-ins `sub_group_reduce_add / max / min` combine across it, so only sum, max and min
reductions use it.  Without the extension (PoCL on a CPU, NVIDIA's OpenCL) the shared-memory
tree stays.
"""
from __future__ import annotations

import functools

from ..ir.expr import CommReducer, Expr, Var, const
from ..tir import nodes as N
from ..tir.passes.select_allreduce import WarpLowering

CUDA_WARP = 32
_SHUFFLE_TYPES = {"int32", "uint32", "int64", "uint64", "float32", "float64"}


def _cuda_reduce(combiner: CommReducer, dtype: str, var: Var, value: Expr, body: N.Stmt) -> N.Stmt | None:
    """var = the warp's combination of value: a butterfly of xor shuffles, every lane active."""
    if dtype not in _SHUFFLE_TYPES:
        return None
    mask = const(0xFFFFFFFF, "uint32")
    steps: list[tuple[Var, Expr]] = []
    v = Var(f"{var.name}_0", dtype)
    current: Expr = v
    distance = CUDA_WARP // 2
    while distance >= 1:
        other = N.CallExtern(dtype, "__shfl_xor_sync", (mask, current, const(distance), const(CUDA_WARP)))
        nxt = var if distance == 1 else Var(f"{var.name}_{len(steps) + 1}", dtype)
        steps.append((nxt, combiner.combine([current], [other])[0]))
        current = nxt
        distance //= 2
    stmt = body
    for target, expr in reversed(steps):
        stmt = N.LetStmt(target, expr, stmt)
    return N.LetStmt(v, value, stmt)


CUDA_WARP_LOWERING = WarpLowering(CUDA_WARP, _cuda_reduce, lambda t: t % CUDA_WARP, lambda t: t // CUDA_WARP)


_SUB_GROUP_OPS = {"sum": "add", "max": "max", "min": "min"}
_SUB_GROUP_TYPES = {"int32", "uint32", "int64", "uint64", "float32"}


def _sub_group_reduce(combiner: CommReducer, dtype: str, var: Var, value: Expr, body: N.Stmt) -> N.Stmt | None:
    op = _SUB_GROUP_OPS.get(combiner.name)
    if op is None or dtype not in _SUB_GROUP_TYPES:
        return None
    return N.LetStmt(var, N.CallExtern(dtype, f"sub_group_reduce_{op}", (value,)), body)


def sub_group_lowering(width: int) -> WarpLowering:
    """OpenCL sub-groups of `width` work-items (the built-ins name the lane and the sub-group, so
    no assumption is made about which work-items share one)."""
    return WarpLowering(width, _sub_group_reduce,
                        lambda t: N.CallExtern("int32", "get_sub_group_local_id", ()),
                        lambda t: N.CallExtern("int32", "get_sub_group_id", ()))


_PROBE = "__kernel void tf_probe(__global float* a) { a[get_global_id(0)] = 0.0f; }"


@functools.lru_cache(maxsize=None)
def opencl_sub_group_width(device_filter: str) -> int:
    """The sub-group size of the OpenCL device `device_filter` picks for a 1-D work-group of
    256, or 0 when it has no cl_khr_subgroups (or no device can be opened)."""
    try:
        import pyopencl as cl

        from ..runtime.opencl import pick_device
        device = pick_device(device_filter)
        if "cl_khr_subgroups" not in device.extensions.split():
            return 0
        kernel = cl.Program(cl.Context([device]), _PROBE).build().tf_probe
        return int(kernel.get_sub_group_info(device, cl.kernel_sub_group_info.MAX_SUB_GROUP_SIZE_FOR_NDRANGE,
                                             (256,)))
    except Exception:       # no pyopencl, no device, or a driver without the query: keep the tree
        return 0
