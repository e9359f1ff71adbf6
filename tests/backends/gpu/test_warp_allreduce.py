"""Cross-thread reductions within warps (tir/allreduce.py warp forms, picked by
tir/passes/select_allreduce.py): CUDA reduces each warp with xor shuffles and only the warps'
results through shared memory; OpenCL uses sub-group built-ins only when the device has
cl_khr_subgroups (PoCL has not: the shared-memory tree stays, and the results are unchanged).
CUDA is compile-checked with NVRTC (no device here); OpenCL runs against NumPy."""
from __future__ import annotations

import numpy as np
import pytest

import tensorforge
from tensorforge import te
from tensorforge.backends import opencl as opencl_backend
from tensorforge.codegen.opencl import codegen_opencl
from tensorforge.graph.builder import GraphBuilder
from tensorforge.ir.functor import post_order_visit
from tensorforge.ops import registry
from tensorforge.tir import nodes as N
from tensorforge.tir.allreduce import WARP_ATTR
from tensorforge.tir.build import schedule_to_primfunc
from tensorforge.tir.passes.select_allreduce import select_allreduce

CUDA = "cuda -arch=sm_90"


def _rows(rows: int, cols: int, threads: int, kind: str = "sum"):
    A = te.placeholder((rows, cols), name="A")
    k = te.reduce_axis((0, cols), name="k")
    fn = {"sum": te.sum, "max": te.max, "min": te.min}[kind]
    B = te.compute((rows,), lambda i: fn(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    _, ki = s[B].split(k, factor=threads)
    BF = s.rfactor(B, ki)
    s[B].bind(s[B].op.axis[0], te.thread_axis("blockIdx.x"))
    tx = s[B].op.reduce_axis[0]
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], tx)
    s[BF].set_scope("local")
    return s, [A, B]


def _attrs(func) -> list:
    found: list = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, N.AttrStmt) and n.key == WARP_ATTR else None)
    return found


def test_lowering_writes_a_warp_form_for_each_width_that_divides_the_threads():
    s, args = _rows(4, 1000, 96)
    (attr,) = _attrs(schedule_to_primfunc(s, args))
    assert [w for w, _ in attr.value.forms] == [8, 16, 32]          # 64 does not divide 96
    s, args = _rows(4, 1000, 24)
    (attr,) = _attrs(schedule_to_primfunc(s, args))
    assert [w for w, _ in attr.value.forms] == [8]


def test_without_a_warp_lowering_the_tree_stays():
    s, args = _rows(4, 1000, 64)
    func = schedule_to_primfunc(s, args)
    (attr,) = _attrs(func)
    chosen = select_allreduce(func)
    assert not _attrs(chosen) and "tf.warp" not in str(chosen)
    assert isinstance(func.body, N.For) and func.body.body is attr      # the block loop around it
    assert chosen.body.body is attr.body                                   # the tree itself, untouched


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_cuda_reduces_within_warps_with_shuffles(nvrtc, kind):
    s, args = _rows(4, 1000, 128, kind)
    f = tensorforge.build(s, args, target=CUDA)
    assert f.binary[:4] == b"\x7fELF"
    assert f.source.count("__shfl_xor_sync(") == 5                   # 16, 8, 4, 2, 1 lanes apart
    assert "__shared__ float B_red[4];" in f.source                  # one slot per warp, not per thread
    assert f.source.count("__syncthreads();") == 3                   # warps' slots, 2 tree steps
    assert "tf.warp" not in f.source


def test_one_warp_needs_no_shared_memory(nvrtc):
    f = tensorforge.build(*_rows(3, 100, 32), target=CUDA)
    assert "__shfl_xor_sync(" in f.source
    assert "__shared__" not in f.source and "__syncthreads" not in f.source


def test_threads_not_a_multiple_of_the_warp_keep_the_shared_tree(nvrtc):
    f = tensorforge.build(*_rows(3, 100, 24), target=CUDA)
    assert "__shfl" not in f.source and "__shared__ float B_red[24];" in f.source


