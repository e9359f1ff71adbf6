"""torch.compile(model, backend="tensorforge"): a dynamo backend that compiles each FX graph.

    import tensorforge.frontend.torch_dynamo as tf_dynamo
    tf_dynamo.register()                       # not needed when tensorforge is installed: the
    fast = torch.compile(model, backend="tensorforge")   # entry point registers the name
    with torch.no_grad():
        y = fast(x)

Dynamo hands the backend an FX graph of torch-level calls and example inputs (the module's
parameters and buffers among them, or, with dynamo's `install_free_tensors`, held by the graph
module as attributes).  The backend functionalizes that graph (in-place ops become pure ones)
and traces it to core ATen with `make_fx` and the core decompositions (plus
`torch_decomp.py`'s), converts it with the same ATen converters as `from_torch` (parameters and
buffers become constants of the graph, so weight transposes and batch-norm folds happen once at
compile time), compiles it, and returns a callable on torch tensors: the inputs go to the model
as NumPy views of the tensors' memory (a non-contiguous or non-CPU tensor is copied), the
outputs come back with `torch.from_numpy` (no copies).

A baked-in weight is checked on every call (the same tensor object at the same version, in a
few C-level passes over the arguments); an updated weight recompiles the graph.  Weights made
under `torch.inference_mode` keep no version, so their graph runs in eager PyTorch.  When dynamo
makes a graph shape-generic (after a second input shape, or with dynamic=True), the graph is
traced and compiled once per concrete shape; a symbolic batch whose size is not a batch bucket
runs as chunks on the buckets' variants where the graph keeps batch rows apart (batch_buckets.py;
`options={"batch_buckets": ()}` compiles every batch size instead), and with
`options={"sequence_buckets": (16, 32, ...)}` a symbolic length other than the batch runs padded
to the next of those lengths (sequence_buckets.py: checked once against the exact length; the
graph's symbol is dynamo's, so there must be one besides the batch).  By default ("auto") a
symbol other than the batch that has taken 8 values starts buckets of its own, as `compile`'s
do; `options={"sequence_buckets": None}` turns them off.  With dynamo's
`capture_dynamic_output_shape_ops`, a graph may hold ops whose sizes only the data gives
(`x[mask]`, `torch.nonzero`): it is traced on fake tensors, so those sizes stay symbols, and runs
as a StagedTorchModel (frontend/torch_staged.py), the selections in NumPy between compiled
stretches; a new count of selected rows re-traces nothing.  A graph with unsupported ops or non-tensor values
falls back to eager PyTorch with a one-line warning naming the reason.  Dynamo leaves a module
with an nn.LSTM to eager PyTorch unless `torch._dynamo.config.allow_rnn = True`; with it, the
LSTM compiles (frontend/torch_ops/rnn.py).

The backend is for inference: in grad mode or not, with inputs that require grad or not, its
outputs carry no autograd history (gradients do not flow through a compiled graph).  A module in
training mode (random dropout, batch norm on batch statistics), or any graph that updates a
parameter or buffer in place, runs in eager PyTorch with the one-line warning, so its buffers
update as they would without torch.compile (tracing runs on copies and leaves them alone).  A
graph that updates another tensor it is given (a cache passed in, or a tensor an earlier graph
made before dynamo cut the code at a selection) compiles: the new values are extra outputs,
copied into the caller's tensor after each call (such a graph is not cut into batch buckets,
whose chunks are copies).

Each call also pays dynamo's own cost around the backend's function: its guards (thousands of
checks on the module tree and every parameter for a CNN: 2,800 for MobileNet) and the gathering
of the parameters as arguments.  In a loop that runs no model that is 16-50 us per call; after a
model has streamed its weights through the caches nearly all of it misses them, 0.3-0.6 ms for
the CNNs and transformers of benchmarks/exports/models.py, and this, not the backend, is what a
torch.compile call costs beyond the same model through ONNX (the kernels take the same time on
both paths; the backend's own work per call, the weight check and the tensor conversions, is
0.03-0.2 ms cold and a few microseconds warm).  Dynamo's `install_free_tensors` and
`use_recursive_dict_tags_for_guards` settings make its part smaller.  benchmarks/torch_compile.py
measures it ("dynamo alone"), benchmarks/torch_compile_costs.py splits a call into its parts, and
benchmarks/results/torch_compile.txt has the figures.
"""
from __future__ import annotations

