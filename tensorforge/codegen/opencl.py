"""The OpenCL dialect of the C-family printer: thread-bound PrimFuncs -> OpenCL C kernels.

Kernels are `__kernel void`, buffer parameters `__global`, blocks and threads are work-groups
and work-items (`get_group_id(0)`, `get_local_id(0)`), shared memory is `__local`, the barrier is
`barrier(CLK_LOCAL_MEM_FENCE)`.  OpenCL's math built-ins are overloaded on the argument type, so
there are no precision suffixes (`exp`, not `expf`); round-half-to-even is `rint`.  `bool` may not
live in global memory, so booleans are stored as `uchar`.  float16 and float64 enable their
extensions (cl_khr_fp16, cl_khr_fp64) where used.
"""
from __future__ import annotations

from .c_gpu import GPUDialect, GPUPrinter, GPUSource

OPENCL_DIALECT = GPUDialect(
    name="OpenCL",
    scalar_types={"bool": "uchar", "int8": "char", "int16": "short", "int32": "int", "int64": "long",
                  "uint8": "uchar", "uint16": "ushort", "uint32": "uint", "uint64": "ulong",
                  "float16": "half", "float32": "float", "float64": "double"},
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
    half_prelude="#pragma OPENCL EXTENSION cl_khr_fp16 : enable",
    double_prelude="#pragma OPENCL EXTENSION cl_khr_fp64 : enable",
)


class OpenCLPrinter(GPUPrinter):
    def __init__(self):
        super().__init__(OPENCL_DIALECT)

    def math_call(self, op: str, args: list[str], dtype: str) -> str:
        if op == "round":              # nearbyint is not an OpenCL built-in; rint rounds the same way
            return f"rint({args[0]})"
        return super().math_call(op, args, dtype)


def codegen_opencl(funcs, target=None) -> GPUSource:
    """OpenCL C source of the kernels of thread-bound `funcs` (one program)."""
    return OpenCLPrinter().print_program(list(funcs), target)
