"""Property: any sequence of schedule primitives applied to any compute gives the NumPy result,
on the C backend and on the reference interpreter.

CI runs 300 random schedules; `pytest --fuzz-examples=N` (or TENSORFORGE_FUZZ_EXAMPLES=N) runs more.
"""
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tensorforge import te
from tensorforge.ir.expr import REDUCE
from tensorforge.te.tensor import ComputeOp
from tensorforge.testing import check_schedule
from tensorforge.testing import workloads as W

EXAMPLES = int(os.environ.get("TENSORFORGE_FUZZ_EXAMPLES", "300"))


def _workload(draw):
    name = draw(st.sampled_from(sorted(W.ALL)))
    d = lambda lo, hi: draw(st.integers(lo, hi))  # noqa: E731
    if name == "matmul":
        return W.matmul(d(1, 24), d(1, 40), d(1, 20))
    if name == "matmul_int8":
        return W.matmul_int8(d(1, 12), d(1, 40), d(1, 24))
    if name == "conv2d":
        k = d(1, 3)
        return W.conv2d(1, d(1, 3), d(k, 9), d(k, 9), d(1, 5), k, k, d(0, 1), d(1, 2))
    if name == "softmax":
        return W.softmax(d(1, 6), d(1, 40))
    if name == "elementwise":
        return W.elementwise_chain(d(1, 8), d(1, 40))
    return W.reductions(d(1, 8), d(1, 30))


def _consumers(s, stage):
    return [c for c in s.stages if c is not stage and isinstance(c.op, ComputeOp)
            and any(s.stage_map.get(t.op) is stage for t in c.op.input_tensors())]


@st.composite
def scheduled(draw):
    w = _workload(draw)
    s = te.create_schedule([t.op for t in w.outputs])
    log = []
    computes = [stg for stg in s.stages if isinstance(stg.op, ComputeOp)]
    # cache_write must come first on a stage
    for stg in list(computes):
        if draw(st.integers(0, 5)) == 0:
            s.cache_write(stg.op.output(0), "local")
            log.append(f"cache_write({stg.name})")
    computes = [stg for stg in s.stages if isinstance(stg.op, ComputeOp)]
    unrolled = set()
    for _ in range(draw(st.integers(1, 10))):
        stg = draw(st.sampled_from(computes))
        if stg.attach_type == "inline":
            continue
        leaves = stg.leaf_iter_vars
        anchors = {o.attach_ivar for o in s.stages if o.attach_stage is stg}
        # axes still free to split or fuse: unannotated and not the attach point of another stage
        free = [iv for iv in leaves if iv not in anchors and (
            stg.iter_var_attrs.get(iv) is None or stg.iter_var_attrs[iv].kind == "serial")]
        prim = draw(st.sampled_from(["split", "split", "tile", "fuse", "reorder", "vectorize", "unroll",
                                     "parallel", "compute_at", "compute_at", "compute_at",
                                     "compute_inline", "compute_inline", "compute_root"]))
        if prim == "split" and free:
            iv = draw(st.sampled_from(free))
            if draw(st.booleans()):
                stg.split(iv, factor=draw(st.integers(1, 9)))
            else:
                stg.split(iv, nparts=draw(st.integers(1, 5)))
        elif prim == "tile":
            data = [iv for iv in free if iv.kind != REDUCE]
            if len(data) >= 2:
                a, b = data[0], data[1]
                stg.tile(a, b, draw(st.integers(1, 6)), draw(st.integers(1, 8)))
        elif prim == "fuse" and len(leaves) >= 2:
            k = draw(st.integers(0, len(leaves) - 2))
            a, b = leaves[k], leaves[k + 1]
            if a in free and b in free and a.kind == b.kind:
                stg.fuse(a, b)
        elif prim == "reorder" and len(leaves) >= 2:
            stg.reorder(*draw(st.permutations(leaves)))
        elif prim == "vectorize":
            data = [iv for iv in free if iv.kind != REDUCE]
            if data:
                stg.vectorize(data[-1] if draw(st.booleans()) else draw(st.sampled_from(data)))
        elif prim == "unroll" and free and stg not in unrolled:
            stg.unroll(draw(st.sampled_from(free)))
            unrolled.add(stg)
        elif prim == "parallel":
            data = [iv for iv in free if iv.kind != REDUCE]
            if data:
                stg.parallel(draw(st.sampled_from(data)))
        elif prim == "compute_at" and not stg.is_output:
            cons = _consumers(s, stg)
            if len(cons) == 1 and cons[0].attach_type != "inline":
                stg.compute_at(cons[0], draw(st.sampled_from(cons[0].leaf_iter_vars)))
        elif prim == "compute_inline" and not stg.is_output and not stg.op.reduce_axis:
            if not any(o.attach_stage is stg for o in s.stages):
                stg.compute_inline()
        elif prim == "compute_root" and not stg.is_output:
            stg.compute_root()
        else:
            continue
        log.append(f"{prim}({stg.name})")
    return w, s, log


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(scheduled())
def test_random_schedule_matches_numpy(case):
    w, s, log = case
    check_schedule(s, w.args, w.reference, rtol=1e-4, atol=1e-4, target="c -O1")
