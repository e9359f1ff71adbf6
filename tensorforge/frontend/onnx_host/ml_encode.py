"""ai.onnx.ml ops that map or pick values, on the host: LabelEncoder (opsets 1, 2 and 4),
ArrayFeatureExtractor and Binarizer.

LabelEncoder is a lookup table from keys to values; its keys are often strings, which never
enter a compiled stretch, so it runs on the host like the string ops.  ArrayFeatureExtractor
and Binarizer take strings or numbers and are small enough that a host pass costs less than
cutting the model around them.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import HostContext, contiguous, host_op
from .strings import as_strings

ML = "ai.onnx.ml"


# -- LabelEncoder ---------------------------------------------------------------------------------

def _decoded(values) -> np.ndarray:
    """An attribute's list or tensor as an array; strings (bytes in a tensor) decoded."""
    a = np.asarray(values)
    if a.dtype.kind in "OUS" or (a.size == 0 and a.dtype.kind not in "biuf"):
        out = np.empty(a.shape, dtype=object)
        out.reshape(-1)[:] = [s.decode("utf-8") if isinstance(s, bytes) else str(s) for s in a.reshape(-1)]
        return out
    return a


def _typed(attrs: dict, prefix: str, what: str, ctx: HostContext) -> np.ndarray | None:
    """The one `prefix`_* attribute that is set (keys_ or values_), as an array of its type:
    floats -> float32, int64s -> int64, strings -> str, tensor -> the tensor's type."""
    given = {k: attrs[k] for k in (f"{prefix}_floats", f"{prefix}_int64s", f"{prefix}_strings", f"{prefix}_tensor")
             if attrs.get(k) is not None}
    if len(given) > 1:
        raise ctx.error(f"only one of the {what} attributes may be set, got {sorted(given)}")
    if not given:
        return None
    name, value = next(iter(given.items()))
    if name.endswith("_floats"):
        return np.asarray(value, dtype=np.float32)
    if name.endswith("_int64s"):
        return np.asarray(value, dtype=np.int64)
    if name.endswith("_strings"):
        return _decoded(np.asarray(list(value), dtype=object))
    return _decoded(value).reshape(-1)


def _default(attrs: dict, values: np.ndarray) -> Any:
    """The output for a key that is not in the table: default_tensor (opset 4), else the
    default_* attribute of the values' type, else ONNX's defaults ("_Unused", -1, -0.0)."""
    if attrs.get("default_tensor") is not None:
        d = _decoded(attrs["default_tensor"]).reshape(-1)
        return d[0]
    if values.dtype == object:
        return attrs.get("default_string", "_Unused")
    if values.dtype.kind == "f":
        return attrs.get("default_float", -0.0)
    return attrs.get("default_int64", -1)


def _key(v) -> Any:
    """A hashable lookup key: numbers as Python floats or ints, so float32 and float64 keys of
    one value meet; NaN is looked up separately (it matches any NaN)."""
    if isinstance(v, str):
        return v
    if isinstance(v, (float, np.floating)):
        return float(v)
    return int(v)


def _lookup(ctx: HostContext, x: np.ndarray, keys: np.ndarray, values: np.ndarray, default) -> np.ndarray:
    if len(keys) != len(values):
        raise ctx.error(f"keys and values must have the same length, got {len(keys)} and {len(values)}")
    table: dict = {}
    nan_value, has_nan = None, False
    for k, v in zip(keys.tolist(), values.tolist()):    # a repeated key: the last one wins
        if isinstance(k, float) and math.isnan(k):
            nan_value, has_nan = v, True
        else:
            table[_key(k)] = v
    out_dtype = values.dtype
    flat = []
    for e in x.reshape(-1).tolist():
        if isinstance(e, float) and math.isnan(e):
            flat.append(nan_value if has_nan else default)
        else:
            flat.append(table.get(_key(e), default))
    out = np.empty(x.shape, dtype=out_dtype)
    out.reshape(-1)[:] = flat
    return out


@host_op("LabelEncoder", domain=ML)
def label_encoder(ctx, inputs, attrs):
    """Opset 1: strings -> their index in classes_strings (default_int64 when absent), or
    int64 -> classes_strings[i] (default_string out of range), chosen by the input's type.
    Opsets 2 and 4: keys_* -> values_* (lists, or 1-D tensors from opset 4), default_* for a
    key not in the table; float NaN keys match any NaN."""
    x = np.asarray(inputs[0])
    if x.dtype.kind in "OUS":
        x = as_strings(ctx, x, "X")
    if ctx.opset < 2:
        classes = _decoded(np.asarray(list(attrs.get("classes_strings", ())), dtype=object))
        if x.dtype == object:
            keys, values = classes, np.arange(len(classes), dtype=np.int64)
            default: Any = int(attrs.get("default_int64", -1))
        else:
            keys, values = np.arange(len(classes), dtype=np.int64), classes
            default = attrs.get("default_string", "_Unused")
        return [_lookup(ctx, x, keys, values, default)]
    table_keys = _typed(attrs, "keys", "keys_*", ctx)
    table_values = _typed(attrs, "values", "values_*", ctx)
    if table_keys is None or table_values is None:
        raise ctx.error("a keys_* and a values_* attribute are required")
    if (table_keys.dtype == object) != (x.dtype == object):
        raise ctx.error(f"the keys are {'strings' if table_keys.dtype == object else table_keys.dtype.name} "
                        f"but the input is {'strings' if x.dtype == object else x.dtype.name}")
    return [_lookup(ctx, x, table_keys, table_values, _default(attrs, table_values))]


# -- ArrayFeatureExtractor ------------------------------------------------------------------------

@host_op("ArrayFeatureExtractor", domain=ML)
def array_feature_extractor(ctx, inputs, attrs):
    """X[..., Y]: the elements of X's last axis at the indices Y (flattened).  A 1-D X gives
    shape [1, len(Y)]."""
    x = np.asarray(inputs[0])
    if x.dtype.kind in "OUS":
        x = as_strings(ctx, x, "X")
    idx = np.asarray(inputs[1]).astype(np.int64).reshape(-1)
    if x.ndim == 0:
        raise ctx.error("X must have at least one dimension")
    n = x.shape[-1]
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise ctx.error(f"index {int(bad[0])} is out of range for the last axis of X, of size {n}")
    out = np.take(x, idx, axis=-1)
    return [contiguous(out.reshape(1, -1) if x.ndim == 1 else out)]


# -- Binarizer ------------------------------------------------------------------------------------

@host_op("Binarizer", domain=ML)
def binarizer(ctx, inputs, attrs):
    """1 where X > threshold, else 0, in X's type."""
    x = np.asarray(inputs[0])
    if x.dtype.kind not in "biuf":
        raise ctx.error(f"X must be a numeric tensor, got dtype {x.dtype.name}")
    threshold = float(attrs.get("threshold", 0.0))
    return [(x > threshold).astype(x.dtype)]