def test_argmax_has_two_values_and_keeps_the_shared_tree(nvrtc):
    x = np.random.default_rng(0).standard_normal((3, 500)).astype("float32")
    model = tensorforge.compile(_graph("argmax", [x], {"axis": 1, "keepdims": 0}), target=CUDA)
    assert "__shfl" not in model.source and model.program[:4] == b"\x7fELF"


def _graph(op, inputs, attrs):
    b = GraphBuilder(op)
    x = b.input("x", inputs[0].shape, str(inputs[0].dtype))
    consts = [b.const(a, f"c{k}") for k, a in enumerate(inputs[1:])]
    return b.finish([b.add1(op, [x, *consts], attrs)])


R = np.random.default_rng(11)
LONG_ROWS = [
    ("softmax", [R.standard_normal((3, 700)).astype("float32")], {}),
    ("layer_norm", [R.standard_normal((2, 384)).astype("float32"), (R.random(384) + 0.5).astype("float32"),
                    R.standard_normal(384).astype("float32")], {}),
    ("reduce_sum", [R.standard_normal((3, 1000)).astype("float32")], {"axes": (1,), "keepdims": 0}),
]


@pytest.mark.parametrize("op,inputs,attrs", LONG_ROWS, ids=[c[0] for c in LONG_ROWS])
def test_long_rows_compile_with_warp_shuffles_for_sm_90(nvrtc, op, inputs, attrs):
    model = tensorforge.compile(_graph(op, inputs, attrs), target=CUDA)
    assert model.program[:4] == b"\x7fELF" and "__shfl_xor_sync(" in model.source


@pytest.mark.parametrize("op,inputs,attrs", LONG_ROWS, ids=[c[0] for c in LONG_ROWS])
def test_long_rows_on_opencl_are_unchanged(opencl, op, inputs, attrs):
    """On this OpenCL device: sub-groups only with cl_khr_subgroups, and the same results."""
    import pyopencl as cl  # noqa: F401 - the fixture made sure it imports

    from tensorforge.runtime.opencl import pick_device
    has_sub_groups = "cl_khr_subgroups" in pick_device("").extensions.split()
    model = tensorforge.compile(_graph(op, inputs, attrs), target="opencl")
    assert ("sub_group_reduce_" in model.source) == has_sub_groups
    expected = registry.get(op).run_reference(list(inputs), dict(attrs))
    np.testing.assert_allclose(model(inputs[0])[0], expected[0], rtol=1e-4, atol=1e-4)


def test_opencl_sub_groups_when_the_device_has_them(monkeypatch):
    """The source an OpenCL device with 16-wide sub-groups gets (printed only: PoCL has none)."""
    monkeypatch.setattr(opencl_backend, "opencl_sub_group_width", lambda device: 16)
    s, args = _rows(4, 1000, 128, "max")
    func = tensorforge.lower(s, args, target="opencl")
    text = codegen_opencl([func]).text
    assert "#pragma OPENCL EXTENSION cl_khr_subgroups : enable" in text
    assert "sub_group_reduce_max(" in text and "__local float B_red[8];" in text
    assert "B_red[get_sub_group_id()] = " in text and "get_sub_group_local_id() == 0" in text


def test_opencl_without_sub_groups_keeps_the_tree(monkeypatch):
    monkeypatch.setattr(opencl_backend, "opencl_sub_group_width", lambda device: 0)
    s, args = _rows(4, 1000, 128, "sum")
    text = codegen_opencl([tensorforge.lower(s, args, target="opencl")]).text
    assert "sub_group" not in text and "__local float B_red[128];" in text


# -- select_allreduce, before and expected --------------------------------------------------------