import operator
import re
import time
import warnings
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from .. import batch_buckets as buckets
from ..driver import compile as compile_graph
from ..driver import sharing_params
from ..errors import UserError, one_line
from ..graph.ir import GraphError
from ..graph.passes.share_equal_params import SharedParams
from ..sequence_buckets import SequencePadding, run_padded
from .torch import import_torch, to_numpy

BACKEND_NAME = "tensorforge"
# the weights the compiled variants derive alike (a transposed, packed weight), one array for all
# the graphs dynamo hands over: a module's first graph and the shape-generic one that follows it
_SHARED = SharedParams()


def register() -> None:
    """Register the backend under the name "tensorforge" (idempotent)."""
    torch = import_torch()
    from torch._dynamo.backends import registry
    if BACKEND_NAME not in registry._COMPILER_FNS:
        torch._dynamo.register_backend(tensorforge_backend, name=BACKEND_NAME)


def tensorforge_backend(gm: Any, example_inputs: list, options: dict | None = None) -> Callable:
    """The dynamo backend: a compiled callable for `gm`, or `gm.forward` with a warning.
    `options` (torch.compile's options=) may name the tensorforge "target", "threads",
    "batch_buckets" and "sequence_buckets"."""
    try:
        return CompiledGraph(gm, list(example_inputs), dict(options or {}))
    except (NotImplementedError, UserError, GraphError) as err:
        warnings.warn(f"torch.compile backend {BACKEND_NAME!r}: a graph runs in eager PyTorch instead: "
                      f"{one_line(str(err))}", UserWarning, stacklevel=2)
        return gm.forward
    except Exception as err:        # a failure of the backend itself: the user's call still runs
        warnings.warn(f"torch.compile backend {BACKEND_NAME!r}: a graph runs in eager PyTorch instead: the backend "
                      f"failed on it ({type(err).__name__}: {one_line(str(err))}); please report this",
                      UserWarning, stacklevel=2)
        return gm.forward


