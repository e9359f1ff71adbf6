"""Control flow on the host: If, Loop, Scan and SequenceMap run their body graphs through
`ctx.run_graph`, which compiles each body as a graph of its own (once per specialization of its
input shapes) and sees the enclosing scope's values.

Semantics as ONNX specifies them:
- If: the branch chosen by the scalar `cond`; its outputs are the node's.
- Loop(M, cond, v...): body(i, cond, v...) -> (cond', v'..., scan...) while i < M and cond;
  an absent M or cond does not limit.  Scan outputs are stacked on a new first axis.
- Scan (opset 9+): N state values and K scan inputs sliced along their axes (reversed for
  direction 1); body(state..., slices...) -> (state'..., per-step outputs...), stacked along
  the output axes (prepended for direction 1).  Opset 8's form has a batch axis first and an
  optional sequence_lens input; it runs the opset-9 loop per batch entry.
- SequenceMap: the body once per element of the input sequence (and of any additional
  sequences, whose elements it takes in step), each output collected into a sequence.
"""
from __future__ import annotations

import numpy as np

from . import HostContext, contiguous, host_op


def _scalar_bool(ctx: HostContext, value, what: str) -> bool:
    a = np.asarray(value)
    if a.size != 1:
        raise ctx.error(f"{what} must hold one element, got shape {a.shape}")
    return bool(a.reshape(()))


@host_op("If")
def if_(ctx, inputs, attrs):
    branch = attrs["then_branch"] if _scalar_bool(ctx, inputs[0], "cond") else attrs["else_branch"]
    return ctx.run_graph(branch, [])


def _empty_like_output(body, j: int) -> np.ndarray:
    """The stacked value of a scan output that got no step: shape (0, ...) with the element type
    the body declares (its other dimensions when static, else none)."""
    import onnx
    t = body.output[j].type.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(t.elem_type) if t.elem_type else np.float32
    dims = [d.dim_value for d in t.shape.dim] if t.HasField("shape") and all(
        d.HasField("dim_value") for d in t.shape.dim) else []
    return np.zeros([0] + dims, dtype=dtype)


@host_op("Loop")
def loop(ctx, inputs, attrs):
    body = attrs["body"]
    trip = inputs[0] if inputs and inputs[0] is not None else None
    limit = int(np.asarray(trip).reshape(-1)[0]) if trip is not None else None
    cond = _scalar_bool(ctx, inputs[1], "cond") if len(inputs) > 1 and inputs[1] is not None else True
    carried = list(inputs[2:])
    n_scan = len(body.output) - 1 - len(carried)
    if n_scan < 0:
        raise ctx.error(f"the body returns {len(body.output)} values, fewer than 1 + {len(carried)} loop-carried")
    scans: list[list] = [[] for _ in range(n_scan)]
    i = 0
    while (limit is None or i < limit) and cond:
        outs = ctx.run_graph(body, [np.asarray(i, dtype=np.int64), np.asarray(cond), *carried])
        cond = _scalar_bool(ctx, outs[0], "the body's condition")
        carried = list(outs[1:1 + len(carried)])
        for s, value in zip(scans, outs[1 + len(carried):]):
            s.append(value)
        i += 1
    stacked = [np.stack(s) if s else _empty_like_output(body, 1 + len(carried) + j) for j, s in enumerate(scans)]
    return carried + stacked


def _scan(ctx, body, states: list, scans: list, attrs, n_out: int) -> list:
    """The opset-9 Scan over `scans` (already sliced per batch entry for opset 8)."""
    k = len(scans)
    in_axes = list(attrs.get("scan_input_axes", [0] * k))
    in_dirs = list(attrs.get("scan_input_directions", [0] * k))
    out_axes = list(attrs.get("scan_output_axes", [0] * n_out))
    out_dirs = list(attrs.get("scan_output_directions", [0] * n_out))
    slices = []
    for x, axis, direction in zip(scans, in_axes, in_dirs):
        axis = axis + x.ndim if axis < 0 else axis
        parts = [contiguous(np.take(x, t, axis=axis)) for t in range(x.shape[axis])]
        slices.append(parts[::-1] if direction else parts)
    lengths = {len(p) for p in slices}
    if len(lengths) > 1:
        raise ctx.error(f"the scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop() if lengths else 0
    outs_per_step: list[list] = [[] for _ in range(n_out)]
    for t in range(steps):
        outs = ctx.run_graph(body, [*states, *(contiguous(p[t]) for p in slices)])
        states = list(outs[:len(states)])
        for acc, value in zip(outs_per_step, outs[len(states):]):
            acc.append(value)
    results = []
    for j, acc in enumerate(outs_per_step):
        if not acc:
            results.append(_empty_like_output(body, len(states) + j))
            continue
        if out_dirs[j]:
            acc = acc[::-1]
        stacked = np.stack(acc)
        axis = out_axes[j] + stacked.ndim if out_axes[j] < 0 else out_axes[j]
        results.append(contiguous(np.moveaxis(stacked, 0, axis)))
    return states + results


@host_op("Scan")
def scan(ctx, inputs, attrs):
    body = attrs["body"]
    k = int(attrs["num_scan_inputs"])
    if ctx.opset >= 9:
        states, scans = list(inputs[:len(inputs) - k]), list(inputs[len(inputs) - k:])
        return _scan(ctx, body, states, scans, attrs, len(body.output) - len(states))
    # opset 8: (sequence_lens, states..., scans...), every value with a batch axis first
    lens, rest = inputs[0], list(inputs[1:])
    states, scans = rest[:len(rest) - k], rest[len(rest) - k:]
    n_out = len(body.output) - len(states)
    batch = scans[0].shape[0] if scans else states[0].shape[0]
    dirs = list(attrs.get("directions", [0] * k))
    per_batch = []
    for b in range(batch):
        length = int(lens[b]) if lens is not None else scans[0].shape[1]
        per_batch.append(_scan(ctx, body, [s[b] for s in states], [x[b, :length] for x in scans],
                               {"scan_input_directions": dirs}, n_out))
    return [np.stack([r[j] for r in per_batch]) for j in range(len(states) + n_out)]


@host_op("SequenceMap")
def sequence_map(ctx, inputs, attrs):
    body = attrs["body"]
    seq = inputs[0]
    if not isinstance(seq, list):
        raise ctx.error("input 0 must be a sequence")
    for k, extra in enumerate(inputs[1:], 1):
        if isinstance(extra, list) and len(extra) != len(seq):
            raise ctx.error(f"sequence input {k} has {len(extra)} elements, input 0 has {len(seq)}")
    results: list[list] = [[] for _ in body.output]
    for i, element in enumerate(seq):
        args = [element] + [extra[i] if isinstance(extra, list) else extra for extra in inputs[1:]]
        for acc, value in zip(results, ctx.run_graph(body, args)):
            acc.append(value)
    return results
