"""Loop programs written as JSON and read back: the same program (printed text and sharing of
variables and buffers), and only the IR's own node classes are ever built."""
import json

import pytest

import tensorforge
from tensorforge import te
from tensorforge.ir import expr as E
from tensorforge.ir.functor import free_vars
from tensorforge.tir import nodes as N
from tensorforge.tir import serialize


def _programs():
    A = te.placeholder((64, 48), name="A")
    B = te.placeholder((48, 32), name="B")
    k = te.reduce_axis((0, 48), name="k")
    C = te.compute((64, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*s[C].op.axis, 8, 16)
    s[C].vectorize(ji)
    s[C].parallel(io)
    yield tensorforge.lower(s, [A, B, C], "mm")
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*s[C].op.axis, 8, 16)
    s[C].reorder(io, jo, ii, k, ji)
    s[C].prefetch(B, k, 4)                 # Prefetch statements in the program
    yield tensorforge.lower(s, [A, B, C], "mm_prefetch")
    n = te.var("n")
    X = te.placeholder((n, 7), name="X")
    Y = te.compute((n, 7), lambda i, j: te.if_then_else(X[i, j] > 0.5, te.exp(X[i, j]), X[i, j] * -1e30),
                   name="Y")
    s = te.create_schedule(Y.op)
    yo, yi = s[Y].split(s[Y].op.axis[1], factor=3)
    s[Y].unroll(yi)
    yield tensorforge.lower(s, [X, Y], "sel")


@pytest.mark.parametrize("func", list(_programs()), ids=lambda f: f.name)
def test_round_trip_keeps_the_program_and_its_sharing(func):
    back = serialize.loads(serialize.dumps(func))
    assert isinstance(back, N.PrimFunc) and str(back) == str(func)
    assert [p.name for p in back.params] == [p.name for p in func.params]
    # a variable read in the body is the very object its loop (or the signature) binds
    bound = set()

    def visit(s):
        if isinstance(s, N.For):
            bound.add(s.loop_var)
        for f in ("body", "then_case", "else_case"):
            if isinstance(getattr(s, f, None), N.Stmt):
                visit(getattr(s, f))
        for sub in getattr(s, "seq", ()):
            visit(sub)
    visit(back.body)
    bound.update(back.shape_vars)
    used = {v for v in free_vars(back.body) if v.dtype != "handle"}
    assert used <= bound
    assert serialize.dumps(back) == serialize.dumps(func)


def test_unknown_classes_and_malformed_tables_are_rejected():
    doc = json.loads(serialize.dumps(E.IntImm("int32", 3)))
    for name in ("system", "Popen", "PrimFuncX", "__builtins__"):
        bad = dict(doc, nodes=[[name, doc["nodes"][0][1]]])
        with pytest.raises(ValueError, match="unknown node class"):
            serialize.loads(json.dumps(bad))
    forward = {"format": "tensorforge-ir", "version": 1, "root": {"n": 0},
               "nodes": [["Add", {"a": {"n": 1}, "b": {"n": 1}, "dtype": "int32"}], doc["nodes"][0]]}
    with pytest.raises(ValueError, match="bad node reference"):
        serialize.loads(json.dumps(forward))
    for text in ("", "null", "[]", '{"format": "tensorforge-ir", "version": 2}', b"\x80\x04K\x01."):
        with pytest.raises(ValueError):
            serialize.loads(text)
    with pytest.raises(TypeError, match="not an IR node class"):
        serialize.dumps(N.Evaluate(object()))
