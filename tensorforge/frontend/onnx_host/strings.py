"""String ops on the host: StringNormalizer, StringSplit, StringConcat, RegexFullMatch, Equal
when it compares strings, and Constant when it holds strings.

A string tensor is a NumPy object array of Python `str` (ONNX stores UTF-8 bytes; bytes met in
a value are decoded).  Every op keeps that form: outputs are object arrays of `str`, or bool
and int64 arrays for the ops that answer questions about strings.  Casts between strings and
numbers live in cast_string.py.
"""
from __future__ import annotations

import functools
import re

import numpy as np

from . import HostContext, host_op


def as_strings(ctx: HostContext, value, what: str = "input") -> np.ndarray:
    """`value` as an object array of `str` (bytes decoded as UTF-8); a clear error for a
    numeric tensor."""
    a = np.asarray(value)
    if a.dtype.kind not in "OUS":
        raise ctx.error(f"{what} must be a string tensor, got dtype {a.dtype.name}")
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, s in enumerate(a.reshape(-1)):
        flat[i] = s.decode("utf-8") if isinstance(s, bytes) else str(s)
    return out


# -- StringNormalizer (opset 10) ------------------------------------------------------------------

@host_op("StringNormalizer")
def string_normalizer(ctx, inputs, attrs):
    """Drop the stop words (compared ignoring case unless is_case_sensitive), then lower- or
    upper-case what is left (case_change_action).  X is [C] or [1, C]; when every element is
    dropped the output is one empty string, shaped [1] or [1, 1].  Case follows Unicode's
    mapping whatever the `locale` attribute names."""
    x = as_strings(ctx, inputs[0], "X")
    if not (x.ndim == 1 or (x.ndim == 2 and x.shape[0] == 1)):
        raise ctx.error(f"X must have shape [C] or [1, C], got {list(x.shape)}")
    action = str(attrs.get("case_change_action", "NONE")).upper()
    if action not in ("NONE", "LOWER", "UPPER"):
        raise ctx.error(f"case_change_action must be LOWER, UPPER or NONE, got {action!r}")
    sensitive = bool(int(attrs.get("is_case_sensitive", 0)))
    stopwords = [str(s) for s in attrs.get("stopwords", ())]
    if sensitive:
        stop = set(stopwords)
        kept = [s for s in x.reshape(-1) if s not in stop]
    else:
        stop = {s.lower() for s in stopwords}
        kept = [s for s in x.reshape(-1) if s.lower() not in stop]
    if action == "LOWER":
        kept = [s.lower() for s in kept]
    elif action == "UPPER":
        kept = [s.upper() for s in kept]
    if not kept:
        kept = [""]
    out = np.empty(len(kept), dtype=object)
    out[:] = kept
    return [out if x.ndim == 1 else out.reshape(1, -1)]


# -- StringSplit (opset 20) -----------------------------------------------------------------------

@host_op("StringSplit")
def string_split(ctx, inputs, attrs):
    """Y: X's shape plus one axis holding each element's substrings, padded with empty strings
    to the longest; Z: the number of substrings of each element.  An unset or empty delimiter
    splits on runs of whitespace (ignoring leading and trailing whitespace); otherwise each
    delimiter separates, so consecutive ones delimit empty strings.  maxsplit limits the splits
    from the left; the rest of the string is the last substring."""
    x = as_strings(ctx, inputs[0], "X")
    delimiter = attrs.get("delimiter") or None
    maxsplit = attrs.get("maxsplit")
    limit = -1 if maxsplit is None else int(maxsplit)
    if limit < -1:
        raise ctx.error(f"maxsplit must not be negative, got {limit}")
    parts = [s.split(delimiter, limit) for s in x.reshape(-1)]
    width = max((len(p) for p in parts), default=0)
    y = np.full((len(parts), width), "", dtype=object)
    for i, p in enumerate(parts):
        y[i, :len(p)] = p
    z = np.array([len(p) for p in parts], dtype=np.int64)
    return [y.reshape(x.shape + (width,)), z.reshape(x.shape)]