def _hand_written(width: int, combiner_name: str = "sum"):
    """A PrimFunc whose one annotated reduction has a tree (`tree`) and one warp form for `width`:
    every lane reduces acc, the first lane of each warp writes its warp's slot.  Returns the
    function and the pieces the expected programs are built from."""
    from tensorforge.ir.expr import Var, const
    from tensorforge.te.tensor import prod
    from tensorforge.te.tensor import sum as te_sum
    from tensorforge.tir.allreduce import WARP_INDEX, WARP_LANE, WARP_REDUCE, WarpForms

    reducer = {"sum": te_sum, "prod": prod}[combiner_name]
    x = te.placeholder((1,), name="x")
    k = te.reduce_axis((0, 1), name="k")
    combiner = reducer(x[k], axis=k).combiner
    out = N.Buffer("out", (2,), "float32")
    acc = N.Buffer("acc", (1,), "float32", N.LOCAL)
    slots = N.Buffer("slots", (2,), "float32", N.SHARED)
    t, v = Var("t"), Var("v", "float32")
    tree = N.BufferStore(out, const(0.0), (const(0),))
    form = N.LetStmt(v, N.CallExtern("float32", WARP_REDUCE, (N.BufferLoad(acc, (const(0),)),)),
                     N.IfThenElse(N.CallExtern("int32", WARP_LANE, (t,)) == 0,
                                  N.BufferStore(slots, v, (N.CallExtern("int32", WARP_INDEX, (t,)),))))
    body = N.AttrStmt(WARP_ATTR, WarpForms(combiner, "float32", ((width, form),)), tree)
    return N.PrimFunc("f", (out,), body), (combiner, acc, slots, t, v, tree)


def test_select_allreduce_writes_cuda_shuffles_for_the_32_wide_form():
    from tensorforge.arith import structural_equal
    from tensorforge.backends.gpu_warp import CUDA_WARP_LOWERING
    from tensorforge.ir.expr import Var, const

    func, (combiner, acc, slots, t, v, _) = _hand_written(32)
    got = select_allreduce(func, CUDA_WARP_LOWERING)
    names = [Var(f"v_{n}", "float32") for n in range(5)]
    chain = [names[0]] + names[1:] + [v]
    body: N.Stmt = N.IfThenElse(t % 32 == 0, N.BufferStore(slots, v, (t // 32,)))
    for n in range(5, 0, -1):                    # lanes 16, 8, 4, 2, 1 apart
        shfl = N.CallExtern("float32", "__shfl_xor_sync",
                            (const(0xFFFFFFFF, "uint32"), chain[n - 1], const(32 >> n), const(32)))
        body = N.LetStmt(chain[n], combiner.combine([chain[n - 1]], [shfl])[0], body)
    want = N.LetStmt(names[0], N.BufferLoad(acc, (const(0),)), body)
    assert structural_equal(got, func.with_body(want), map_vars=True), f"got:\n{got}\nexpected:\n{want}"


def test_select_allreduce_uses_sub_group_built_ins_and_keeps_the_tree_for_what_they_lack():
    from tensorforge.arith import structural_equal
    from tensorforge.backends.gpu_warp import CUDA_WARP_LOWERING, sub_group_lowering
    from tensorforge.ir.expr import const

    func, (_, acc, slots, _, v, tree) = _hand_written(16)
    got = select_allreduce(func, sub_group_lowering(16))
    want = N.LetStmt(v, N.CallExtern("float32", "sub_group_reduce_add", (N.BufferLoad(acc, (const(0),)),)),
                     N.IfThenElse(N.CallExtern("int32", "get_sub_group_local_id", ()) == 0,
                                  N.BufferStore(slots, v, (N.CallExtern("int32", "get_sub_group_id", ()),))))
    assert structural_equal(got, func.with_body(want)), f"got:\n{got}\nexpected:\n{want}"
    assert select_allreduce(func, CUDA_WARP_LOWERING).body is tree          # no 32-wide form
    product, (*_, tree) = _hand_written(16, "prod")
    assert select_allreduce(product, sub_group_lowering(16)).body is tree    # no sub_group_reduce_mul
