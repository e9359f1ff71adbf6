"""Which peer is an exact oracle for what on this machine (used by the tests that compare with
ONNX Runtime)."""
from __future__ import annotations

import functools
import platform

# ONNX ops whose integer products ONNX Runtime computes with its u8 x s8 kernels
INTEGER_PRODUCT_OPS = frozenset({"MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv"})


@functools.cache
def ort_int8_products_exact() -> bool:
    """Whether ONNX Runtime's u8 x s8 integer products (MatMulInteger, ConvInteger, QLinearConv,
    QLinearMatMul, and the QDQ groups its optimizer fuses into them) are exact on this CPU.  On
    x86-64 without an int8 dot-product unit (VNNI or AMX) its kernels add pairs of u8 x s8
    products into int16 with saturation (vpmaddubsw), so large operands give other results than
    the ONNX definition (ONNX Runtime's quantizer offers `reduce_range` for such CPUs)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return True
    from ..ops.x86_intrin import int8_unit
    return int8_unit() is not None
