"""conv_transpose2d(x, W) with a constant float32 W becomes conv_transpose2d_nchwc(x, W packed)
-> nchwc_to_nchw (see ops/nn_conv_transpose_nchwc.py): gathered per output phase, with no
products against the zeros of a spread input, and B output channels per SIMD vector.

Fewer output channels than one vector form one narrow block (the template then vectorizes along
output positions); more channels that do not fill whole blocks are padded with zero weights and
sliced off after the layout change.  A transposed convolution of a 1x1 input without padding (a
generator's "project and reshape" layer) is a matrix product: it becomes reshape -> matmul with
the weight as a (C, M * KH * KW) constant -> reshape (alter_layout_matmul, which runs after
this pass, packs that weight).  A batch_norm with constant statistics that alone reads the
transposed convolution is folded into the weights and a per-channel bias (the rewrite
fold_batch_norm does for conv2d, along the weight's output-channel axis 1).
Applies with groups 1, dilation 1 and non-negative padding.  A weight that is a run-time value
(a dynamic filter) is packed the same way by nodes in the graph (a pad of the kernel to whole
phases, a reshape and a transpose) where its channels fill whole blocks: on the generic template
a 64 -> 32, 4x4 stride-2 layer over 28x28 took 14x ONNX Runtime's time.

A conv_transpose1d (a vocoder's up-sampling, kernel 16 and stride 8) is first written as the
same transposed conv of height 1, between an unsqueeze and a squeeze (views), so it takes the
same path; alone it ran on the generic template, 6-15x ONNX Runtime's time.
"""
from __future__ import annotations

import numpy as np

from ...ops.nn_conv_transpose_nchwc import pack_transpose_weight
from ...target import Target
from ..ir import Graph, Node, Value
from .fold_batch_norm import scale_and_shift
from .rewrite import constant_weight_window, rewrite_nodes


def alter_layout_conv_transpose(graph: Graph, target: Target) -> Graph:
    if not target.prefers("NCHWc"):
        return graph
    graph = rewrite_nodes(graph, _as_height_one)
    params = dict(graph.params)
    users = graph.consumers()
    folded: set = set()          # batch_norm nodes whose work moved into the convolution
    nodes: list = []
    for n in graph.nodes:
        if n in folded:
            continue
        if not _packable(n, params):
            if _phase_form(n) and n.inputs[1].shape[1] % _block(n, target) == 0:     # a run-time weight
                _as_phases(n, None, n.outputs[0], params, nodes, target)
            else:
                nodes.append(n)
            continue
        w = params[n.inputs[1]].astype(np.float64)
        shift = None
        final = n.outputs[0]
        bn = _lone_batch_norm(final, users, params, set(graph.outputs))
        if bn is not None:
            scale, shift = scale_and_shift(bn, params)
            w = w * scale.reshape(1, -1, 1, 1)
            folded.add(bn)
            final = bn.outputs[0]
        if _projection(n):
            cur = _as_matmul(n, w, final if shift is None else None, params, nodes)
        else:
            cur = _as_phases(n, w, final if shift is None else None, params, nodes, target)
        if shift is not None:
            m = w.shape[1]
            sv = Value(final.name + "_shift", (m, 1, 1), final.dtype)
            params[sv] = shift.astype(final.dtype).reshape(m, 1, 1)
            nodes.append(Node("add", (cur, sv), (final,), {}, n.name + "_shift"))
    if len(nodes) == len(graph.nodes) and not folded:
        return graph
    from .eliminate_dead_code import eliminate_dead_code
    return eliminate_dead_code(graph.with_nodes(nodes, params=params))


