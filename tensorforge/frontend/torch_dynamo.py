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
updated weight recompiles the graph.  When dynamo makes a graph shape-generic (after a second
input shape, or with dynamic=True), the graph is traced and compiled once per concrete shape.
A graph with unsupported ops or non-tensor values falls back to eager PyTorch with a one-line
warning naming the reason.  The
backend is for inference: its outputs carry no autograd history.
"""
from __future__ import annotations

import warnings
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

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
    """One FX graph compiled by tensorforge, called with dynamo's flat list of tensors (and, for a
    graph dynamo made shape-generic, the sizes as ints).  A shape-generic graph is traced and
    compiled once per concrete shape it is called with (at most MAX_VARIANTS, least recently used
    dropped), so calls with a new batch size run compiled code too."""

    MAX_VARIANTS = 16

    def __init__(self, gm: Any, example_inputs: list, options: dict):
        torch = import_torch()
        self.gm = gm
        self.target = options.get("target", "c")
        self.threads = options.get("threads")
        bad = [type(x).__name__ for x in example_inputs if not isinstance(x, (torch.Tensor, int, torch.SymInt))]
        if bad:
            raise NotImplementedError(f"the graph takes inputs that are not tensors or sizes "
                                      f"({', '.join(sorted(set(bad)))})")
        self._variants: OrderedDict = OrderedDict()
        concrete = [_hint(x) for x in example_inputs]
        # the weights' positions follow from the graph (its placeholders' sources), not the call:
        # a variant's key is the shapes of the other inputs (a replaced weight is `stale`)
        self._varying = [k for k in range(len(concrete)) if k not in _weight_positions(gm, concrete)]
        self._variants[self._key(concrete)] = _Variant(gm, concrete, self.target, self.threads)

    def _key(self, args) -> tuple:
        return _key([args[k] for k in self._varying])

    @property
    def model(self):
        """The most recently used compiled model."""
        return next(reversed(self._variants.values())).model

    def __call__(self, *args: Any) -> Any:
        key = self._key(args)
        variant = self._variants.get(key)
        if variant is None or variant.stale(args):
            variant = _Variant(self.gm, list(args), self.target, self.threads)
            self._variants[key] = variant
            if len(self._variants) > self.MAX_VARIANTS:
                self._variants.popitem(last=False)
        self._variants.move_to_end(key)
        return variant(args)


def _hint(x: Any) -> Any:
    """A size as the int it has in the example (a SymInt's hint); tensors as they are."""
    import torch
    if isinstance(x, torch.SymInt):
        return int(x.node.hint)
    return x


def _key(args) -> tuple:
    """What a compiled variant depends on: each tensor's shape and dtype, each size's value."""
    import torch
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else int(a) for a in args)


class _Variant:
    """The graph traced with concrete inputs and compiled; its weights are baked in."""

    def __init__(self, gm: Any, inputs: list, target: str, threads: int | None):
        torch = import_torch()
        from torch.func import functionalize
        from torch.fx.experimental.proxy_tensor import make_fx
        from torch.utils._pytree import tree_flatten

        from .torch_convert import convert_graph
        from .torch_decomp import decompositions
        weights = _weight_positions(gm, inputs)
        with torch.no_grad():
            # functionalized: in-place ops (nn.ReLU(inplace=True)) become their pure forms
            traced = make_fx(functionalize(gm, remove="mutations_and_views"),
                             decomposition_table=decompositions())(*inputs)
        placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
        sizes = {k for k, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        bindings = {n.name: (("const", to_numpy(inputs[k])) if k in weights else
                             ("const", np.asarray(int(inputs[k]))) if k in sizes else ("input", None))
                    for k, n in enumerate(placeholders)}
        out_node = next(n for n in traced.graph.nodes if n.op == "output")
        leaves, self.out_spec = tree_flatten(out_node.args[0])
        if any(not hasattr(leaf, "op") for leaf in leaves):
            raise NotImplementedError("the graph returns values that are not tensors")
        graph = convert_graph(traced.graph, bindings, "torch_compile")
        self.model = compile_graph(graph, target=target, threads=threads)
        self.weights = {k: (inputs[k], inputs[k]._version) for k in weights}
        self.input_positions = [k for k in range(len(inputs)) if k not in weights and k not in sizes]

    def stale(self, args) -> bool:
        """Whether a baked-in weight was replaced or updated in place since the compile."""
        return any(args[k] is not t or args[k]._version != v for k, (t, v) in self.weights.items())

    def __call__(self, args) -> Any:
        import torch
        from torch.utils._pytree import tree_unflatten
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
