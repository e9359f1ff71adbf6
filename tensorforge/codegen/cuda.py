"""The CUDA dialect of the C-family printer: thread-bound PrimFuncs -> CUDA C++ for NVRTC.

Kernels are `extern "C" __global__` (so their names are not mangled and the driver API finds
them), blocks and threads are `blockIdx.x` / `threadIdx.x`, shared memory is `__shared__`, the
barrier is `__syncthreads()`.  Math uses the single-precision functions (`expf`) of the CUDA math
library, which NVRTC provides without includes; float16 is a 16-bit struct converted with PTX
instructions, used only for loads, stores and conversions (legalize.py does half arithmetic in
float32); bfloat16 is an unsigned short converted with bit shifts (c_gpu.py).  A value bound
inside an expression (a Let: the inliner's shared subexpressions, a NaN-propagating maximum's
operand) is an immediately called lambda, as NVRTC has no GNU statement expressions.
"""
from __future__ import annotations

from ..ir import dtype as dt
from ..ir import expr as E
from .c_gpu import GPUDialect, GPUPrinter, GPUSource

# float16 as a 16-bit value converted with the PTX instructions (round to nearest even), so the
# source needs no header: NVRTC ships without cuda_fp16.h.  Arithmetic is done in float32.
_HALF = """struct tf_half {
  unsigned short bits;
  __device__ tf_half() {}
  __device__ tf_half(float f) { asm("cvt.rn.f16.f32 %0, %1;" : "=h"(bits) : "f"(f)); }
  __device__ operator float() const { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(bits)); return f; }
};"""

# narrow storage types (float8, float4, int4, int2, ...) are bytes that kernels only move
NARROW_STORAGE = {t: "unsigned char" for t in dt.NARROW_TYPES}

CUDA_DIALECT = GPUDialect(
    name="CUDA",
    scalar_types={"bool": "bool", "int8": "signed char", "int16": "short", "int32": "int",
                  "int64": "long long", "uint8": "unsigned char", "uint16": "unsigned short",
                  "uint32": "unsigned int", "uint64": "unsigned long long", "float16": "tf_half",
                  "bfloat16": "unsigned short",
                  "float32": "float", "float64": "double",
                  **NARROW_STORAGE},
    restrict="__restrict__",
    kernel_prefix='extern "C" __global__ void',
    math_suffix={"float32": "f", "float64": ""},
    thread_index={"blockIdx.x": "blockIdx.x", "blockIdx.y": "blockIdx.y", "blockIdx.z": "blockIdx.z",
                  "threadIdx.x": "threadIdx.x", "threadIdx.y": "threadIdx.y", "threadIdx.z": "threadIdx.z"},
    barrier="__syncthreads();",
    shared_qualifier="__shared__",
    helper_prefix="static __device__ __forceinline__",
    int64_suffix="LL",
    reserved=("threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "new", "delete", "class",
              "template", "this", "namespace", "operator", "private", "public", "protected",
              "virtual", "friend", "typename", "using", "try", "catch", "throw", "true", "false"),
    prelude=("#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n"
             "#ifndef NAN\n#define NAN __int_as_float(0x7fffffff)\n#endif"),
    half_prelude=_HALF,
    bits_of_float="__float_as_uint",
    float_of_bits="__uint_as_float",
)


class CUDAPrinter(GPUPrinter):
    def __init__(self):
        super().__init__(CUDA_DIALECT)

    def let_text(self, e: E.Let, name: str, value: str, body: str) -> str:
        result = self.value_type(e.body.dtype, e.body)
        return f"[&]() -> {result} {{ {self.value_type(e.value.dtype, e.value)} {name} = {value}; return {body}; }}()"


def codegen_cuda(funcs, target=None) -> GPUSource:
    """CUDA source of the kernels of thread-bound `funcs` (one translation unit)."""
    return CUDAPrinter().print_program(list(funcs), target)