class CompiledGraph:
    """One FX graph compiled by tensorforge, called with dynamo's flat list of tensors (and, for a
    graph dynamo made shape-generic, the sizes as ints).  A shape-generic graph is traced and
    compiled once per concrete shape it is called with (at most MAX_VARIANTS, least recently used
    dropped), so calls with a new batch size run compiled code too.

    A call first tries the most recently used variant (its input shapes match, which needs no
    check for a graph dynamo did not make shape-generic, and its weights are current), which
    costs a few C-level passes over the arguments and no Python loop per weight; otherwise it
    looks the variant up by the input shapes and the weights' identities (`_key`)."""

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
        self._params = _SHARED
        self.info: dict = {"specializations": 0, "compile_seconds": 0.0}
        concrete = [_hint(x) for x in example_inputs]
        # the weights' positions follow from the graph (its placeholders' sources, which dynamo
        # drops after the compile), not the call: a variant's key is the shapes of the other
        # inputs (a replaced weight is `stale`)
        self._weights = sorted(_weight_positions(gm, concrete))
        # numbers dynamo passes as 0-d tensors (with dynamic=True a module's float attributes, a
        # LayerNorm's eps, become inputs read by .item()): constants of each variant, keyed by value
        self._numbers = _number_inputs(gm, concrete, self._weights)
        self._varying = [k for k in range(len(concrete)) if k not in self._weights and k not in self._numbers]
        self._pick_varying = _picker(self._varying)
        self._pick_weights = _picker(self._weights)
        # x[mask], torch.nonzero (with dynamo's capture_dynamic_output_shape_ops): sizes only the
        # data gives; each variant runs staged (frontend/torch_staged.py), its own buckets for them
        self._staged = _data_dependent(gm)
        # dynamo guards the shapes and dtypes of a graph it did not make shape-generic, so such
        # a graph is only ever called with its example's: a call need only check the weights
        self._generic = any(_symbolic(x) for x in example_inputs)
        # a symbolic leading dimension: where the graph keeps its rows apart, a batch that is not
        # one of the buckets runs as chunks on the buckets' variants (batch_buckets.py)
        self._buckets = buckets.checked_buckets(options.get("batch_buckets", buckets.DEFAULT_BATCH_BUCKETS))
        self._batch, self._cut, self._sized = _batch_positions(gm, self._varying) \
            if self._buckets and not self._staged else (None, (), ())
        self._splits: dict[tuple, buckets.BatchSplit | str] = {}
        # a symbolic length run at sequence buckets (options={"sequence_buckets": lengths})
        self._padding, self._seq_sizes = _sequence_padding(gm, self._varying, options) \
            if self._generic and not self._staged else (None, ())
        # the example's variants are compiled now, so that a graph that cannot compile runs in
        # eager PyTorch from the start: the whole example, or the buckets it splits into
        split = self._split(concrete) if self._batch is not None else None
        if split is not None:
            for size in sorted({size for size, _ in split[2]}):
                self._last = self._variant(_cut(concrete, self._cut, self._sized, 0, size))
        else:
            self._last = self._variant(concrete)
        if self._last.updates:       # padded inputs are copies: an update would not reach the caller's
            self._padding = None

    def _key(self, args) -> tuple:
        """What tells the variants apart: the inputs' shapes and dtypes, the sizes, and which weight
        tensors the call passes.  Two instances of one module class share dynamo's graph (their
        parameters are its inputs), so calls that alternate between them alternate between two
        variants instead of recompiling one on every call.  A variant holds the weights it baked,
        so no other object can take their ids while its key is in the table (and weights a module
        replaced by new tensors stay alive, with their variant, until it is dropped as least
        recently used: at most MAX_VARIANTS are kept)."""
        return _key(self._pick_varying(args)), tuple(map(id, self._pick_weights(args))), self._values(args)

    def _values(self, args) -> tuple:
        return tuple(args[k].item() for k in self._numbers)

    @property
    def model(self):
        """The most recently used compiled model."""
        return self._last.model

    def __call__(self, *args: Any) -> Any:
        if self._padding is not None:
            return self._padded(args)
        return self._run(args)

    def _padded(self, args: tuple) -> Any:
        """The call at its sequence bucket (sequence_buckets.py): the tensors' axes of the symbol
        padded, the sizes that are the symbol set to the bucket, the outputs' grown axes cut."""
        from torch.utils._pytree import tree_flatten, tree_unflatten

        padding = self._padding
        assert padding is not None
        spec: list = []

        def run_tree(named: dict) -> list:
            call = list(args)
            for key, a in named.items():
                call[int(key)] = a
            grow = next((named[key].shape[axis] - args[int(key)].shape[axis]
                         for key, axis in padding.length_axes.items() if key in named), 0)
            padded = {padding.symbol, *padding.linked}
            for k, d in self._seq_sizes:         # the sizes that are the symbol or linked to it
                if d in padded:
                    call[k] = args[k] + grow
            leaves, tree = tree_flatten(self._run(tuple(call)))
            spec[:] = [tree]
            return leaves

        tensors = {str(k): a for k, a in enumerate(args) if hasattr(a, "shape")}
        leaves = run_padded(padding, tensors, run_tree, self.info)
        return tree_unflatten(leaves, spec[0])

    def _run(self, args: tuple) -> Any:
        last = self._last
        if (last.accepts(args) if self._generic else not last.stale(args)):
            return last(args)
        key = self._key(args)
        variant = self._variants.get(key)
        if variant is None or variant.stale(args):
            split = self._split(args) if self._batch is not None else None
            if split is not None:
                return self._run_split(args, *split)
            variant = self._compile(key, args)
        self._variants.move_to_end(key)
        self._last = variant
        return variant(args)

    def _variant(self, args) -> "_Variant":
        """The variant for `args`, compiled on a miss (or when its weights changed)."""
        key = self._key(args)
        variant = self._variants.get(key)
        if variant is None or variant.stale(args):
            variant = self._compile(key, args)
        self._variants.move_to_end(key)
        return variant

    def _compile(self, key: tuple, args) -> "_Variant":
        """A new variant for `args`, kept under `key` (the least recently used dropped beyond
        MAX_VARIANTS)."""
        began = time.perf_counter()
        variant = self._variants[key] = _Variant(self.gm, list(args), self._weights, self.target, self.threads,
                                                 self._params, self._staged, self._numbers)
        self.info["specializations"] += 1
        self.info["compile_seconds"] += time.perf_counter() - began
        if len(self._variants) > self.MAX_VARIANTS:
            self._variants.popitem(last=False)
        return variant

    def _split(self, args) -> tuple | None:
        """(rows, split, plan) when the call's batch is not a bucket and the graph keeps batch
        rows apart at every size the plan needs, else None.  The tensors whose leading dimension
        is the batch symbol are cut, and the sizes that are that symbol (dynamo passes a symbolic
        size as an int too) take the chunk's."""
        import torch
        rows = args[self._batch].shape[0]
        if not rows or rows in self._buckets:
            return None
        cut, sized = self._cut, self._sized
        general = (tuple(None if k in sized else (tuple(a.shape)[1:] if k in cut else tuple(a.shape), a.dtype)
                         if isinstance(a, torch.Tensor) else int(a)
                         for k, a in ((k, args[k]) for k in self._varying)),
                   tuple(map(id, self._pick_weights(args))), self._values(args))
        found = self._splits.get(general)
        if found is None:
            graph = self._graph(args)
            inputs = [k for k in self._varying if isinstance(args[k], torch.Tensor)]     # the graph's, in order
            found = "the graph does not trace, or updates an input in place" \
                if graph is None or len(graph.inputs) != len(inputs) else \
                buckets.judge_graph(graph, [inputs.index(k) for k in cut], rows)
            self._splits[general] = found
        if isinstance(found, str):
            return None

        def convert(size: int):
            return self._graph(_cut(args, cut, sized, 0, size))

        def compiled(size: int) -> bool:
            shapes = tuple(((size, *a.shape[1:]) if k in cut else tuple(a.shape), a.dtype)
                           if isinstance(a, torch.Tensor) else size if k in sized else int(a)
                           for k, a in ((k, args[k]) for k in self._varying))
            return (shapes, tuple(map(id, self._pick_weights(args))), self._values(args)) in self._variants

        plan = found.choose(rows, self._buckets, convert, compiled)
        return None if plan is None else (rows, found, plan)

    def _graph(self, args):
        """The graph traced for `args`; None where it does not trace, or updates an input in
        place (chunks of a batch are copies: the update would not reach the caller's tensor)."""
        try:
            graph, _, updates = traced_graph(self.gm, list(args), self._weights, self._numbers)
        except (NotImplementedError, UserError, GraphError, ValueError, RuntimeError):
            return None
        return None if updates else graph

    def _run_split(self, args, rows: int, split: buckets.BatchSplit, plan: buckets.Plan) -> Any:
        """The graph run once per chunk of the plan, on the variant for that chunk's bucket; the
        outputs concatenated along the batch axis (a padded chunk's extra rows dropped)."""
        torch = import_torch()
        from torch.utils._pytree import tree_flatten, tree_unflatten
        parts, spec, lo, seconds = [], None, 0, []
        for size, used in plan:
            sub = _cut(args, self._cut, self._sized, lo, lo + used, size)
            variant = self._variant(sub)
            outs, took = split.timed(rows, size, variant, sub)
            leaves, spec = tree_flatten(outs)
            seconds.append(took)
            parts.append([t[:used] if used < size else t for t in leaves])
            lo += used
        split.record(rows, plan, seconds)
        return tree_unflatten([torch.cat(list(outs), dim=0) if len(outs) > 1 else outs[0]
                               for outs in zip(*parts)], spec)


