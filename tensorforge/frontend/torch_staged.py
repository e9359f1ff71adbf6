"""from_torch on a module whose sizes depend on its data: `x[mask]`, `torch.nonzero`,
`torch.masked_select`, `torch.unique`, `torch.unique_consecutive`.

torch.export traces such an op with an unbacked symbol for the size only the data gives (`u0`
rows of `x[mask]`); the ops after it carry that symbol in their shapes.  No static graph can hold
them, so `from_torch` returns a `StagedTorchProgram` instead: the program's nodes cut into stages
at those ops.  Each stage is a stretch of ordinary nodes, a `TorchProgram` of its own whose
inputs are the values that earlier stages, the ops themselves or the user hand it (their shapes
symbolic where the data decides them); the data-dependent ops run on the host in NumPy between
the stages.  `tensorforge.compile` makes it a `StagedTorchModel`: each stage is a
ShapeSpecializedModel (staged.py), compiled per concrete shape of its inputs and kept in an LRU
cache, and where the data-dependent size leads a stage's inputs (the rows of `x[mask]`) and the
stage keeps those rows apart, a count that is not a batch bucket runs as chunks of the buckets
(batch_buckets.py), so a new count compiles nothing once its buckets exist.

`torch.unique_consecutive` runs on the host too, and so does `.item()`: an integer one's value
specializes the stretches after it (a slice up to it, arange of it), a float one that only
arithmetic reads is a 0-d input of them.  Other ops with data-dependent sizes
(`repeat_interleave` by a tensor, ...) are refused at `from_torch` with one line naming the node.
"""
from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from .onnx_host import contiguous
from .torch import TorchProgram
from .torch_convert import _bind, _flat, needed_nodes, op_label, op_name, shape_exprs, torch_dtype


def _nonzero(x: np.ndarray) -> np.ndarray:
    if x.ndim == 1:
        return np.flatnonzero(x).astype(np.int64, copy=False).reshape(-1, 1)
    return np.argwhere(x).astype(np.int64)


def _index(x: np.ndarray, indices: list) -> np.ndarray:
    """aten.index.Tensor: `x[indices]` with None for a whole axis (NumPy's advanced indexing is
    PyTorch's: boolean masks select, integer arrays gather, separated index arrays go first)."""
    mask = indices[0] if len(indices) == 1 else None
    if mask is not None and mask.dtype == np.bool_ and mask.ndim == 1 and x.ndim and mask.shape[0] == x.shape[0]:
        return np.compress(mask, x, axis=0)        # x[mask] on rows: a third faster, already contiguous
    key = tuple(slice(None) if i is None else (i if i.dtype == np.bool_ else i.astype(np.int64)) for i in indices)
    return contiguous(x[key])


def _masked_select(x: np.ndarray, mask: np.ndarray) -> np.ndarray:
    x, mask = np.broadcast_arrays(x, mask)
    return contiguous(x[mask])


def _unique2(x: np.ndarray, is_sorted: bool, return_inverse: bool, return_counts: bool) -> tuple:
    """torch.unique(x, sorted=True, ...): the distinct values in ascending order, each element's
    position among them (in x's shape) and how often each occurs (sorted=False is refused when
    the program is built)."""
    values, inverse, counts = np.unique(x.reshape(-1), return_inverse=True, return_counts=True)
    return (values, inverse.reshape(x.shape).astype(np.int64) if return_inverse else np.zeros(0, np.int64),
            counts.astype(np.int64) if return_counts else np.zeros(0, np.int64))


def _unique_consecutive(x: np.ndarray, return_inverse: bool, return_counts: bool, dim: int | None) -> tuple:
    """torch.unique_consecutive(x, ..., dim): each run of equal elements (of equal slices along
    `dim`) kept once, in order; each element's (slice's) run and the runs' lengths.  Values that
    compare unequal to themselves (NaN) start a run of their own, as in PyTorch."""
    lines = x.reshape(-1, 1) if dim is None else np.moveaxis(x, dim, 0).reshape(x.shape[dim], -1)
    n = lines.shape[0]
    starts = np.ones(n, dtype=bool)
    if n > 1:
        starts[1:] = np.any(lines[1:] != lines[:-1], axis=1) if lines.shape[1] else False
    first = np.flatnonzero(starts)
    values = x.reshape(-1)[first] if dim is None else np.take(x, first, axis=dim)
    inverse = (np.cumsum(starts) - 1).astype(np.int64)
    if dim is None:
        inverse = inverse.reshape(x.shape)
    counts = np.diff(np.append(first, n)).astype(np.int64)
    return (contiguous(values), inverse if return_inverse else np.zeros(0, np.int64),
            counts if return_counts else np.zeros(0, np.int64))