# -- StringConcat (opset 20) ----------------------------------------------------------------------

@host_op("StringConcat")
def string_concat(ctx, inputs, attrs):
    """X + Y elementwise, with NumPy broadcasting."""
    x, y = as_strings(ctx, inputs[0], "X"), as_strings(ctx, inputs[1], "Y")
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise ctx.error(f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast") from None
    xb, yb = np.broadcast_to(x, shape), np.broadcast_to(y, shape)
    out = np.empty(shape, dtype=object)
    out.reshape(-1)[:] = [a + b for a, b in zip(xb.reshape(-1), yb.reshape(-1))]
    return [out]


# -- RegexFullMatch (opset 20) --------------------------------------------------------------------

def python_pattern(pattern: str) -> str:
    """An RE2 pattern in Python's `re` syntax: RE2's end-of-text `\\z` is Python's `\\Z` (the
    rest of the RE2 syntax models use reads the same; `re` rejects what it lacks, such as
    `\\p{Greek}`, with a clear error)."""
    out, k = [], 0
    while k < len(pattern):
        if pattern[k] == "\\" and k + 1 < len(pattern):
            out.append("\\Z" if pattern[k + 1] == "z" else pattern[k:k + 2])
            k += 2
        else:
            out.append(pattern[k])
            k += 1
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern:
    return re.compile(python_pattern(pattern))


@host_op("RegexFullMatch")
def regex_full_match(ctx, inputs, attrs):
    """Whether each element matches `pattern` as a whole.  ONNX names RE2 syntax; Python's `re`
    reads the RE2 constructs models use (classes, repetition, groups, alternation, anchors)."""
    x = as_strings(ctx, inputs[0], "X")
    pattern = attrs.get("pattern")
    if pattern is None:
        raise ctx.error("the 'pattern' attribute is required")
    try:
        rx = _compiled(str(pattern))
    except re.error as err:
        raise ctx.error(f"pattern {pattern!r} is not a valid regular expression: {err}") from None
    out = np.array([rx.fullmatch(s) is not None for s in x.reshape(-1)], dtype=bool)
    return [out.reshape(x.shape)]


# -- Equal of strings -----------------------------------------------------------------------------

@host_op("Equal")
def equal(ctx, inputs, attrs):
    """Equal where an input holds strings (numeric Equal is a compiled op): elementwise string
    equality with broadcasting.  Both inputs must be strings."""
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    if (a.dtype.kind in "OUS") != (b.dtype.kind in "OUS"):
        raise ctx.error(f"cannot compare a {a.dtype.name} tensor with a {b.dtype.name} tensor; "
                        "both inputs must have one element type")
    if a.dtype.kind not in "OUS":
        return [np.equal(a, b)]
    a, b = as_strings(ctx, a, "A"), as_strings(ctx, b, "B")
    try:
        shape = np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise ctx.error(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    pairs = zip(np.broadcast_to(a, shape).reshape(-1), np.broadcast_to(b, shape).reshape(-1))
    return [np.array([p == q for p, q in pairs], dtype=bool).reshape(shape)]



# -- Constant of strings --------------------------------------------------------------------------

@host_op("Constant")
def constant(ctx, inputs, attrs):
    """A Constant holding strings (value_string, value_strings or a string tensor `value`);
    numeric constants are graph constants made by the converter."""
    if "value_string" in attrs:
        return [as_strings(ctx, np.asarray(attrs["value_string"], dtype=object))]
    if "value_strings" in attrs:
        return [as_strings(ctx, np.asarray(list(attrs["value_strings"]), dtype=object).reshape(-1))]
    value = attrs.get("value")
    if value is None:
        raise ctx.error(f"a constant given as {next(iter(attrs), 'nothing')} is not supported")
    value = np.asarray(value)
    return [as_strings(ctx, value) if value.dtype.kind in "OUS" else value]
