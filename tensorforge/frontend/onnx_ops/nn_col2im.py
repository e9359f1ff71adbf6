"""ONNX Col2Im (opset 18) -> tensorforge `col2im` (frontend -> Graph).

image_shape and block_shape are inputs in ONNX and attributes here, so they must be constants;
dilations, pads and strides default to ones and zeros.
"""
from __future__ import annotations

from ..onnx import converter
from .nn_common import int_tuple
from .transform_util import const_ints


@converter("Col2Im", since=18)
def col2im(ctx, inputs: list, attrs: dict):
    image = const_ints(ctx, inputs[1], "Col2Im image_shape")
    block = const_ints(ctx, inputs[2], "Col2Im block_shape")
    r = len(image)
    return ctx.add1("col2im", [inputs[0]], {"image_shape": image, "block_shape": block,
                                            "strides": int_tuple(attrs, "strides", (1,) * r, r),
                                            "dilations": int_tuple(attrs, "dilations", (1,) * r, r),
                                            "pads": int_tuple(attrs, "pads", (0,) * (2 * r), 2 * r)})
