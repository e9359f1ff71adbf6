"""Lesson 4: writing an operator.

Everything about an operator lives in one `@op` record (ops/registry.py):

  infer      the output type(s) from the input types and attributes (shape and dtype inference);
  compute    the tensor expression: what each output element is (lesson 1);
  reference  the same computation in NumPy: the oracle every test checks the compiled op against;
  pattern    its kind for fusion: injective (elementwise, broadcast, reshape ...), reduction,
             complex-out-fusable (conv, dense: elementwise ops fuse onto their output) or opaque;
  schedule   the name of its schedule template per target kind (optional: by default the
             template of its pattern kind, e.g. "injective.cpu"; lesson 5 writes one).

The op here is a scaled softsign, y = scale * x / (1 + |x|), with one attribute.  The lesson
registers it, checks its compiled kernel against the reference with `check_op` (the helper the
op tests use; outputs start as NaN, so an element the kernel skips fails), and then uses it in
a graph, where it fuses into the dense layer before it: one kernel instead of two.

To import it from ONNX as well, one converter maps the ONNX op type to it, e.g.
    @tensorforge.frontend.onnx.converter("ScaledSoftsign")
    def convert(ctx, inputs, attrs): return ctx.add1("tutorial.scaled_softsign", inputs, attrs)

Run it:  python docs/tutorials/04_writing_an_op.py
"""
import numpy as np

import tensorforge
from tensorforge import te
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.fuse import fuse
from tensorforge.graph.pipeline import optimize
from tensorforge.ops.registry import INJECTIVE, TensorType, op
from tensorforge.ops.testing import check_op


@op("tutorial.scaled_softsign", pattern=INJECTIVE, attr_defaults={"scale": 1.0})
class scaled_softsign:
    """y = scale * x / (1 + |x|), elementwise."""

    def infer(x: TensorType, scale: float) -> TensorType:
        if not x.dtype.startswith("float"):
            raise TypeError(f"tutorial.scaled_softsign takes floating-point input, got {x.dtype}")
        return TensorType(x.shape, x.dtype)

    def compute(x: te.Tensor, scale: float) -> te.Tensor:
        one, s = te.const(1.0, x.dtype), te.const(scale, x.dtype)
        return te.compute(x.shape, lambda *i: s * x[i] / (one + te.abs(x[i])), name="scaled_softsign")

    def reference(x: np.ndarray, scale: float) -> np.ndarray:
        return (scale * x / (1 + np.abs(x))).astype(x.dtype)


rng = np.random.default_rng(0)

# 1. The op on its own: built with a plain schedule, run on the C backend (and here also on the
#    reference interpreter), compared with the NumPy reference.
x = rng.standard_normal((3, 5, 7)).astype("float32") * 4
(y,) = check_op("tutorial.scaled_softsign", [x], {"scale": 2.5}, interpreter=True)
print("check_op: kernel == interpreter == reference; y[0, 0, :3] =", y[0, 0, :3])

# 2. In a graph: dense -> add (bias) -> scaled_softsign.  The graph builder infers each node's
#    type with the op's `infer`; a bad input is refused there, with the op's message.
b = GraphBuilder("tiny")
inp = b.input("x", (4, 16), "float32")
w = b.const(rng.standard_normal((8, 16)).astype("float32"), "w")
bias = b.const(rng.standard_normal(8).astype("float32"), "bias")
h = b.add1("add", [b.add1("dense", [inp, w]), bias])
out = b.add1("tutorial.scaled_softsign", [h], {"scale": 0.5})
graph = b.finish([out])
print(graph)

# Fusion: the softsign is injective, so it joins the dense layer's kernel as its epilogue.
groups = fuse(optimize(graph, "c"))
print(f"{len(graph.nodes)} nodes -> {len(groups)} kernel:", groups)
assert len(groups) == 1 and groups[0].nodes[-1].op == "tutorial.scaled_softsign"

model = tensorforge.compile(graph)
xv = rng.standard_normal((4, 16)).astype("float32")
(got,) = model(xv)
pre = xv @ graph.params[w].T + graph.params[bias]
np.testing.assert_allclose(got, 0.5 * pre / (1 + np.abs(pre)), rtol=1e-5, atol=1e-6)
print("compiled model with the new op: matches NumPy")
