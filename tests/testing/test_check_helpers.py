"""The check helpers cannot pass by accident: a kernel that leaves an output unwritten, or a
reference that covers fewer outputs than the kernel has, fails the check."""
import numpy as np
import pytest

from tensorforge import te
from tensorforge.ops.testing import check_op, unwritten_array, unwritten_fills
from tensorforge.testing import check_schedule, make_arguments


def writes_nothing(*arrays):
    """A 'kernel' that returns without touching its outputs."""


def negate_schedule(dtype):
    A = te.placeholder((4, 5), dtype, name="A")
    B = te.compute((4, 5), lambda i, j: -A[i, j], name="B")
    return te.create_schedule(B.op), [A, B]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "uint8", "int32", "int64", "bool"])
def test_fills_cannot_all_equal_one_value(dtype):
    fills = unwritten_fills(dtype)
    if np.dtype(dtype).kind == "f":
        assert len(fills) == 1 and np.isnan(fills[0])
    else:
        assert len(fills) == 2 and fills[0] != fills[1]
    for run in range(len(fills)):
        a = unwritten_array((2, 3), dtype, run)
        assert a.dtype == np.dtype(dtype) and a.shape == (2, 3)


def test_make_arguments_fills_outputs_not_inputs():
    _, (A, B) = negate_schedule("float32")
    a, b = make_arguments([A, B], seed=0)
    assert np.isfinite(a).all() and np.isnan(b).all()
    _, (A, B) = negate_schedule("int32")
    first, second = make_arguments([A, B], run=0)[1], make_arguments([A, B], run=1)[1]
    assert (first != second).all()


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_check_schedule_fails_on_an_unwritten_output(dtype):
    s, args = negate_schedule(dtype)
    with pytest.raises(AssertionError, match="output B"):
        # all-zero expected values would match zero-filled outputs
        check_schedule(s, args, lambda a: np.zeros_like(a), interpreter=False, module=writes_nothing)


def test_check_schedule_passes_a_kernel_that_writes_every_output():
    s, args = negate_schedule("int32")
    check_schedule(s, args, lambda a: -a)


def test_check_schedule_fails_when_the_reference_misses_an_output():
    A = te.placeholder((6,), name="A")
    B = te.compute((6,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((6,), lambda i: A[i] * 2.0, name="C")
    s = te.create_schedule([B.op, C.op])
    with pytest.raises(AssertionError, match=r"the reference gave 1 arrays for 2 outputs \(B, C\)"):
        check_schedule(s, [A, B, C], lambda a: a + 1.0)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_check_op_fails_on_an_unwritten_output(monkeypatch, dtype):
    x = -np.arange(1, 7, dtype=dtype).reshape(2, 3)        # relu of negatives: all zeros
    check_op("relu", [x])
    import tensorforge.build_module
    monkeypatch.setattr(tensorforge.build_module, "build", lambda func, target=None: writes_nothing)
    with pytest.raises(AssertionError, match="relu output 0"):
        check_op("relu", [x])
