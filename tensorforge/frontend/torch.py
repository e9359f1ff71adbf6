"""torch.nn.Module -> Graph, through torch.export.

    graph = tensorforge.frontend.from_torch(module, (x,))
    model = tensorforge.compile(graph)
    y, = model(x.numpy())

`torch.export.export(module.eval(), example_inputs)` traces the module into an ExportedProgram;
`run_decompositions()` lowers it to the core ATen op set, and `torch_convert.convert_graph` maps
each ATen node to graph ops (converters in `frontend/torch_ops/`).  Parameters, buffers and
lifted constants become the graph's params; the user inputs, in order, its inputs.

Symbolic dimensions (`torch.export.Dim` in `dynamic_shapes`) are not supported yet: the graph
is compiled for the example inputs' shapes, and a dynamic dimension is a clear error.
PyTorch is an optional dependency (the `torch` extra), imported only here.
"""
from __future__ import annotations

import warnings
from typing import Any

from ..errors import MissingDependencyError
from ..graph.ir import Graph
from .onnx import InputShapeError

# PyTorch's own warnings during export that say nothing to a user of tensorforge: nn.LSTM's
# flattened weights, and a deprecation inside torch's pytree code.
_EXPORT_NOISE = (r"The tensor attributes .* were assigned during export", r".*isinstance\(treespec, LeafSpec\)")


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("the PyTorch frontend needs PyTorch: pip install 'tensorforge[torch]'") from None
    return torch


def from_torch(module: Any, example_inputs: Any, dynamic_shapes: Any = None, name: str | None = None) -> Graph:
    """Convert a torch.nn.Module called on `example_inputs` (a tuple of tensors, or one tensor)
    into a Graph whose inputs are the module's tensor arguments, in order."""
    torch = import_torch()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch expects a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if dynamic_shapes is not None:
        raise InputShapeError("dynamic_shapes (torch.export.Dim) are not supported yet: tensorforge compiles "
                              "the module for the example inputs' static shapes; call from_torch without "
                              "dynamic_shapes and convert once per input shape")
    module = module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        for noise in _EXPORT_NOISE:
            warnings.filterwarnings("ignore", message=noise)
        try:
            program = torch.export.export(module, example_inputs)
        except Exception as err:
            raise NotImplementedError(f"torch.export could not trace {type(module).__name__}: "
                                      f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from err
        program = program.run_decompositions()
    return convert_program(program, name or type(module).__name__)


def convert_program(program: Any, name: str) -> Graph:
    """An ExportedProgram (already decomposed to core ATen) -> Graph."""
    from torch.export.graph_signature import InputKind

    from .torch_convert import convert_graph
    state = dict(program.state_dict)
    constants = dict(program.constants)
    bindings: dict[str, tuple] = {}
    for spec in program.graph_signature.input_specs:
        arg = spec.arg.name
        if spec.kind == InputKind.USER_INPUT:
            bindings[arg] = ("input", None)
            continue
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            tensor = state[spec.target] if spec.target in state else constants[spec.target]
        elif spec.kind in (InputKind.CONSTANT_TENSOR, InputKind.CUSTOM_OBJ):
            tensor = constants[spec.target]
        else:
            raise NotImplementedError(f"input {arg} of kind {spec.kind.name} is not supported")
        bindings[arg] = ("const", to_numpy(tensor))
    _reject_symbolic_inputs(program)
    return convert_graph(program.graph, bindings, name)


def to_numpy(tensor: Any) -> Any:
    """A torch tensor's values as a NumPy array (a copy detached from autograd)."""
    import numpy as np
    t = tensor.detach().cpu()
    if str(t.dtype) == "torch.bfloat16":
        raise NotImplementedError("bfloat16 weights are not supported by the PyTorch frontend yet")
    return np.array(t.numpy(), copy=True)


def _reject_symbolic_inputs(program: Any) -> None:
    for node in program.graph.nodes:
        if node.op == "placeholder":
            val = node.meta.get("val")
            if val is not None and not hasattr(val, "shape") and not isinstance(val, (int, float, bool)):
                raise InputShapeError(f"input {node.name} is a symbolic value ({val}); symbolic shapes are not "
                                      "supported yet")
