"""ONNX MaxUnpool (opsets 9, 11) -> scatter_elements into zeros (frontend -> Graph).

Indices (as MaxPool returns them) are positions in the whole flattened output, N and C included.
The output shape defaults to (in - 1) * stride - (pad_begin + pad_end) + kernel per spatial axis;
an output_shape input (a constant here) may ask for a larger one, which is the default result
zero-padded at the end of each axis (the ONNX reference's reading).  Values land with a scatter
of the flattened input into a flattened zero tensor.
"""
from __future__ import annotations

import numpy as np

from ..onnx import converter
from .nn_common import int_tuple, spatial_rank
from .transform_util import const_ints, input_at, present


@converter("MaxUnpool", since=9)
def max_unpool(ctx, inputs: list, attrs: dict):
    x, indices = inputs[0], inputs[1]
    r = spatial_rank(ctx, x)
    if "kernel_shape" not in attrs:
        raise ValueError("the attribute kernel_shape is required")
    kernel = int_tuple(attrs, "kernel_shape", None, r)
    strides = int_tuple(attrs, "strides", (1,) * r, r)
    pads = int_tuple(attrs, "pads", (0,) * (2 * r), 2 * r)
    if tuple(indices.shape) != tuple(x.shape):
        raise ValueError(f"I has shape {tuple(indices.shape)}; it must match X {tuple(x.shape)}")
    default = tuple(x.shape[:2]) + tuple((x.shape[2 + i] - 1) * strides[i] - pads[i] - pads[r + i] + kernel[i]
                                         for i in range(r))
    shape = default
    if present(input_at(inputs, 2)):
        shape = const_ints(ctx, inputs[2], "MaxUnpool output_shape")
        if len(shape) != len(default) or any(s < d for s, d in zip(shape, default)):
            raise ValueError(f"output_shape {shape} must have rank {len(default)} and be at least {default}")
    size = int(np.prod(default))
    zeros = ctx.add1("constant_of_shape", [], {"shape": (size,), "value": 0, "dtype": x.dtype})
    flat_x = ctx.add1("reshape", [x], {"shape": (-1,)})
    flat_i = ctx.add1("reshape", [indices], {"shape": (-1,)})
    y = ctx.add1("scatter_elements", [zeros, flat_i, flat_x], {"axis": 0})
    y = ctx.add1("reshape", [y], {"shape": default})
    if shape == default:
        return y
    grow = [s - d for s, d in zip(shape, default)]
    return ctx.add1("pad", [y], {"pads": (0,) * len(shape) + tuple(grow), "mode": "constant", "value": 0})
