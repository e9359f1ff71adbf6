"""Cast and CastLike to and from strings, on the host (numeric casts are compiled ops).

From strings: each element is parsed as a number in plain or scientific notation ("3.14",
"1e-5", "1E8"); "INF", "+INF", "-INF" and "NaN" (any letter case) are the special floating
point values.  Integer targets take integer literals exactly (so int64 values keep every digit)
and truncate a decimal one toward zero (ONNX leaves that case undefined); bool targets are true
for a nonzero number or the word "true".

To strings: integers print in decimal, bools as "True"/"False", and floating point values as
the shortest decimal that reads back as the same value of their own type (float32 0.1 is "0.1",
as the ONNX reference casts), with NaN, +inf and -inf spelled "NaN", "INF" and "-INF", the
literals the ONNX spec reserves for them (and which a cast back to float reads).
"""
from __future__ import annotations

import numpy as np

from . import HostContext, host_op
from .strings import as_strings


def _string_type() -> int:
    from onnx import TensorProto
    return int(TensorProto.STRING)


def _target_dtype(ctx: HostContext, to) -> np.dtype | None:
    """The NumPy dtype of ONNX element type `to` (a number, or a name before opset 6); None
    for STRING."""
    from onnx import TensorProto, helper
    if isinstance(to, str):
        try:
            to = TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise ctx.error(f"unknown element type {to!r}") from None
    if int(to) == _string_type():
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(int(to)))
    except Exception:
        raise ctx.error(f"element type {to} is not supported by a cast from strings") from None


def _parse(ctx: HostContext, s: str, dtype: np.dtype):
    text = s.strip()
    try:
        if dtype.kind in "iu":
            try:
                return int(text)
            except ValueError:
                return int(float(text))
        if dtype.kind == "b":
            if text.lower() in ("true", "false"):
                return text.lower() == "true"
            return float(text) != 0.0
        return float(text)      # float() reads "inf", "+INF", "-inf", "NaN" in any case
    except (ValueError, OverflowError):
        raise ctx.error(f"cannot cast the string {s!r} to {dtype.name}") from None


def strings_to_numbers(ctx: HostContext, x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    values = [_parse(ctx, s, dtype) for s in as_strings(ctx, x).reshape(-1)]
    if dtype.kind in "iu":
        bits = 8 * dtype.itemsize
        # out of range: keep the low bits, as integer casts do (two's complement)
        values = [v & ((1 << bits) - 1) for v in values]
        wide = np.array(values, dtype=np.uint64).astype(dtype) if values else np.zeros(0, dtype)
        return wide.reshape(x.shape)
    return np.array(values, dtype=np.float64 if dtype.kind == "f" else dtype).astype(dtype).reshape(x.shape)


def _float_text(v) -> str:
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "INF" if v > 0 else "-INF"
    return str(v)


def numbers_to_strings(x: np.ndarray) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind == "f":
        fmt = _float_text
    elif a.dtype.kind == "b":
        def fmt(v):
            return "True" if v else "False"
    else:
        def fmt(v):
            return str(int(v))
    out = np.empty(a.shape, dtype=object)
    out.reshape(-1)[:] = [fmt(v) for v in a.reshape(-1)]
    return out


def cast(ctx: HostContext, x, dtype: np.dtype | None) -> np.ndarray:
    """`x` cast to `dtype` (None: strings), where `x` or the target is a string."""
    a = np.asarray(x)
    is_string = a.dtype.kind in "OUS"
    if dtype is None:
        return as_strings(ctx, a) if is_string else numbers_to_strings(a)
    if is_string:
        return strings_to_numbers(ctx, a, dtype)
    return a.astype(dtype)


@host_op("Cast")
def cast_op(ctx, inputs, attrs):
    if attrs.get("to") is None:
        raise ctx.error("the 'to' attribute is required")
    return [cast(ctx, inputs[0], _target_dtype(ctx, attrs["to"]))]


@host_op("CastLike")
def cast_like(ctx, inputs, attrs):
    like = np.asarray(inputs[1])
    return [cast(ctx, inputs[0], None if like.dtype.kind in "OUS" else like.dtype)]