def _cut(args, cut: tuple, sized: tuple, lo: int, hi: int, size: int | None = None) -> tuple:
    """`args` with the tensors at `cut` cut to rows [lo, hi) and padded to `size` rows (copies
    of the last), and the sizes at `sized` set to that size."""
    size = size or hi - lo
    return tuple(buckets.padded(a[lo:hi], size) if k in cut else size if k in sized else a for k, a in enumerate(args))


def _batch_positions(gm: Any, varying: list[int]) -> tuple:
    """(a tensor input whose leading dimension is a symbol, every tensor input led by that
    symbol, every size input that is that symbol), from the placeholders' example values (the
    example inputs themselves have concrete sizes); (None, (), ()) when no input has one."""
    import torch
    values = _example_values(gm, varying)

    def symbol(x: Any) -> str | None:
        return str(x.node.expr) if isinstance(x, torch.SymInt) else None

    leads = {k: symbol(v.shape[0]) for k, v in values.items() if isinstance(v, torch.Tensor) and v.dim() >= 1}
    first = next((k for k, s in leads.items() if s is not None), None)
    if first is None:
        return None, (), ()
    batch = leads[first]
    return (first, tuple(k for k, s in leads.items() if s == batch),
            tuple(k for k, v in values.items() if symbol(v) == batch))


