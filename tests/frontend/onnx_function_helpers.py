"""Helpers for tests of ops that ONNX defines by a function body (Softmax, LogSoftmax,
Attention, ...): the one-node model rewritten as its body (what the conformance suite's
`_expanded` cases are), the ONNX reference evaluator's outputs, and a comparison that names the
worst element."""
from __future__ import annotations

import copy

import numpy as np
from onnx import helper


def expanded(model):
    """The one-node `model` with its node replaced by the node's ONNX function body (the form of
    the conformance suite's `_expanded` cases), in the body's opset."""
    from onnx.backend.test.case.node import function_testcase_helper
    graph = model.graph
    (node,) = copy.deepcopy(graph.node)        # the helper edits the node's attributes
    types = [i.type for i in graph.input]
    bodies, _ = function_testcase_helper(node, types, graph.name)
    if not bodies:
        raise ValueError(f"{node.op_type} has no function body in ONNX {model.opset_import}")
    nodes, opsets = bodies[-1]
    body = helper.make_graph(nodes, f"{graph.name}_expanded", list(graph.input), list(graph.output),
                             list(graph.initializer))
    return helper.make_model(body, opset_imports=list(opsets))


def onnx_reference(model, feeds: dict) -> list:
    """The outputs of onnx.reference.ReferenceEvaluator."""
    from onnx.reference import ReferenceEvaluator
    return [np.asarray(o) for o in ReferenceEvaluator(model).run(None, feeds)]


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float = 1e-7, what: str = "") -> None:
    """Elementwise |got - want| <= atol + rtol * |want| (NaNs equal), in float64, with dtypes and
    shapes equal; the message names the worst element."""
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{what}: {got.dtype}{got.shape} against {want.dtype}{want.shape}"
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isclose(g, w, rtol=rtol, atol=atol) | (np.isnan(g) & np.isnan(w)))
    if bad.any():
        at = np.unravel_index(np.argmax(np.where(bad, np.abs(g - w), -1)), g.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} of {g.size} elements differ beyond rtol {rtol}; "
                             f"at {tuple(int(i) for i in at)}: {g[at]} against {w[at]}")
