"""Lesson 7: a model with symbolic dimensions, compiled once and called with many shapes.

A model exported with `dynamic_axes` has inputs like `input_ids: [batch, seq]`.  `from_onnx`
then returns an `OnnxProgram`, and `tensorforge.compile` a staged model: each new shape compiles
its own specialization on its first call (a second or so for a small transformer) and runs as
fast as a model compiled for it from then on.  Two policies keep the compiles few:

- batch buckets (on by default): batch 3 runs as 2 + 1 on the specializations for batch 2 and
  1, wherever the model keeps batch rows apart (judged from each op's tensor expression);
- sequence buckets (`sequence_buckets=`): length 5 runs padded to the bucket 8, its outputs cut
  back, for a model whose first n positions do not read the ones after them (an attention mask
  marks the padding).  The first padded call also runs the exact length and compares, so a
  model for which padding is wrong is found out and compiled per length, with a warning.
  Where padding at the end is wrong, the check tries the start: a decoder step with a
  key/value cache takes its padding there (the mask's 0 hides it, and it is cut from the
  front of the cache the step returns).  Name the mask's symbol with the past's, as in
  `sequence_buckets={("past", "total"): range(16, 1025, 16)}`, and a generation loop
  compiles once per bucket, not once per token (`benchmarks/sequence_buckets.py --model
  gpt2-kv`).  With no `sequence_buckets=` a model starts buckets of its own once a length has
  taken 8 values (`sequence_buckets=None` turns that off).

A stretch made only of element-wise ops and reductions needs neither: after its second shape it
is compiled once with shape variables and serves every size (`model.info["shape_generic"]`;
the rows NonZero or Compress keep change with each call).  The layer below has products in its
one stretch, so it is specialized per shape.

This lesson builds one self-attention layer with `onnx.helper`, calls it with several batch
sizes and lengths, reads `model.info` to see what ran where, and checks every result against
the ONNX reference evaluator.

Run it:  python docs/tutorials/07_symbolic_shapes.py       (needs onnx)
"""
import warnings

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import tensorforge
from tensorforge.frontend import from_onnx

WIDTH = 16
rng = np.random.default_rng(0)


def attention_layer(pool: bool = False):
    """x[batch, seq, 16] and mask[batch, seq] -> y[batch, seq, 16]: scores q.k^T, -1e9 where the
    mask is 0, softmax over the keys, times v, plus x.  With `pool`, y is averaged over seq."""
    inits = [numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) / 4).astype("float32"), n)
             for n in ("wq", "wk", "wv")]
    inits += [numpy_helper.from_array(np.array(v, dtype), n) for n, v, dtype in
              (("one", 1.0, "float32"), ("minus", -1e9, "float32"), ("axis1", [1], "int64"))]
    nodes = [helper.make_node("MatMul", ["x", w], [w[1]]) for w in ("wq", "wk", "wv")]
    nodes += [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
              helper.make_node("MatMul", ["q", "kt"], ["scores"]),
              helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
              helper.make_node("Sub", ["one", "maskf"], ["off"]),
              helper.make_node("Mul", ["off", "minus"], ["bias"]),
              helper.make_node("Unsqueeze", ["bias", "axis1"], ["bias3"]),
              helper.make_node("Add", ["scores", "bias3"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["p"], axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["ctx"]),
              helper.make_node("Add", ["ctx", "x"], ["h" if pool else "y"])]
    out = ["batch", "seq", WIDTH]
    if pool:
        nodes.append(helper.make_node("ReduceMean", ["h", "axis1"], ["y"], keepdims=0))
        out = ["batch", WIDTH]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", WIDTH]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def feeds(batch: int, seq: int) -> dict:
    mask = np.ones((batch, seq), np.int64)
    mask[0, seq // 2:] = 0               # the first sentence came padded already
    return {"x": rng.standard_normal((batch, seq, WIDTH)).astype("float32"), "mask": mask}


def check(model, reference, batch: int, seq: int) -> None:
    named = feeds(batch, seq)
    got, want = model.run(**named)[0], reference.run(None, named)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


onnx_model = attention_layer()
reference = ReferenceEvaluator(onnx_model)
program = from_onnx(onnx_model)
print(program)                            # why it is not one static graph: the symbols
model = tensorforge.compile(program, sequence_buckets={"seq": (8, 16)})

# Batch buckets: batch 2 compiles; batch 3 is not a bucket, so it runs on buckets' specializations
# (as chunks, 2 + 1, or padded to 4: the first call compiles at most one); batch 2 again: nothing.
for batch in (2, 3, 2):
    before = model.info["specializations"]
    check(model, reference, batch, 8)
    print(f"batch {batch}, seq 8: compiled {model.info['specializations'] - before}")
print("batch 3 ran as", model.info["batch_split"]["runs_as"].get(3))

# Sequence buckets: 5 runs at 8 (and, this first time, at 5 too, to check the padding);
# 7 and 3 run at 8 with no compile; 11 compiles the bucket 16; 20 is above the largest bucket.
for seq in (5, 7, 3, 11, 20):
    before = model.info["specializations"]
    check(model, reference, 1, seq)
    print(f"batch 1, seq {seq}: compiled {model.info['specializations'] - before}")
info = model.info["sequence_buckets"]
print(f"padding {info['status']}; lengths ran at {info['runs_as']}")
assert info["status"] == "verified" and info["runs_as"][7] == 8
print("every batch size and length: matches the ONNX reference")

# A model that averages over the length reads the padding: found out on the first padded call.
pooled = attention_layer(pool=True)
model = tensorforge.compile(from_onnx(pooled), sequence_buckets={"seq": (8, 16)})
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    check(model, ReferenceEvaluator(pooled), 1, 5)
print("warning:", caught[0].message if caught else "none")
assert model.info["sequence_buckets"]["status"] == "refused"
check(model, ReferenceEvaluator(pooled), 1, 6)
print("the pooled model: padding refused, compiled per length, matches the ONNX reference")
