"""Lesson 3: a whole model, from ONNX to a compiled, checked, saved model.

The graph level runs the spine of the compiler end to end:

  ONNX model -> frontend (a tensorforge Graph of typed nodes, weights as constants)
             -> graph passes (constant folding, batch-norm folding, layout changes: graph/pipeline.py)
             -> fusion (conv + bias + relu become one kernel: graph/fuse.py)
             -> one schedule per fused group, lowered and compiled into one C library
             -> a Model that runs the kernels over a static memory plan.

This lesson builds a small CNN with `onnx.helper` (so no file is needed), imports it with
`tensorforge.frontend.from_onnx`, prints the graph, counts the fused kernels, compiles it with
`tensorforge.compile`, checks the result against ONNX Runtime, times the kernels with
`profile()`, and saves and reloads the model as one file.

Run it:  python docs/tutorials/03_whole_model.py       (needs onnx; onnxruntime for the check)
"""
import os
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import tensorforge
from tensorforge.graph.fuse import fuse
from tensorforge.graph.pipeline import optimize

SIZE = int(os.environ.get("TUTORIAL_SIZE", "16"))        # image height and width
rng = np.random.default_rng(0)


def weight(name, *shape):
    return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype("float32"), name)


# A model as a framework would export it: conv -> batch norm -> relu -> max pool -> conv -> relu
# -> global average pool -> flatten -> dense (Gemm) -> softmax.
nodes = [
    helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("BatchNormalization", ["c1", "g1", "be1", "m1", "v1"], ["n1"], epsilon=1e-5),
    helper.make_node("Relu", ["n1"], ["r1"]),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
    helper.make_node("Relu", ["c2"], ["r2"]),
    helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
    helper.make_node("Flatten", ["g"], ["f"]),
    helper.make_node("Gemm", ["f", "w3", "b3"], ["logits"], transB=1),
    helper.make_node("Softmax", ["logits"], ["y"], axis=1),
]
inits = [weight("w1", 16, 3, 3, 3), weight("b1", 16), weight("g1", 16), weight("be1", 16), weight("m1", 16),
         numpy_helper.from_array(np.abs(rng.standard_normal(16)).astype("float32") + 0.5, "v1"),
         weight("w2", 32, 16, 3, 3), weight("b2", 32), weight("w3", 10, 32), weight("b3", 10)]
graph_proto = helper.make_graph(
    nodes, "tiny_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, SIZE, SIZE])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
model_proto = helper.make_model(graph_proto, opset_imports=[helper.make_opsetid("", 17)])
onnx.checker.check_model(model_proto)

# Import: one node per ONNX operator, the weights as constants ($ in the printout).
graph = tensorforge.frontend.from_onnx(model_proto)          # a path to a .onnx file works too
print("--- the imported graph ---")
print(graph)

# What compile does first: the graph passes, then fusion.  The batch norm disappears into the
# first conv's weights; each conv takes its bias and relu (and more) into one kernel.
optimized = optimize(graph, "c")
print("--- after the graph passes ---")
print(optimized)
groups = fuse(optimized)
print(f"{len(graph.nodes)} ONNX-level nodes -> {len(optimized.nodes)} optimized nodes -> {len(groups)} kernels")

# Compile and run.  A Model is called with the inputs and returns the list of outputs.
model = tensorforge.compile(graph, target="c")
x = rng.standard_normal((1, 3, SIZE, SIZE)).astype("float32")
(y,) = model(x)
print("output:", np.round(y, 4))

# Check against ONNX Runtime, the reference the test suite uses for whole models.
try:
    import onnxruntime as ort
except ImportError:
    print("onnxruntime is not installed: the comparison is skipped")
else:
    session = ort.InferenceSession(model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
    print("matches ONNX Runtime")

# Where the time goes: each kernel timed on its own (slowest first).
for label, seconds in model.profile(x, repeat=3)[:3]:
    print(f"  {seconds * 1e6:9.1f} us  {label}")

# One file holds the kernels, the graph and the weights; loading it needs only the runtime.
with tempfile.TemporaryDirectory() as tmp:
    path = model.export(os.path.join(tmp, "tiny_cnn.tfm"))
    again = tensorforge.load(path)
    np.testing.assert_array_equal(again(x)[0], y)
    print(f"exported to {os.path.basename(path)} and reloaded: same output")
