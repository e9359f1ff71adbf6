"""Lesson 2: the loop program.

`tensorforge.lower(schedule, args)` turns a schedule into a loop program: a `PrimFunc` of
buffers, loops, stores and conditions (tir/nodes.py).  It happens in two steps, and each step's
result is an immutable value you can print, compare and run:

  1. bound inference and loop generation (tir/build.py): for every stage, the region its
     consumers need fixes the ranges of its loops; one loop per leaf axis is emitted, and a
     split that does not divide the extent gets a guard;
  2. the loop-IR passes, in the order listed in tir/pipeline.py (simplify, partition_loops,
     flatten_storage, unswitch_selects, vectorize_loops, unroll_loops, ...).  Setting TENSORFORGE_DEBUG=passes
     prints the program after each of them; here we run them one by one ourselves.

Then the loop program is run two ways: by the reference interpreter (tir/interp.py, NumPy, no
C compiler needed) and as C code.  Both must agree with NumPy.

Run it:  python docs/tutorials/02_loop_program.py
"""
import numpy as np

import tensorforge
from tensorforge import te
from tensorforge.tir import interp
from tensorforge.tir.build import schedule_to_primfunc
from tensorforge.tir.pipeline import pass_list

N = 100                                                  # not a multiple of 8: the split has a tail

# y = 2 * x + 1 over N elements, split by 8 with the inner loop vectorized.
X = te.placeholder((N,), name="X")
Y = te.compute((N,), lambda i: X[i] * 2.0 + 1.0, name="Y")
s = te.create_schedule(Y.op)
outer, inner = s[Y].split(Y.op.axis[0], factor=8)
s[Y].vectorize(inner)

# Step 1: loop generation.  ceil(N / 8) outer iterations of 8; the guard keeps the last one
# inside the N elements.
func = schedule_to_primfunc(s, [X, Y])
print("--- after loop generation ---")
print(func)

# Step 2: the passes, one at a time (those that change nothing print nothing).  partition_loops
# peels the last outer iteration so that the others need no guard, and inside it splits the
# inner loop where the guard is provably true; simplify drops the part that never runs;
# vectorize_loops turns each guard-free vectorized loop into one vector statement
# (ramp(base, 1, 8) stands for the 8 consecutive indices base .. base + 7).  `pass_list()` is
# the list of tir/pipeline.py; a target's backend may add passes of its own at named phases
# (`pass_list(extra)`: a GPU backend inserts barriers there, the C backend adds none).
for name, run_pass in pass_list():
    before = func
    func = run_pass(func)
    if str(func) != str(before):
        print(f"--- after {name} ---")
        print(func)

# The same result in one call:
assert str(func) == str(tensorforge.lower(s, [X, Y]))

# Running it.  The interpreter writes the outputs in place, like the compiled C function.
rng = np.random.default_rng(0)
x = rng.standard_normal(N).astype("float32")
expected = x * 2 + 1
y_interp = np.full(N, np.nan, "float32")
interp.run(func, x, y_interp)
np.testing.assert_allclose(y_interp, expected, rtol=1e-6)
print("interpreter: matches NumPy")

module = tensorforge.build(func, target="c")
y_c = np.full(N, np.nan, "float32")
module(x, y_c)
np.testing.assert_allclose(y_c, expected, rtol=1e-6)
print("C backend: matches NumPy")

# A loop program is a value: two lowerings of the same schedule are structurally equal, and a
# different schedule is not.
from tensorforge.arith import structural_equal  # noqa: E402

s_plain = te.create_schedule(Y.op)
assert structural_equal(tensorforge.lower(s, [X, Y]), func, map_vars=True)
assert not structural_equal(tensorforge.lower(s_plain, [X, Y]), func, map_vars=True)
print("the loop program is a value: equal lowerings compare equal")