def _example_values(gm: Any, positions: list[int]) -> dict:
    """{input position: the example value (with symbolic sizes) of its placeholder}."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    return {k: placeholders[k].meta.get("example_value") for k in positions if k < len(placeholders)}


def _sequence_padding(gm: Any, varying: list[int], options: dict) -> tuple:
    """(SequencePadding for `options["sequence_buckets"]` over the tensor inputs' symbolic
    axes, the positions of the size inputs that are that symbol), or (None, ())."""
    import torch
    if not options.get("sequence_buckets", "auto"):
        return None, ()
    values = _example_values(gm, varying)

    def dim(d: Any) -> Any:
        if isinstance(d, torch.SymInt):
            expr = d.node.expr
            return int(expr) if getattr(expr, "is_number", False) else str(expr)
        return int(d)

    inputs = [(str(k), tuple(dim(d) for d in v.shape)) for k, v in values.items() if isinstance(v, torch.Tensor)]
    leads = [dims[0] for _, dims in inputs if dims and isinstance(dims[0], str)]
    padding = SequencePadding.make(gm.__class__.__name__, inputs, options.get("sequence_buckets", "auto"), None,
                                   leads[0] if leads else None, CompiledGraph.MAX_VARIANTS)
    if padding is None:
        return None, ()
    # ((position, symbol) of each size input: those of the symbols padded follow the padding;
    # with "auto" the symbol is chosen later)
    return padding, tuple((k, dim(v)) for k, v in values.items() if isinstance(v, torch.SymInt))


def _hint(x: Any) -> Any:
    """A size as the int it has in the example (a SymInt's hint); tensors as they are."""
    import torch
    if isinstance(x, torch.SymInt):
        return int(x.node.hint)
    return x


def _symbolic(x: Any) -> bool:
    """Whether an example input is a symbolic size or a tensor with a symbolic dimension."""
    import torch
    if isinstance(x, torch.SymInt):
        return True
    return isinstance(x, torch.Tensor) and not all(isinstance(d, int) for d in x.shape)


def _key(args) -> tuple:
    """What a compiled variant depends on: each tensor's shape and dtype, each size's value."""
    import torch
    return tuple((tuple(a.shape), a.dtype) if isinstance(a, torch.Tensor) else int(a) for a in args)


def _picker(positions: list[int]) -> Callable[[Any], tuple]:
    """A function that returns the arguments at `positions` as a tuple (one C call)."""
    if not positions:
        return lambda args: ()
    if len(positions) == 1:
        k = positions[0]
        return lambda args: (args[k],)
    return operator.itemgetter(*positions)


_VERSION = operator.attrgetter("_version")
_SHAPE = operator.attrgetter("shape")
_DTYPE = operator.attrgetter("dtype")


class _Variant:
    """The graph traced with concrete inputs and compiled; its weights are baked in as constants
    (so batch norms fold into convolutions and weights are laid out once), and each call checks
    that they are still the tensors it baked, at the versions it baked."""

    def __init__(self, gm: Any, inputs: list, weights: list[int], target: str, threads: int | None,
                 params: SharedParams, staged: bool = False, numbers: tuple = ()):
        torch = import_torch()
        from torch.utils._pytree import TreeSpec

        sizes = {k for k, x in enumerate(inputs) if not isinstance(x, torch.Tensor)}
        self.input_positions = [k for k in range(len(inputs)) if k not in weights and k not in sizes
                                and k not in numbers]
        if staged:           # sizes only the data gives: the stretches compile per shape when called
            from ..staged import StagedTorchModel
            program, self.out_spec, self.updates = staged_program(gm, inputs, weights, numbers)
            self.model = StagedTorchModel(program, {"target": target, "threads": threads})
            # run once now, so that a stretch that cannot compile leaves the graph to eager PyTorch
            self.model(*[_as_array(inputs[k]) for k in self.input_positions])
        else:
            graph, self.out_spec, self.updates = traced_graph(gm, inputs, weights, numbers)
            with sharing_params(params):       # the weights the variants derive alike, held once
                self.model = compile_graph(graph, target=target, threads=threads)
        # weights dynamo passes as arguments are checked by identity and version; weights the
        # graph holds as attributes (dynamo's install_free_tensors) by version
        self._numbers = [(k, inputs[k].item()) for k in numbers]
        self._pick_weights = _picker(weights)
        self._pick_inputs = _picker(self.input_positions)
        self._baked = self._pick_weights(inputs)
        self._held = tuple(_attribute(gm, n.target) for n in gm.graph.nodes
                           if n.op == "get_attr" and isinstance(_attribute(gm, n.target), torch.Tensor))
        try:
            self._versions = list(map(_VERSION, self._baked + self._held))
        except RuntimeError:
            raise NotImplementedError("the module's weights are inference tensors (made under "
                                      "torch.inference_mode), whose in-place updates cannot be tracked") from None
        self._shapes = list(map(_SHAPE, self._pick_inputs(inputs)))
        self._dtypes = list(map(_DTYPE, self._pick_inputs(inputs)))
        self._sizes = [(k, int(inputs[k])) for k in sorted(sizes)]
        # a tuple (or list) of tensors, as dynamo's graphs return, is rebuilt without pytree
        self._flat_out = (isinstance(self.out_spec, TreeSpec) and self.out_spec.type in (tuple, list)
                          and all(c.is_leaf() for c in self.out_spec.children()))
        self._from_numpy = torch.from_numpy

    def stale(self, args) -> bool:
        """Whether a baked-in weight was replaced or updated in place since the compile."""
        weights = self._pick_weights(args)
        return (not all(map(operator.is_, weights, self._baked))
                or list(map(_VERSION, weights + self._held)) != self._versions)

    def accepts(self, args) -> bool:
        """Whether this variant can run `args`: the same input shapes, dtypes and sizes, and
        weights that are still current."""
        inputs = self._pick_inputs(args)
        return (list(map(_SHAPE, inputs)) == self._shapes and list(map(_DTYPE, inputs)) == self._dtypes
                and all(args[k] == v for k, v in self._sizes) and all(args[k].item() == v for k, v in self._numbers)
                and not self.stale(args))

    def __call__(self, args) -> Any:
        outs = self.model(*map(_as_array, self._pick_inputs(args)))
        if self.updates:          # the new values of the inputs the graph updates in place
            torch = import_torch()
            kept = len(outs) - len(self.updates)
            with torch.no_grad():
                for k, value in zip(self.updates, outs[kept:]):
                    args[k].copy_(self._from_numpy(value))
            outs = outs[:kept]
        tensors = list(map(self._from_numpy, outs))
        if self._flat_out:
            return self.out_spec.type(tensors)
        from torch.utils._pytree import tree_unflatten
        return tree_unflatten(tensors, self.out_spec)


def traced_graph(gm: Any, inputs: list, weights: list[int], numbers: tuple = ()) -> tuple:
    """(tensorforge Graph, output pytree spec, positions of the inputs it updates) of `gm` traced
    with the concrete `inputs`: the weights at positions `weights` and the sizes become
    constants, the other tensors inputs; the graph's outputs are the user's, then the new values
    of the updated inputs (`input_updates`)."""
    torch = import_torch()
    from .torch_convert import convert_graph
    # traced on copies, since tracing runs the graph and must not update the module's buffers
    with torch.no_grad():
        copies = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    traced, updates, bindings = _trace(gm, inputs, weights, numbers, copies)
    del copies
    # tensors the graph holds become constants; torch.cond's branches (graph modules) are
    # converted where the cond is (torch_convert.py)
    attributes = {n.target: to_numpy(value) for n in traced.graph.nodes if n.op == "get_attr"
                  for value in [_attribute(traced, n.target)] if isinstance(value, torch.Tensor)}
    spec = _outputs_with_updates(traced.graph, updates)
    return convert_graph(traced.graph, bindings, "torch_compile", attributes=attributes), spec, [k for k, _ in updates]


def staged_program(gm: Any, inputs: list, weights: list[int], numbers: tuple = ()) -> tuple:
    """(StagedTorchProgram, output pytree spec, positions of the inputs it updates) of a graph
    with sizes only the data gives (`x[mask]`, `torch.nonzero`): traced as `traced_graph` does, but on fake tensors of the
    inputs' concrete shapes with a shape environment, so that each such size is an unbacked
    symbol that torch_staged.py cuts the program at.  Weights (passed as arguments or held by the
    graph) and the sizes dynamo passes become constants."""
    torch = import_torch()
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv, free_unbacked_symbols

    from .torch_convert import torch_dtype
    from .torch_staged import ProgramShell, StagedTorchProgram
    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)     # the graph's held weights stay real
    fakes = [mode.from_tensor(x, static_shapes=True) if isinstance(x, torch.Tensor) else x for x in inputs]
    traced, updates, bindings = _trace(gm, inputs, weights, numbers, fakes, mode)
    graph = traced.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    # the tensors the graph holds (dynamo's installed weights, constants made in forward) become
    # placeholders bound to their values, as torch.export lifts them
    for n in [n for n in graph.nodes if n.op == "get_attr"]:
        value = _attribute(traced, n.target)
        if isinstance(value, torch.fx.GraphModule):
            continue                        # a branch of torch.cond, converted where the cond is
        if not isinstance(value, torch.Tensor):
            raise NotImplementedError(f"the graph holds {n.target}, which is not a tensor")
        with graph.inserting_before(placeholders[0] if placeholders else next(iter(graph.nodes))):
            lifted = graph.placeholder(f"lifted_{n.name}")
        lifted.meta = dict(n.meta)
        n.replace_all_uses_with(lifted)
        graph.erase_node(n)
        bindings[lifted.name] = ("const", to_numpy(value))
    spec = _outputs_with_updates(graph, updates)
    specs = [(n.name, tuple(int(d) for d in n.meta["val"].shape), torch_dtype(n.meta["val"].dtype))
             for n in placeholders if bindings[n.name][0] == "input"]
    unbacked = set().union(*(free_unbacked_symbols(n.meta.get("val")) for n in graph.nodes
                             if isinstance(n.meta.get("val"), torch.Tensor)))
    ranges = {sym: shape_env.var_to_range[sym] for sym in unbacked if sym in shape_env.var_to_range}
    return (StagedTorchProgram(ProgramShell(graph, ranges), bindings, "torch_compile", specs), spec,
            [k for k, _ in updates])


