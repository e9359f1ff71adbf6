"""torch.compile(model, backend="tensorforge"): a dynamo backend that compiles each FX graph.

    import tensorforge.frontend.torch_dynamo as tf_dynamo
    tf_dynamo.register()                       # not needed when tensorforge is installed: the
    fast = torch.compile(model, backend="tensorforge")   # entry point registers the name
    with torch.no_grad():
        y = fast(x)

Dynamo hands the backend an FX graph of torch-level calls and example inputs (the module's
parameters and buffers among them).  The backend functionalizes that graph (in-place ops become
pure ones) and traces it to core ATen with `make_fx`
and the core decompositions (plus `torch_decomp.py`'s), converts it with the same ATen converters as `from_torch`
(parameters and buffers become constants of the graph, so weight transposes and batch-norm
folds happen once at compile time), compiles it, and returns a callable on torch tensors: the
inputs go to the model as NumPy views of the tensors' memory, the outputs come back with
`torch.from_numpy` (no copies).

A baked-in weight is checked on every call (the same tensor object at the same version); an
updated weight recompiles the graph.  A graph with unsupported ops, symbolic shapes or
non-tensor values falls back to eager PyTorch with a one-line warning naming the reason.  The
backend is for inference: its outputs carry no autograd history.
"""
from __future__ import annotations

import warnings
from typing import Any, Callable

from ..driver import compile as compile_graph
from ..errors import UserError, one_line
from ..graph.ir import GraphError
from .torch import import_torch, to_numpy

BACKEND_NAME = "tensorforge"


def register() -> None:
    """Register the backend under the name "tensorforge" (idempotent)."""
    torch = import_torch()
    from torch._dynamo.backends import registry
    if BACKEND_NAME not in registry._COMPILER_FNS:
        torch._dynamo.register_backend(tensorforge_backend, name=BACKEND_NAME)


def tensorforge_backend(gm: Any, example_inputs: list, options: dict | None = None) -> Callable:
    """The dynamo backend: a compiled callable for `gm`, or `gm.forward` with a warning.
    `options` (torch.compile's options=) may name the tensorforge "target" and "threads"."""
    try:
        return CompiledGraph(gm, list(example_inputs), dict(options or {}))
    except (NotImplementedError, UserError, GraphError) as err:
        warnings.warn(f"torch.compile backend {BACKEND_NAME!r}: a graph runs in eager PyTorch instead: "
                      f"{one_line(str(err))}", UserWarning, stacklevel=2)
        return gm.forward


class CompiledGraph:
    """One FX graph compiled by tensorforge, called with dynamo's flat list of tensors."""

    def __init__(self, gm: Any, example_inputs: list, options: dict):
        self.gm = gm
        self.target = options.get("target", "c")
        self.threads = options.get("threads")
        self._build(example_inputs)

    def _build(self, inputs: list) -> None:
        torch = import_torch()
        from torch.func import functionalize
        from torch.fx.experimental.proxy_tensor import make_fx
        from torch.utils._pytree import tree_flatten

        from .torch_convert import convert_graph
        from .torch_decomp import decompositions
        bad = [type(x).__name__ for x in inputs if not isinstance(x, torch.Tensor)]
        if bad:
            raise NotImplementedError(f"the graph takes non-tensor inputs ({', '.join(sorted(set(bad)))}), "
                                      "which come from symbolic shapes; symbolic shapes are not supported yet "
                                      "(torch.compile(..., dynamic=False) avoids them)")
        weights = _weight_positions(self.gm, inputs)
        with torch.no_grad():
            # functionalized: in-place ops (nn.ReLU(inplace=True)) become their pure forms
            traced = make_fx(functionalize(self.gm, remove="mutations_and_views"),
                             decomposition_table=decompositions())(*inputs)
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        bindings = {n.name: (("const", to_numpy(inputs[k])) if k in weights else ("input", None))
                    for k, n in enumerate(placeholders)}
        out_node = next(n for n in traced.graph.nodes if n.op == "output")
        leaves, self.out_spec = tree_flatten(out_node.args[0])
        if any(not hasattr(leaf, "op") for leaf in leaves):
            raise NotImplementedError("the graph returns values that are not tensors")
        graph = convert_graph(traced.graph, bindings, "torch_compile")
        self.model = compile_graph(graph, target=self.target, threads=self.threads)
        self.weights = {k: (inputs[k], inputs[k]._version) for k in weights}
        self.input_positions = [k for k in range(len(inputs)) if k not in weights]

    def __call__(self, *args: Any) -> Any:
        import numpy as np
        import torch
        from torch.utils._pytree import tree_unflatten
        if any(args[k] is not t or args[k]._version != v for k, (t, v) in self.weights.items()):
            self._build(list(args))
        arrays = [np.ascontiguousarray(args[k].detach().cpu().numpy()) for k in self.input_positions]
        outs = self.model(*arrays)
        return tree_unflatten([torch.from_numpy(o) for o in outs], self.out_spec)


def _weight_positions(gm: Any, inputs: list) -> set[int]:
    """Positions of the inputs that are the module's parameters or buffers: dynamo passes them
    as graph inputs (its source names them), or they are nn.Parameter objects."""
    import torch
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found = set()
    for k, (node, value) in enumerate(zip(placeholders, inputs)):
        arg = node.meta.get("grapharg")
        source = getattr(getattr(arg, "source", None), "name", "")
        source = source() if callable(source) else str(source)
        if isinstance(value, torch.nn.Parameter) or "._parameters[" in source or "._buffers[" in source:
            found.add(k)
    return found
