"""torch.nn.Module -> Graph, through torch.export.

    graph = tensorforge.frontend.from_torch(module, (x,))
    model = tensorforge.compile(graph)
    y, = model(x.numpy())

`torch.export.export(module.eval(), example_inputs)` traces the module into an ExportedProgram;
`run_decompositions()` lowers it to the core ATen op set (all but col2im: torch_decomp.py), and
`torch_convert.convert_graph` maps each ATen node to graph ops (converters in
`frontend/torch_ops/`).  Parameters, buffers and lifted constants become the graph's params;
the user inputs, in order, its inputs.

Symbolic dimensions (`torch.export.Dim` in `dynamic_shapes`) stay symbols: `from_torch` then
returns a `TorchProgram`, which `tensorforge.compile` turns into a model that converts and
compiles the program once per concrete input shape it is called with (checked against the Dims'
ranges and kept in an LRU cache), like a staged ONNX model.  A module with sizes that only its
data gives (`x[mask]`, `torch.nonzero`, `torch.masked_select`, `torch.unique`) becomes a `StagedTorchProgram`
(torch_staged.py): compiled stretches with those ops run on the host between them.
PyTorch is an optional dependency (the `torch` extra), imported only here.
"""
from __future__ import annotations

import warnings
from typing import Any

from ..errors import MissingDependencyError
from ..graph.ir import Graph
from .onnx import InputShapeError
from .torch_decomp import export_decompositions

# PyTorch's own warnings during export that say nothing to a user of tensorforge: nn.LSTM's
# flattened weights, and a deprecation inside torch's pytree code.
_EXPORT_NOISE = (r"The tensor attributes .* were assigned during export", r".*isinstance\(treespec, LeafSpec\)")


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise MissingDependencyError("the PyTorch frontend needs PyTorch: pip install 'tensorforge[torch]'") from None
    return torch


def from_torch(module: Any, example_inputs: Any, dynamic_shapes: Any = None, name: str | None = None):
    """Convert a torch.nn.Module called on `example_inputs` (a tuple of tensors, or one tensor)
    into a Graph whose inputs are the module's tensor arguments, in order.  With
    `dynamic_shapes` (torch.export's: `{"x": {0: torch.export.Dim("batch")}}`) that make some
    dimension symbolic, a TorchProgram (compiled per concrete shape when called)."""
    torch = import_torch()
    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"from_torch expects a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    module = module.eval()
    with torch.no_grad(), warnings.catch_warnings():
        for noise in _EXPORT_NOISE:
            warnings.filterwarnings("ignore", message=noise)
        try:
            program = torch.export.export(module, example_inputs, dynamic_shapes=dynamic_shapes)
        except Exception as err:
            raise NotImplementedError(f"torch.export could not trace {type(module).__name__}: "
                                      f"{str(err).splitlines()[0] if str(err) else type(err).__name__}") from err
        program = program.run_decompositions(export_decompositions())
    converted = convert_program(program, name or type(module).__name__)
    if isinstance(converted, TorchProgram):
        converted.dim_names = _dim_names(converted.specs, dynamic_shapes)
    return converted


def _dim_names(specs: list, dynamic_shapes: Any) -> dict[str, str]:
    """{symbol as the program prints it: the name of the torch.export.Dim the user gave there}
    (torch.export names its symbols s0, s1, ...), read from `dynamic_shapes` by input name or
    position."""
    if isinstance(dynamic_shapes, dict):
        per_input = [dynamic_shapes.get(name) for name, _, _ in specs]
    elif isinstance(dynamic_shapes, (list, tuple)):
        per_input = list(dynamic_shapes)
    else:
        return {}
    names: dict[str, str] = {}
    for (_, dims, _), axes in zip(specs, per_input):
        pairs = axes.items() if isinstance(axes, dict) else enumerate(axes) if isinstance(axes, (list, tuple)) else ()
        for axis, dim in pairs:
            label = getattr(dim, "__name__", None)
            if isinstance(axis, int) and 0 <= axis < len(dims) and isinstance(label, str) \
                    and not isinstance(dims[axis], int):
                names.setdefault(str(dims[axis]), label)
    return names


def convert_program(program: Any, name: str):
    """An ExportedProgram (already decomposed to core ATen) -> Graph, or a TorchProgram when its
    inputs have symbolic dimensions."""
    from torch.export.graph_signature import InputKind

    from .torch_convert import convert_graph
    from .torch_linear import fold_flattened_linears
    from .torch_masked import fold_masked_updates
    fold_flattened_linears(program.graph)      # the program is from_torch's own, decomposed copy
    fold_masked_updates(program.graph)         # x[mask] += v as a where: no data-dependent size
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
    specs = _input_specs(program)
    from .torch_staged import StagedTorchProgram, host_nodes
    if host_nodes(program.graph):     # sizes only the data gives: x[mask], nonzero
        return StagedTorchProgram(program, bindings, name, specs)
    if any(not isinstance(d, int) for _, dims, _ in specs for d in dims):
        return TorchProgram(program, bindings, name, specs)
    return convert_graph(program.graph, bindings, name)