def _trace(gm: Any, inputs: list, weights: list[int], numbers: tuple, args: list, mode: Any = None) -> tuple:
    """(traced graph module, input updates, convert_graph's bindings): `gm` with the weights' and
    numbers' `.item()`s folded, functionalized (in-place ops, nn.ReLU(inplace=True), become
    their pure forms) and traced to core ATen on `args` (under the fake tensor `mode`, if one);
    the updates of inputs taken out (`input_updates`), flattened linear layers and masked
    updates rewritten as from_torch rewrites them."""
    import contextlib

    import torch
    from torch.func import functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    from .torch_decomp import decompositions
    from .torch_linear import fold_flattened_linears
    from .torch_masked import fold_masked_updates
    constants = [*weights, *numbers]
    gm = _fold_weight_items(gm, inputs, constants)
    with torch.no_grad(), (mode if mode is not None else contextlib.nullcontext()):
        traced = _traced(make_fx(functionalize(gm, remove="mutations_and_views"),
                                 decomposition_table=decompositions()), args)
    updates = input_updates(traced.graph, weights)
    fold_flattened_linears(traced.graph)
    fold_masked_updates(traced.graph)
    return traced, updates, _bindings(traced.graph, inputs, constants)


def _number_inputs(gm: Any, inputs: list, weights: list[int]) -> tuple:
    """Positions of the 0-d tensor inputs (not weights) that the graph only reads with
    `.item()`: numbers dynamo passes as tensors (a module's float attributes under
    dynamic=True), each variant specialized on their values."""
    import torch
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    # an object's attribute (L['self']._modules['1'].eps), not a value the code computed (a sum
    # handed over at a graph break would compile a variant per value)
    return tuple(k for k, (n, x) in enumerate(zip(placeholders, inputs))
                 if k not in weights and isinstance(x, torch.Tensor) and x.dim() == 0 and n.users
                 and all(u.op == "call_method" and u.target == "item" for u in n.users)
                 and re.match(r"[LG]\['[^']*'\]\.", _source(n)) is not None)


