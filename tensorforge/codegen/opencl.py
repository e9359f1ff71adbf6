"""The OpenCL dialect of the C-family printer: thread-bound PrimFuncs -> OpenCL C kernels.

Kernels are `__kernel void`, buffer parameters `__global`, blocks and threads are work-groups
and work-items (`get_group_id(0)`, `get_local_id(0)`), shared memory is `__local`, the barrier is
`barrier(CLK_LOCAL_MEM_FENCE)`.  OpenCL's math built-ins are overloaded on the argument type, so
there are no precision suffixes (`exp`, not `expf`); round-half-to-even is `rint`.  `bool` may not
live in global memory, so booleans are stored as `uchar`.  float16 and float64 enable their
extension (cl_khr_fp64) where used; float16 needs no extension: it is stored with the core
`vstore_half_rte` / `vload_half` and is a `float` in registers, rounded to half precision by every
IR cast to float16.  bfloat16 is stored as ushort and converted with bit shifts (c_gpu.py).
"""
from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from ..tir import nodes as N
from .c_gpu import GPUDialect, GPUPrinter, GPUSource, _const_count
from .c_text import ATOM, COND, UNARY

# float -> the nearest half (ties to even) -> float, with the core half load/store built-ins
_ROUND_HALF = """static inline float tf_round_half(float x) {
  ushort bits;
  vstore_half_rte(x, 0, (__private half*)&bits);
  return vload_half(0, (__private half*)&bits);
}"""

# narrow storage types (float8, float4, int4, int2, ...) are bytes that kernels only move
NARROW_STORAGE = {t: "uchar" for t in dt.NARROW_TYPES}

OPENCL_DIALECT = GPUDialect(
    name="OpenCL",
    scalar_types={"bool": "uchar", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
                  "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
                  "float16": "half", "bfloat16": "ushort", "float32": "float", "float64": "double",
                  **NARROW_STORAGE},
    restrict="restrict",
    kernel_prefix="__kernel void",
    pointer_qualifier="__global",
    math_suffix={"float32": "", "float64": ""},
    thread_index={"blockIdx.x": "(int)get_group_id(0)", "blockIdx.y": "(int)get_group_id(1)",
                  "blockIdx.z": "(int)get_group_id(2)", "threadIdx.x": "(int)get_local_id(0)",
                  "threadIdx.y": "(int)get_local_id(1)", "threadIdx.z": "(int)get_local_id(2)"},
    barrier="barrier(CLK_LOCAL_MEM_FENCE);",
    shared_qualifier="__local",
    helper_prefix="static inline",
    int64_suffix="L",
    reserved=("kernel", "__kernel", "global", "local", "constant", "private", "read_only",
              "write_only", "read_write", "half", "uchar", "ushort", "uint", "ulong", "image2d_t",
              "image3d_t", "sampler_t", "event_t", "vec_type_hint", "barrier", "true", "false",
              "char", "short", "long", "float", "double", "int", "bool", "void"),
    double_prelude="#pragma OPENCL EXTENSION cl_khr_fp64 : enable",
    extensions=(("sub_group_", "#pragma OPENCL EXTENSION cl_khr_subgroups : enable"),),
    bits_of_float="as_uint",
    float_of_bits="as_float",
)


class OpenCLPrinter(GPUPrinter):
    def __init__(self):
        super().__init__(OPENCL_DIALECT)

    def math_call(self, op: str, args: list[str], dtype: str) -> str:
        if op == "round":              # nearbyint is not an OpenCL built-in; rint rounds the same way
            return f"rint({args[0]})"
        return super().math_call(op, args, dtype)

    # float16 without cl_khr_fp16: a float in registers, half in memory ---------------------------
    def value_type(self, dtype: str, e=None) -> str:
        if dt.element_of(dtype) == "float16" and dt.lanes(dtype) == 1:
            return "float"
        return super().value_type(dtype, e)

    def visit_Allocate(self, s: N.Allocate) -> None:
        """A thread's float16 buffer: a `half` variable cannot be declared without cl_khr_fp16, a
        pointer to half can, so the storage is ushort and the loads and stores go through it."""
        buf = s.buffer
        count = _const_count(buf) if buf.scope == N.LOCAL else None
        if count is None or dt.element_of(buf.dtype) != "float16" or dt.lanes(buf.dtype) != 1:
            return super().visit_Allocate(s)
        name = self.bind_buffer(buf)
        bits = self.fresh(f"{name}_bits")
        try:
            self.emit(f"ushort {bits}[{max(1, count)}];")
            self.emit(f"__private half* {name} = (__private half*){bits};")
            self.stmt(s.body)
        finally:
            self.unbind_buffer(buf, name)

    def print_BufferLoad(self, e: N.BufferLoad):
        if dt.element_of(e.buffer.dtype) != "float16" or dt.lanes(e.dtype) > 1:
            return super().print_BufferLoad(e)
        index = self.single_index(e.buffer, e.indices, "load")
        return f"vload_half({self.index_expr(index)}, {self.buffer_ref(e.buffer)})", ATOM

    def visit_BufferStore(self, s: N.BufferStore) -> None:
        if dt.element_of(s.buffer.dtype) != "float16" or dt.lanes(s.value.dtype) > 1:
            return super().visit_BufferStore(s)
        index = self.single_index(s.buffer, s.indices, "store")
        self.emit(f"vstore_half_rte({self.expr(s.value, COND)}, {self.index_expr(index)}, "
                  f"{self.buffer_ref(s.buffer)});")

    def print_Cast(self, e: E.Cast):
        if dt.element_of(e.dtype) == "float16":
            self.helpers.setdefault("tf_round_half", _ROUND_HALF)
            return f"tf_round_half((float){self.expr(e.value, UNARY)})", ATOM
        return super().print_Cast(e)

    def float_literal(self, value: float, dtype: str):
        if dt.element_of(dtype) == "float16":
            import numpy as np
            with np.errstate(over="ignore"):
                return super().float_literal(float(np.float16(value)), "float32")
        return super().float_literal(value, dtype)


def codegen_opencl(funcs, target=None) -> GPUSource:
    """OpenCL C source of the kernels of thread-bound `funcs` (one program)."""
    return OpenCLPrinter().print_program(list(funcs), target)