def _input_specs(program: Any) -> list[tuple[str, tuple, str]]:
    """(name, dims, dtype) of each user input; a symbolic dimension is its sympy expression."""
    from .torch_convert import torch_dtype
    user = {s.arg.name for s in program.graph_signature.input_specs if s.kind.name == "USER_INPUT"}
    specs = []
    for node in program.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            val = node.meta["val"]
            dims = tuple(d if isinstance(d, int) else d.node.expr for d in val.shape)
            specs.append((node.name, dims, torch_dtype(val.dtype)))
    return specs


class TorchProgram:
    """An exported PyTorch program with symbolic input dimensions; `graph_for(shapes)` converts
    it for concrete input shapes.  `tensorforge.compile` makes it a model compiled per shape."""

    def __init__(self, program: Any, bindings: dict, name: str, specs: list):
        self.program, self.bindings, self.name, self.specs = program, bindings, name, specs
        self.dim_names: dict[str, str] = {}      # symbol -> the user's Dim name (from_torch fills it)
        # inputs that are 0-d integers whose value is a symbol (a staged program's `.item()`):
        # position -> symbol; their "shape" in symbols_for is ("=", value), and the graph reads
        # the value as a constant
        self.value_inputs: dict[int, Any] = {}
        self.ranges = {sym: (_lower(r.lower), _upper(r.upper)) for sym, r in program.range_constraints.items()
                       if getattr(r.lower, "is_integer", False) or isinstance(r.lower, int)}

    @property
    def input_names(self) -> list[str]:
        return [name for name, _, _ in self.specs]

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}: {dt}[{', '.join(map(str, dims))}]" for n, dims, dt in self.specs)
        return f"TorchProgram({self.name}, inputs [{shown}])"

    def symbols_for(self, shapes: list[tuple]) -> dict:
        """The value of each symbol given the inputs' shapes; ValueError naming the input when a
        shape contradicts the program (rank, static sizes, one symbol with two values, a Dim's
        range)."""
        import sympy
        values: dict = {}
        for k, sym in self.value_inputs.items():
            got = shapes[k][1]
            low, high = self.ranges.get(sym, (None, None))
            if (low is not None and got < low) or (high is not None and got > high):
                raise ValueError(f"input {self.specs[k][0]!r} ({sym}) is {got}, outside the range "
                                 f"[{low}, {high if high is not None else 'inf'}] the program assumes")
            values[sym] = got
        for k, ((name, dims, _), shape) in enumerate(zip(self.specs, shapes)):
            if k in self.value_inputs:
                continue
            text = "[" + ", ".join(map(str, dims)) + "]"
            if len(shape) != len(dims):
                raise ValueError(f"input {name!r}: expected shape {text}, got {tuple(shape)}")
            for axis, (want, got) in enumerate(zip(dims, shape)):
                if isinstance(want, int):
                    if want != got:
                        raise ValueError(f"input {name!r}: expected shape {text}, got {tuple(shape)}")
                elif isinstance(want, sympy.Symbol):
                    if values.setdefault(want, got) != got:
                        raise ValueError(f"input {name!r}: dimension {axis} is {want}, which is {values[want]} "
                                         f"in an earlier input, but {got} here")
                    low, high = self.ranges.get(want, (0, None))
                    if (low is not None and got < low) or (high is not None and got > high):
                        raise ValueError(f"input {name!r}: dimension {axis} ({want}) is {got}, outside the "
                                         f"range [{low}, {high if high is not None else 'inf'}] it was exported with")
        for k, ((name, dims, _), shape) in enumerate(zip(self.specs, shapes)):     # derived sizes (2 * s0) agree
            if k in self.value_inputs:
                continue
            for axis, (want, got) in enumerate(zip(dims, shape)):
                if not isinstance(want, int) and not isinstance(want, sympy.Symbol):
                    expected = want.xreplace(values)
                    if getattr(expected, "free_symbols", None) or int(expected) != got:
                        raise ValueError(f"input {name!r}: dimension {axis} must be {want} = {expected}, got {got}")
        return values

    def graph_for(self, shapes: list[tuple]) -> Graph:
        from .torch_convert import convert_graph
        symbols = self.symbols_for(shapes)
        return convert_graph(self.program.graph, self.bindings, self.name, symbols)


def _lower(bound: Any) -> int | None:
    """A range's lower bound as an int, None for none (an `.item()`'s symbol can be any integer)."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    return None if bound in (-int_oo, -sympy.oo) else int(bound)


def _upper(bound: Any) -> int | None:
    """A Dim's upper bound as an int, None for no bound (sympy's oo, or torch's integer infinity,
    which calls itself finite)."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    return None if bound in (int_oo, sympy.oo) else int(bound)


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
                raise InputShapeError(f"input {node.name} is a symbolic scalar ({val}); only tensor inputs "
                                      "are supported")