def _fold_weight_items(gm: Any, inputs: list, constants: list[int]) -> Any:
    """`gm` with each `.item()` of a constant input (a weight, or a number dynamo passes as a
    tensor: read as a number in a graph it made shape-generic) replaced by the number: they are
    compiled in as constants, and a variant whose weights or numbers change recompiles.  A new graph module over the same
    attributes; `gm` itself is left as dynamo gave it (its other variants may bake other weights)."""
    import copy

    import torch
    from torch.fx import GraphModule, map_arg
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    weight_nodes = {placeholders[k]: inputs[k] for k in constants if k < len(placeholders)}
    items = [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "item" and len(n.args) == 1
             and (n.args[0] in weight_nodes or n.args[0].op == "get_attr")]
    if not items:
        return gm
    graph = copy.deepcopy(gm.graph)
    by_name = {n.name: n for n in graph.nodes}
    for old in items:
        source = old.args[0]
        value = weight_nodes[source] if source in weight_nodes else _attribute(gm, source.target)
        if not isinstance(value, torch.Tensor):
            continue
        number = value.item()
        node = by_name[old.name]
        for user in list(node.users):
            user.args = map_arg(user.args, lambda a, node=node, number=number: number if a is node else a)
            user.kwargs = map_arg(user.kwargs, lambda a, node=node, number=number: number if a is node else a)
        graph.erase_node(node)
    return GraphModule(gm, graph)