def _as_phases(n: Node, w: np.ndarray | None, final: Value | None, params: dict, nodes: list, target: Target) -> Value:
    """conv_transpose2d_nchwc -> nchwc_to_nchw (-> slice of the padded channels); returns the
    NCHW result (`final` when given).  `w` None: the weight is a run-time value whose channels
    fill whole blocks, packed per call by nodes as pack_transpose_weight packs a constant one."""
    y = n.outputs[0]
    m = n.inputs[1].shape[1]
    block = _block(n, target)
    mp = -(-m // block) * block
    strides = tuple(n.attrs.get("strides") or (1, 1))
    if w is None:
        wv = _packed_by_nodes(n, block, strides, nodes)
    else:
        if mp != m:
            w = np.concatenate([w, np.zeros((w.shape[0], mp - m) + w.shape[2:])], axis=1)
        wp = pack_transpose_weight(w.astype(y.dtype), block, strides)
        wv = Value(f"{n.inputs[1].name}_t{block}o", wp.shape, y.dtype)
        params[wv] = wp
    oh, ow = y.shape[2:]
    mid = Value(y.name + "_nchwc", (y.shape[0], mp // block, oh, ow, block), y.dtype)
    attrs = {"strides": strides, "out_hw": (oh, ow), "kernel": tuple(n.inputs[1].shape[2:]),
             "padding": tuple(n.attrs.get("padding") or (0, 0, 0, 0))}
    nodes.append(Node("conv_transpose2d_nchwc", (n.inputs[0], wv), (mid,), attrs, n.name))
    out = final if final is not None and mp == m else Value(y.name + "_nchw", (y.shape[0], mp, oh, ow), y.dtype)
    nodes.append(Node("nchwc_to_nchw", (mid,), (out,), {}, n.name + "_nchw"))
    if mp == m:
        return out
    cut = final if final is not None else Value(y.name + "_cut", y.shape, y.dtype)
    nodes.append(Node("slice", (out,), (cut,), {"starts": (0,), "ends": (m,), "axes": (1,), "steps": (1,)},
                      n.name + "_cut"))
    return cut


def _as_matmul(n: Node, w: np.ndarray, final: Value | None, params: dict, nodes: list) -> Value:
    """A 1x1 input: reshape -> matmul with W as (C, M * KH * KW) -> reshape."""
    x, y = n.inputs[0], n.outputs[0]
    batch, c = x.shape[:2]
    wm = np.ascontiguousarray(w.reshape(c, -1).astype(y.dtype))
    wv = Value(f"{n.inputs[1].name}_mat", wm.shape, y.dtype)
    params[wv] = wm
    rows = Value(x.name + "_rows", (batch, c), x.dtype)
    prod = Value(y.name + "_mat", (batch, wm.shape[1]), y.dtype)
    out = final if final is not None else Value(y.name + "_proj", y.shape, y.dtype)
    nodes.append(Node("reshape", (x,), (rows,), {"shape": (batch, c)}, n.name + "_rows"))
    nodes.append(Node("matmul", (rows, wv), (prod,), {}, n.name))
    nodes.append(Node("reshape", (prod,), (out,), {"shape": tuple(y.shape)}, n.name + "_proj"))
    return out


def _projection(n: Node) -> bool:
    """A 1x1 input without padding: every output position is one tap of the kernel."""
    x, w = n.inputs
    y = n.outputs[0]
    return (tuple(x.shape[2:]) == (1, 1) and not any(n.attrs.get("padding") or ())
            and tuple(y.shape[2:]) == tuple(w.shape[2:]))


def _block(n: Node, target: Target) -> int:
    """Output channels per block: a vector, or all of them where they are fewer (narrow layers,
    RGB outputs, keep their channels)."""
    m, lanes = n.inputs[1].shape[1], target.simd_lanes(n.outputs[0].dtype)
    return m if m < lanes else lanes


def _packed_by_nodes(n: Node, block: int, strides: tuple, nodes: list) -> Value:
    """The run-time weight (C, M, KH, KW) of `n` packed as pack_transpose_weight packs a constant
    one, by a pad of the kernel to whole phases, a reshape and a transpose appended to `nodes`."""
    w = n.inputs[1]
    c, m, kh, kw = w.shape
    sy, sx = strides
    ty_n, tx_n = -(-kh // sy), -(-kw // sx)
    cur = w
    if (ty_n * sy, tx_n * sx) != (kh, kw):
        cur = Value(f"{w.name}_phases", (c, m, ty_n * sy, tx_n * sx), w.dtype)
        nodes.append(Node("pad", (w,), (cur,), {"pads": (0, 0, 0, 0, 0, 0, ty_n * sy - kh, tx_n * sx - kw)},
                          f"{n.name}_w_phases"))
    split = Value(f"{w.name}_split", (c, m // block, block, ty_n, sy, tx_n, sx), w.dtype)
    packed = Value(f"{w.name}_t{block}o", (m // block, sy, sx, c, ty_n, tx_n, block), w.dtype)
    nodes += [Node("reshape", (cur,), (split,), {"shape": split.shape}, f"{n.name}_w_split"),
              Node("transpose", (split,), (packed,), {"perm": (1, 4, 6, 0, 3, 5, 2)}, f"{n.name}_w_pack")]
    return packed


def _packable(n: Node, params: dict) -> bool:
    """The phase form with a constant weight, packed at compile time."""
    return _phase_form(n) and n.inputs[1] in params


def _phase_form(n: Node) -> bool:
    """A float32 conv_transpose2d the phase template serves: groups 1, dilation 1, padding not
    negative."""
    if n.op != "conv_transpose2d" or len(n.inputs) != 2 or n.inputs[1] is None:
        return False
    x, w = n.inputs
    if x.dtype != "float32" or w.dtype != "float32" or n.attrs.get("groups", 1) != 1:
        return False
    if tuple(n.attrs.get("dilations") or (1, 1)) != (1, 1):
        return False
    return all(p >= 0 for p in (n.attrs.get("padding") or (0, 0, 0, 0)))


def _lone_batch_norm(y: Value, users: dict, params: dict, outputs: set) -> Node | None:
    """The batch_norm over channels (constant statistics) that is the only reader of `y`."""
    readers = users.get(y, [])
    if y in outputs or len(readers) != 1:
        return None
    bn = readers[0]
    if bn.op != "batch_norm" or bn.attrs.get("axis", 1) != 1 or bn.inputs[0] is not y:
        return None
    return bn if all(v in params for v in bn.inputs[1:]) else None


def _as_height_one(n: Node, params: dict) -> list[Node] | None:
    """conv_transpose1d -> unsqueeze -> conv_transpose2d of height 1 -> squeeze, for the forms
    the 2-D path packs (constant float32 weight, groups 1, dilation 1, padding not negative)."""
    window = constant_weight_window(n, params, {"conv_transpose1d": 1})
    if window is None:
        return None
    _, x, w, y, strides, dilations, pads = window
    if x.dtype != "float32" or w.dtype != "float32" or n.attrs.get("groups", 1) != 1:
        return None
    if dilations != (1,) or any(p < 0 for p in pads):
        return None
    x4 = Value(f"{y.name}_in_h1", (x.shape[0], x.shape[1], 1, x.shape[2]), x.dtype)
    w4 = Value(f"{y.name}_w_h1", (w.shape[0], w.shape[1], 1, w.shape[2]), w.dtype)
    params[w4] = params[w].reshape(w4.shape)
    y4 = Value(f"{y.name}_h1", (y.shape[0], y.shape[1], 1, y.shape[2]), y.dtype)
    attrs = {"strides": (1, strides[0]), "padding": (0, pads[0], 0, pads[1]),
             "output_padding": (0, tuple(n.attrs.get("output_padding") or (0,))[0]), "dilations": (1, 1),
             "groups": 1}
    return [Node("unsqueeze", (x,), (x4,), {"axes": (2,)}, f"{n.name}_h1"),
            Node("conv_transpose2d", (x4, w4), (y4,), attrs, n.name),
            Node("squeeze", (y4,), (y,), {"axes": (2,)}, f"{n.name}_squeeze")]