def _item(x: np.ndarray) -> np.ndarray:
    """aten._local_scalar_dense (`.item()`): the one element, as a 0-d array."""
    if x.size != 1:
        raise ValueError(f".item() of a tensor of {x.size} elements")
    return np.asarray(x.reshape(()))


# ops that may give a size only the data decides, run on the host: name -> (fn, argument names)
HOST_OPS: dict[str, tuple[Callable, tuple[str, ...]]] = {
    "nonzero": (_nonzero, ("self",)),
    "index": (_index, ("self", "indices")),
    "masked_select": (_masked_select, ("self", "mask")),
    "_unique2": (_unique2, ("self", "sorted", "return_inverse", "return_counts")),
    "unique_consecutive": (_unique_consecutive, ("self", "return_inverse", "return_counts", "dim")),
    "_local_scalar_dense": (_item, ("self",)),
}


def _unbacked(val: Any) -> set:
    """The unbacked symbols (sizes only the data gives) in the shape of a node's value."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    found: set = set()
    for v in vals:
        dims = list(v.shape) if hasattr(v, "shape") else [v] if v is not None else []
        for d in dims:
            found |= set(free_unbacked_symbols(d))
    return found


def _introduces_unbacked(n: Any) -> bool:
    own = _unbacked(n.meta.get("val"))
    inherited = set().union(*(_unbacked(p.meta.get("val")) for p in n.all_input_nodes)) if n.all_input_nodes else set()
    return bool(own - inherited)


def host_nodes(graph: Any) -> list:
    """The needed nodes of `graph` that run on the host: the ops of HOST_OPS whose output has a size
    that none of their inputs had."""
    hosts: list = []
    for n in needed_nodes(graph):
        if n.op != "call_function":
            continue
        if (op_name(n) in HOST_OPS and _introduces_unbacked(n)) or (n.target is operator.getitem and n.args[0] in hosts):
            hosts.append(n)          # a host op, or one output of a host op's tuple (unique's)
    return hosts


def _is_tensor(n: Any) -> bool:
    return hasattr(n.meta.get("val"), "shape")


def _computes_tensors(n: Any) -> bool:
    """Whether a node's value is a tensor or a tuple of them (native_layer_norm, topk), not a size."""
    val = n.meta.get("val")
    return hasattr(val, "shape") or (isinstance(val, (list, tuple)) and any(hasattr(v, "shape") for v in val))


# element-wise ops whose converters take any operand as a tensor: a float .item() they read can
# be a 0-d input (clamp's bounds, say, must be constants)
_ARITHMETIC = {"add", "sub", "rsub", "mul", "div", "eq", "ne", "lt", "le", "gt", "ge"}


def _arithmetic(n: Any) -> bool:
    """Whether a node is element-wise arithmetic that takes a float .item() as a 0-d tensor."""
    return n.op == "call_function" and op_name(n) in _ARITHMETIC


def _is_size(n: Any) -> bool:
    """Whether a node's value is an integer size (a SymInt or int: sym_size, size arithmetic)."""
    val = n.meta.get("val")
    return isinstance(val, int) or type(val).__name__ == "SymInt"


def _free(x: Any) -> set:
    """The symbols of a size (a SymInt, a sympy expression or an int)."""
    expr = getattr(getattr(x, "node", None), "expr", x)
    return set(getattr(expr, "free_symbols", ()))


def _tensor_sources(n: Any) -> list:
    """The tensor nodes a size node was computed from (through other size nodes)."""
    found, stack, seen = [], list(n.all_input_nodes), set()
    while stack:
        p = stack.pop()
        if p in seen:
            continue
        seen.add(p)
        if _is_tensor(p):
            found.append(p)
        else:
            stack.extend(p.all_input_nodes)
    return found


class _Stage:
    """The stretch of nodes one stage compiles (None when it has none) and the host ops that run
    after it.  `inputs`: the names of the values the stretch reads, in its program's input order;
    `outputs`: those it gives to later stages and to the program's outputs."""

    def __init__(self, program: TorchProgram | None, inputs: list[str], outputs: list[str], hosts: list):
        self.program, self.inputs, self.outputs, self.hosts = program, inputs, outputs, hosts