def _traced(trace: Callable, args: list) -> Any:
    """`trace(*args)`, its failure (a value read out of a traced tensor: `.item()` of a weight in a
    graph dynamo made shape-generic) a NotImplementedError, which leaves the graph to eager
    PyTorch with the one-line warning instead of failing the user's call."""
    try:
        return trace(*args)
    except RuntimeError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise NotImplementedError(f"the graph does not trace to ATen operators: {first}") from err


def _bindings(graph: Any, inputs: list, weights: list[int]) -> dict:
    """convert_graph's bindings of the traced graph's placeholders: the weights and the sizes
    dynamo passes as constants, the other tensors as inputs."""
    import torch
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    return {n.name: ("const", to_numpy(inputs[k])) if k in weights else
            ("input", None) if isinstance(inputs[k], torch.Tensor) else ("const", np.asarray(int(inputs[k])))
            for k, n in enumerate(placeholders)}


def _data_dependent(gm: Any) -> bool:
    """Whether dynamo's graph has a value with a size only the data gives (an unbacked symbol
    in the shape of a node's example value: `x[mask]` under capture_dynamic_output_shape_ops)."""
    import torch
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols
    for n in gm.graph.nodes:
        value = n.meta.get("example_value")
        if isinstance(value, torch.Tensor) and free_unbacked_symbols(value):
            return True
    return False


def input_updates(graph: Any, weights: list[int]) -> list[tuple[int, Any]]:
    """(input position, node of its new value) for each input the functionalized graph writes
    back into (`copy_` into a placeholder: `cache[:, pos] = k`, an in-place op on a tensor an
    earlier graph break handed over), the copies removed from the graph; the compiled graph
    returns the new values and the call copies them into the inputs.  A weight updated in place
    (a buffer of a module in training mode, a counter) raises NotImplementedError: weights are
    compiled in as constants."""
    import torch
    position = {n: k for k, n in enumerate(n for n in graph.nodes if n.op == "placeholder")}
    updates: dict[int, Any] = {}
    for n in list(graph.nodes):
        if n.op == "call_function" and n.target is torch.ops.aten.copy_.default and n.args[0] in position:
            k = position[n.args[0]]
            if k in weights:
                raise NotImplementedError(f"the graph updates its input {n.args[0].name} in place (a buffer of a "
                                          "module in training mode?), which a compiled graph would not do")
            updates[k] = n.args[1]          # a later copy into the same input wins
            n.replace_all_uses_with(n.args[1])
            graph.erase_node(n)
    return list(updates.items())


def _outputs_with_updates(graph: Any, updates: list[tuple[int, Any]]) -> Any:
    """The pytree spec of the graph's outputs; the new values of the updated inputs are appended
    to its flat outputs (after the user's)."""
    from torch.utils._pytree import tree_flatten
    out_node = next(n for n in graph.nodes if n.op == "output")
    leaves, spec = tree_flatten(out_node.args[0])
    if any(not hasattr(leaf, "op") for leaf in leaves):
        raise NotImplementedError("the graph returns values that are not tensors")
    if updates:
        out_node.args = (tuple(leaves) + tuple(value for _, value in updates),)
    return spec


def _as_array(t: Any) -> np.ndarray:
    """A contiguous CPU tensor's memory as a NumPy array (no copy); other tensors are copied."""
    try:
        return np.ascontiguousarray(t.numpy())
    except (RuntimeError, TypeError):       # requires grad, not on the CPU, a conjugate view
        return np.ascontiguousarray(t.detach().cpu().resolve_conj().resolve_neg().numpy())


def _attribute(module: Any, target: str) -> Any:
    """The object at a dotted attribute path of a module (a get_attr node's target)."""
    return operator.attrgetter(target)(module)


def _source(node: Any) -> str:
    """Where dynamo took a placeholder's value from (`L['self']._modules['0'].eps`), or ""."""
    arg = node.meta.get("grapharg")
    source = getattr(getattr(arg, "source", None), "name", "")
    return source() if callable(source) else str(source or "")


def _weight_positions(gm: Any, inputs: list) -> set[int]:
    """Positions of the inputs that are the module's parameters or buffers: dynamo passes them
    as graph inputs (its source names them), or they are nn.Parameter objects."""
    import torch
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found = set()
    for k, (node, value) in enumerate(zip(placeholders, inputs)):
        source = _source(node)
        if isinstance(value, torch.nn.Parameter) or "._parameters[" in source or "._buffers[" in source:
            found.add(k)
    return found
