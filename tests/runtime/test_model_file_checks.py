"""A `.tfm` whose description does not match its kernels is refused at load, with one sentence
that names the problem, before any kernel runs (out-of-bounds reads printed NaNs before)."""
import json
import zipfile

import numpy as np
import pytest

import tensorforge
from tensorforge.graph.builder import GraphBuilder


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tfm")
    b = GraphBuilder("m")
    x = b.input("x", (2, 3, 8, 8), "float32")
    w = b.const(np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32"), "w")
    w2 = b.const(np.random.default_rng(1).standard_normal((4, 4, 3, 3)).astype("float32"), "w2")
    h = b.add1("relu", [b.add1("conv2d", [x, w], {"padding": (1, 1, 1, 1), "strides": (1, 1)})])
    y = b.add1("relu", [b.add1("conv2d", [h, w2], {"padding": (1, 1, 1, 1), "strides": (1, 1)})])
    model = tensorforge.compile(b.finish([y]))
    return model.export(str(tmp / "m.tfm"))


def _rewrite(src: str, dst: str, edit) -> str:
    with zipfile.ZipFile(src) as z:
        files = {n: z.read(n) for n in z.namelist()}
    manifest = json.loads(files["model.json"])
    edit(manifest)
    files["model.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(dst, "w") as z:
        for n, data in files.items():
            z.writestr(n, data)
    return dst


def _values(m):
    return m["spec"]["values"]


def _arena_value(m):
    return next(n for n, v in _values(m).items() if v["where"] == "arena")


def _param(m):
    return next(n for n, v in _values(m).items() if v["where"] == "param")


def _kernel(m):
    return next(s for s in m["spec"]["steps"] if s["kind"] == "kernel")


EDITS = {
    "input shape": (lambda m: _values(m)["x"].update(shape=[1, 1, 1, 1]), "kernel .* compiled for float32"),
    "input dtype": (lambda m: _values(m)["x"].update(dtype="float64"), "compiled for float32"),
    "output shape": (lambda m: _values(m)[m["spec"]["outputs"][0]].update(shape=[1]), "compiled for"),
    "arena offset": (lambda m: _values(m)[_arena_value(m)].update(offset=m["spec"]["arena_bytes"]),
                     "outside the .*-byte arena"),
    "arena size": (lambda m: m["spec"].update(arena_bytes=1), "outside the 1-byte arena"),
    "param shape": (lambda m: _values(m)[_param(m)].update(shape=[4, 3, 3, 2]), "params.npz holds float32"),
    "unknown argument": (lambda m: _kernel(m)["args"].__setitem__(0, "nope"), "not a value of the model"),
    "value written by no step": (lambda m: _values(m).update(extra={"shape": [4], "dtype": "float32",
                                                                    "where": "output", "offset": 0}),
                                 "'extra' .* written by no step"),
    "no buffer record": (lambda m: _kernel(m).pop("params"), "no record of its"),
    "negative dimension": (lambda m: _values(m)["x"].update(shape=[2, -3, 8, 8]), "no valid shape"),
    "object dtype": (lambda m: _values(m)["x"].update(dtype="object"), "no valid dtype"),
    "steps not a list": (lambda m: m["spec"].update(steps=None), "malformed"),
    "run slots": (lambda m: m["spec"]["runs"][0]["slots"].reverse(), "passes .* its steps take"),
}


@pytest.mark.parametrize("name", list(EDITS))
def test_an_edited_description_is_refused_at_load(exported, tmp_path, name):
    edit, message = EDITS[name]
    path = _rewrite(exported, str(tmp_path / "edited.tfm"), edit)
    with pytest.raises(ValueError, match=message):
        tensorforge.load(path)


def test_the_unedited_file_loads_and_runs(exported):
    model = tensorforge.load(exported)
    x = np.random.default_rng(1).standard_normal((2, 3, 8, 8)).astype("float32")
    assert np.isfinite(model(x)[0]).all()
