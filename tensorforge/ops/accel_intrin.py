"""The accelerator's GEMM tensor intrinsic and memory scopes (ACCEL.md 4.1-4.2, VTA's
`intrin.py`).

The GEMM core computes one (BATCH x BLOCK_IN) . (BLOCK_OUT x BLOCK_IN)^T int8 block product
into an int32 (BATCH x BLOCK_OUT) accumulator per cycle:

    out[i, j] = sum_k int32(inp[i, k]) * int32(wgt[j, k])

Each operand lives in its on-chip buffer (a memory scope), and one buffer *element* is one whole
operand block, so the intrinsic's buffers have `offset_factor` = the element's lane count: the
matched offset divided by it is the SRAM index the micro-op carries.

`lower_fn` returns (body, reset, update) as calls the accelerator's code generator reads
(backends/accel/emit.py turns them into GEMM micro-ops):

    accel_gemm(&acc[a], &inp[i], &wgt[w])   accumulate one block product
    accel_gemm_reset(&acc[a])                zero one accumulator element

The pointers name the matched buffers and their first scalar element (the matcher binds them).  This module
is plain data for the ops layer; it knows the geometry (batch, block sizes) as integers, not the
backend's configuration object.
"""
from __future__ import annotations

import functools

from ..te.intrin import TensorIntrin, decl_buffer, decl_tensor_intrin
from ..te.tensor import compute, placeholder, reduce_axis
from ..te.tensor import sum as te_sum
from ..tir import nodes as N

INP_SCOPE = "local.inp_buffer"
WGT_SCOPE = "local.wgt_buffer"
ACC_SCOPE = "local.acc_buffer"
UOP_SCOPE = "local.uop_buffer"      # managed by the code generator, never a schedule's buffer
SCOPES = (INP_SCOPE, WGT_SCOPE, ACC_SCOPE)

GEMM_CALL = "accel_gemm"
RESET_CALL = "accel_gemm_reset"


@functools.lru_cache(maxsize=None)
def gemm_intrin(batch: int, block_in: int, block_out: int) -> TensorIntrin:
    """The GEMM block product for a (batch, block_in, block_out) core."""
    inp = placeholder((batch, block_in), "int8", name="inp")
    wgt = placeholder((block_out, block_in), "int8", name="wgt")
    k = reduce_axis((0, block_in), name="k")
    out = compute((batch, block_out),
                  lambda i, j: te_sum(inp[i, k].astype("int32") * wgt[j, k].astype("int32"), axis=k),
                  name="gemm_out")
    binds = {
        inp: decl_buffer(inp.shape, "int8", "inp_buf", scope=INP_SCOPE, offset_factor=batch * block_in),
        wgt: decl_buffer(wgt.shape, "int8", "wgt_buf", scope=WGT_SCOPE, offset_factor=block_in * block_out),
        out: decl_buffer(out.shape, "int32", "acc_buf", scope=ACC_SCOPE, offset_factor=batch * block_out),
    }

    def lower_fn(ins, outs):
        a, w = ins
        (acc,) = outs
        update = N.Evaluate(N.CallExtern("int32", GEMM_CALL, (acc.access_ptr(), a.access_ptr(), w.access_ptr())))
        reset = N.Evaluate(N.CallExtern("int32", RESET_CALL, (acc.access_ptr(),)))
        body = N.seq(reset, update)
        return body, reset, update

    return decl_tensor_intrin(out.op, lower_fn, binds=binds,
                              name=f"accel_gemm_{batch}x{block_in}x{block_out}")