class StagedTorchProgram(TorchProgram):
    """An exported PyTorch program with data-dependent sizes, cut into stages (module docstring).
    Its `specs` are the user inputs'; `tensorforge.compile` gives a StagedTorchModel."""

    def __init__(self, program: Any, bindings: dict, name: str, specs: list):
        super().__init__(program, bindings, name, specs)
        import torch.fx
        graph = program.graph
        hosts = host_nodes(graph)
        for n in hosts:
            if op_name(n) == "_unique2" and not _arguments(n)["sorted"]:
                raise NotImplementedError(f"node {n.name} (torch.unique with sorted=False): PyTorch does not specify "
                                          "the order of its values; use sorted=True")
        self.host_ops = sorted({op_label(n) for n in hosts})
        # `.item()` of an integer tensor: its symbol's value is read from the host's 0-d array;
        # of a float tensor read only by arithmetic (x / x.max().item()): a 0-d input of
        # the stretches after it, so a new value compiles nothing
        self._scalars: dict = {}
        self._numbers: set = set()
        for n in hosts:
            if op_name(n) == "_local_scalar_dense":
                val = n.meta.get("val")
                if type(val).__name__ == "SymFloat" and all(_arithmetic(u) for u in n.users):
                    self._numbers.add(n)
                    continue
                if type(val).__name__ != "SymInt" or not getattr(val.node.expr, "is_Symbol", False):
                    raise NotImplementedError(f"node {n.name} (.item() of a {n.args[0].meta['val'].dtype} tensor): an "
                                              "integer .item() can be used in the program, and a float one that only "
                                              "arithmetic reads (+, -, *, / and comparisons)")
                self._scalars[val.node.expr] = n
        host_set = set(hosts)
        nodes = needed_nodes(graph)
        stage: dict = {}
        for n in nodes:
            if n.op == "output":
                continue
            if n.target is operator.getitem and n.args[0] in host_set:
                stage[n] = stage[n.args[0]]      # picked from its host op's tuple right after it
                continue
            stage[n] = max((stage[p] + (p in host_set) for p in n.all_input_nodes), default=0)
        count = max((stage[n] + (n in host_set) for n in stage), default=0) + 1
        out_node = next(n for n in graph.nodes if n.op == "output")
        self.outputs = [o for o in _flat(out_node.args[0])]
        for k, o in enumerate(self.outputs):
            if not hasattr(o, "op") or not _is_tensor(o):
                raise NotImplementedError(f"output {k} of {name} is not a tensor; only tensor outputs are supported")
        output_names = {o.name for o in self.outputs}
        # a node's value is needed outside its stretch by another stage's node, a host op or the outputs
        wanted = set(output_names)
        for n in nodes:
            for p in n.all_input_nodes:
                if n in host_set or p in host_set or stage.get(n) != stage.get(p):
                    wanted.add(p.name)
        # values of the weights alone (a transposed weight) are worked out in each stretch that
        # reads them, where they fold at compile time, not passed from one stretch to the next
        weights = {n for n in nodes if n.op == "placeholder" and bindings.get(n.name, ("input",))[0] == "const"}
        readers: dict = {}
        for n in nodes:
            for p in n.all_input_nodes:
                readers.setdefault(p, []).append(n)
        self._folded: set = set()
        for n in nodes:
            if (n.op == "call_function" and n not in host_set and _computes_tensors(n) and n.all_input_nodes
                    and all(p in weights or p in self._folded for p in n.all_input_nodes)
                    and n.name not in output_names
                    and not any(r in host_set for r in readers.get(n, ()))):
                self._folded.add(n)
        self.stages: list[_Stage] = []
        for s in range(count):
            members: list = []
            inside: set = set()
            for n in nodes:
                if n.op != "call_function" or stage.get(n) != s or n in host_set or n in self._folded:
                    continue
                # a size read from a value of the stretch itself (sym_size of a slice up to an
                # .item()) is worked out inside it, from the shape that value gets there
                if _computes_tensors(n) or (n.all_input_nodes and all(p in inside for p in n.all_input_nodes)
                                            and _is_size(n)):
                    members.append(n)
                    inside.add(n)
            hosts_here = [n for n in hosts if stage[n] == s]
            if not members:
                self.stages.append(_Stage(None, [], [], hosts_here))
                continue
            self.stages.append(self._stretch(torch.fx, s, members, wanted, hosts_here))

    def _stretch(self, fx: Any, s: int, members: list, wanted: set, hosts: list) -> _Stage:
        """Stage `s`'s stretch as a TorchProgram of its own: a placeholder for each value it reads
        from outside (a weight stays a constant; a size becomes a value its inputs' shapes give)."""
        inside = set(members)
        graph = fx.Graph()
        remap: dict = {}
        bindings: dict = {}
        inputs: list = []          # the nodes of the values it reads at run time, in order

        def outside(p: Any) -> Any:
            if p in self._folded:
                for q in p.all_input_nodes:
                    if q not in remap:
                        outside(q)
                remap[p] = graph.node_copy(p, lambda q: remap[q])
                return remap[p]
            node = graph.placeholder(p.name)
            node.meta = dict(p.meta)
            remap[p] = node
            if p.op == "placeholder" and self.bindings.get(p.name, ("input",))[0] == "const":
                bindings[node.name] = self.bindings[p.name]
            elif p in self._numbers:          # a float .item(): a 0-d tensor of the source's dtype
                import torch
                node.meta["val"] = torch.empty((), dtype=p.args[0].meta["val"].dtype, device="meta")
                bindings[node.name] = ("input", None)
                inputs.append(p)
            elif _is_tensor(p):
                bindings[node.name] = ("input", None)
                inputs.append(p)
            else:
                bindings[node.name] = ("size", None)      # a size its inputs' shapes give (sym_size(x[mask], 0))
                sizes.append(p)
            return node

        sizes: list = []
        values: list = []          # the host's .item() nodes whose values the stretch is specialized on
        for n in members:
            for p in n.all_input_nodes:
                if p not in inside and p not in remap:
                    outside(p)
            remap[n] = graph.node_copy(n, lambda p: remap[p])
        # a size is worked out from the symbols of the stretch's input shapes: where they lack one
        # of its symbols, the tensor it was read from (x[mask] for sym_size(x[mask], 0)) is passed too
        def given() -> set:
            return set().union(*(_free(d) for q in inputs for d in shape_exprs(remap[q]))) | {v.meta["val"].node.expr
                                                                                        for v in values}

        for p in list(sizes):
            if _free(p.meta.get("val")) - given():
                for q in _tensor_sources(p):
                    if q not in remap:
                        outside(q)
            for sym in sorted(_free(p.meta.get("val")) - given(), key=str):
                if sym in self._scalars:          # an .item(): the stretch is specialized on its value
                    h = self._scalars[sym]
                    if h not in remap:
                        outside(h)
                    values.append(h)
            if _free(p.meta.get("val")) - given():
                raise NotImplementedError(f"{self.name}: the size {p.name} ({p.meta.get('val')}) is used where no "
                                          "input of its stretch gives it")
        given_out = [n for n in members if n.name in wanted and _computes_tensors(n)]     # sizes stay inside
        outputs = [n.name for n in given_out]
        graph.output(tuple(remap[n] for n in given_out))
        specs = [(remap[q].name, shape_exprs(remap[q]), torch_dtype(remap[q].meta["val"].dtype)) for q in inputs]
        # the .item() values last: the compiled graph's inputs are the tensors, in the same order
        specs += [(remap[h].name, (), "int64") for h in values]
        stretch = TorchProgram(ProgramShell(graph, self.program.range_constraints), bindings, f"{self.name}_stage{s}",
                               specs)
        stretch.value_inputs = {len(inputs) + j: h.meta["val"].node.expr for j, h in enumerate(values)}
        return _Stage(stretch, [q.name for q in inputs] + [h.name for h in values], outputs, hosts)

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}: {dt}[{', '.join(map(str, dims))}]" for n, dims, dt in self.specs)
        return (f"StagedTorchProgram({self.name}, inputs [{shown}], {len(self.stages)} stage(s) around "
                f"{', '.join(self.host_ops)})")

    def graph_for(self, shapes: list[tuple]):
        raise NotImplementedError(f"{self.name} has sizes that depend on its data ({', '.join(self.host_ops)}); "
                                  "tensorforge.compile runs it stage by stage")


class ProgramShell:
    """What TorchProgram reads of an ExportedProgram: its graph and its symbols' ranges."""

    def __init__(self, graph: Any, range_constraints: dict):
        self.graph, self.range_constraints = graph, range_constraints


def host_calls(stage: _Stage) -> list[tuple[str, Callable, list]]:
    """(output name, NumPy function, its arguments as nodes) of each host op after a stage."""
    return [(n.name, operator.getitem, list(n.args)) if n.target is operator.getitem else
            (n.name, HOST_OPS[op_name(n)][0], [_arguments(n)[p] for p in HOST_OPS[op_name(n)][1]])
            for n in stage.hosts]


def _arguments(n: Any) -> dict:
    """A node's arguments by its schema's names, defaults filled in."""
    return _bind(n, list(n.args), dict(n.kwargs))


def host_value(x: Any, env: dict, consts: dict) -> Any:
    """An argument's value: a node's array (a weight's from `consts`), lists element-wise."""
    if isinstance(x, (list, tuple)):
        return [host_value(y, env, consts) for y in x]
    if hasattr(x, "op"):
        return env[x.name] if x.name in env else consts[x.name]
    return x
