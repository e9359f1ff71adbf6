"""float16 and bfloat16 graphs round every node's result to the node's type, also inside one fused
kernel: a chain of elementwise nodes (with casts to float32 and back in it), compiled to C as a
user compiles it, against the ONNX reference evaluator over random inputs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402
from onnx_compiled_helpers import compile_and_run  # noqa: E402
from onnx_function_helpers import assert_close, onnx_reference  # noqa: E402

from tensorforge.frontend import from_onnx  # noqa: E402
from tensorforge.graph.fuse import fuse  # noqa: E402

SHAPE = (3, 37)


def chain_model(dtype: str):
    """y = (tanh(exp(x * w + x) / w) - float(x)), with one float32 step between two casts."""
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes = [helper.make_node("Mul", ["x", "w"], ["a"]), helper.make_node("Add", ["a", "x"], ["b"]),
             helper.make_node("Exp", ["b"], ["c"]), helper.make_node("Div", ["c", "w"], ["d"]),
             helper.make_node("Tanh", ["d"], ["e"]),
             helper.make_node("Cast", ["e"], ["e32"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["e32", "e32"], ["f32"]),
             helper.make_node("Cast", ["f32"], ["f"], to=elem),
             helper.make_node("Sub", ["f", "x"], ["y"])]
    io = [helper.make_tensor_value_info(n, elem, SHAPE) for n in ("x", "w")]
    graph = helper.make_graph(nodes, "chain", io, [helper.make_tensor_value_info("y", elem, SHAPE)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])


def _array(dtype: str):
    if dtype == "bfloat16":
        return pytest.importorskip("ml_dtypes").bfloat16
    return np.dtype(dtype)


def test_the_chain_is_one_kernel():
    groups = fuse(from_onnx(chain_model("float16")))
    assert len(groups) == 1 and len(groups[0].nodes) == 9


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dtype=st.sampled_from(["float16", "bfloat16"]), seed=st.integers(0, 2 ** 16))
def test_fused_16bit_chain_rounds_at_every_node(dtype, seed):
    rng = np.random.default_rng(seed)
    feeds = {"x": rng.uniform(-1.5, 1.5, SHAPE).astype(_array(dtype)),
             "w": rng.uniform(0.5, 2.0, SHAPE).astype(_array(dtype))}
    model = chain_model(dtype)
    assert_close(compile_and_run(model, feeds)[0], onnx_reference(model, feeds)[0], rtol=1e-3, what="chain")
