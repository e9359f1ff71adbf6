"""A workload template whose `fault` knob makes a candidate misbehave in one chosen way, to
check that measurement turns every failure into an error record.  Imported by the tests and,
through the template registry, by the measuring processes."""
import time

import numpy as np

from tensorforge import te
from tensorforge.ops.schedules import workload_template

FAULTS = ("none", "segfault", "hang", "wrong", "build_error", "build_hang")
FAR = (1 << 31) - (1 << 20)       # elements past the input: gigabytes away from any mapping


def _reference(a, b):
    return a + b


@workload_template("vector_add_faults.test", reference=_reference)
def vector_add_faults(cfg, target, inputs):
    a, b = inputs
    n = int(a.shape[0].value)
    cfg.define_knob("fault", list(FAULTS), default="none")
    cfg.define_split("tile", n, 2, policy="factors")
    fault = cfg["fault"].val
    if fault == "build_error":
        raise ValueError("a deliberately broken config")
    if fault == "build_hang":
        time.sleep(600)
    if fault == "segfault":
        c = te.compute((n,), lambda i: a[i + FAR] + b[i], name="c")
    elif fault == "hang":
        r1 = te.reduce_axis((0, 1 << 30), name="r1")
        r2 = te.reduce_axis((0, 1 << 30), name="r2")
        c = te.compute((n,), lambda i: te.sum(a[i] * b[i], axis=[r1, r2]), name="c")
    elif fault == "wrong":
        c = te.compute((n,), lambda i: a[i] + b[i] + np.float32(1), name="c")
    else:
        c = te.compute((n,), lambda i: a[i] + b[i], name="c")
    s = te.create_schedule(c.op)
    cfg["tile"].apply(s, s[c], s[c].op.axis[0])
    return s, [c]
