"""Lesson 1: tensor expressions and schedules.

tensorforge separates *what* is computed from *how*.  A tensor expression says what each output
element is, as a function of its indices; a schedule says in which order, in which loops, with
which vectors and threads those elements are computed.  Changing the schedule never changes the
values, only the speed: that is what lets a compiler (or a tuner) try many schedules safely.

This lesson:
  1. declares a matrix product with `te.placeholder`, `te.reduce_axis` and `te.compute`;
  2. lowers it with the default schedule (one loop per axis) and prints the loop program;
  3. tiles, reorders, vectorizes and parallelizes it, and prints the loop program again;
  4. builds both to C, runs them on NumPy arrays and checks them against `a @ b`;
  5. adds a second stage (a bias and a ReLU) and shows `compute_inline` and `compute_at`.

Run it:  python docs/tutorials/01_tensor_expressions.py   (TUTORIAL_SIZE=64 for a smaller run)
"""
import os

import numpy as np

import tensorforge
from tensorforge import te

N = int(os.environ.get("TUTORIAL_SIZE", "256"))

# 1. The algorithm.  A placeholder is an input; te.compute gives the shape of the result and a
#    function from output indices to the value.  A reduction sums over a reduce axis.
A = te.placeholder((N, N), name="A")                       # float32 unless dtype= says otherwise
B = te.placeholder((N, N), name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

# 2. The default schedule computes C in the order its axes were declared: i, j, then k.
s = te.create_schedule(C.op)
print("--- the default loop program ---")
print(tensorforge.lower(s, [A, B, C]))

# 3. A better schedule: 32 x 32 tiles of C, the reduction split by 4, the innermost loop over j
#    (contiguous in B and C) vectorized, and the outer tile loop spread over the cores.
fast = te.create_schedule(C.op)
i, j = fast[C].op.axis
io, jo, ii, ji = fast[C].tile(i, j, 32, 32)
ko, ki = fast[C].split(k, factor=4)
fast[C].reorder(io, jo, ko, ki, ii, ji)
fast[C].vectorize(ji)
fast[C].parallel(io)
print("--- the tiled loop program ---")
print(tensorforge.lower(fast, [A, B, C]))

# 4. Build both to C code and run them.  Outputs are passed in and written in place.
rng = np.random.default_rng(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
expected = a @ b
for name, sched in (("default", s), ("tiled", fast)):
    f = tensorforge.build(sched, [A, B, C], target="c")
    c = np.full((N, N), np.nan, "float32")                 # NaN: an element left unwritten shows
    f(a, b, c)
    np.testing.assert_allclose(c, expected, rtol=1e-4, atol=1e-3)
    print(f"{name} schedule: matches NumPy")
print("--- the start of the generated C function ---")
lines = f.source.splitlines()
start = next(n for n, line in enumerate(lines) if line.startswith("int32_t main"))
print("\n".join(lines[start:start + 12]))

# 5. Two stages: D = relu(C + bias).  By default every stage gets its own loop nest and its own
#    buffer.  compute_inline substitutes an elementwise stage into its reader (no buffer at all);
#    compute_at computes a producer inside a loop of its consumer, so only the part the consumer
#    needs in that iteration is computed there (here: one row of C per row of D).
bias = te.placeholder((N,), name="bias")
Cb = te.compute((N, N), lambda i, j: C[i, j] + bias[j], name="Cb")
D = te.compute((N, N), lambda i, j: te.max(Cb[i, j], te.const(0.0, "float32")), name="D")
s2 = te.create_schedule(D.op)
s2[Cb].compute_inline()
s2[C].compute_at(s2[D], s2[D].op.axis[0])
print("--- C computed one row at a time, inside D's row loop ---")
print(tensorforge.lower(s2, [A, B, bias, D]))
f2 = tensorforge.build(s2, [A, B, bias, D], target="c")
bias_np = rng.standard_normal(N).astype("float32")
d = np.full((N, N), np.nan, "float32")
f2(a, b, bias_np, d)
np.testing.assert_allclose(d, np.maximum(expected + bias_np, 0), rtol=1e-4, atol=1e-3)
print("two-stage schedule: matches NumPy")
