"""Record files with lines that parse as JSON but are not usable records: every such line is
skipped, with one warning that counts them, by `inspect --records` and `compile --records`."""
import json
import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tensorforge import cli
from tensorforge.autotune.records import load_records

NOT_OBJECTS = ["null", "[1]", '"x"', "3"]


def small_model(path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    w = helper.make_tensor("w", TensorProto.FLOAT, [8, 4], np.arange(32, dtype="float32") / 32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    m = helper.make_model(helper.make_graph(nodes, "small", [x], [y], [w]),
                          opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, str(path))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A small model and a record file from a short tuning run of it."""
    tmp = tmp_path_factory.mktemp("records")
    small_model(tmp / "m.onnx")
    assert cli.main(["tune", str(tmp / "m.onnx"), "--records", str(tmp / "tune.jsonl"), "--trials", "2",
                     "--target", "c"]) == 0
    return tmp


def _lines(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _write(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))


def _best_ok(lines):
    return min((d for d in lines if "costs" in d["result"]), key=lambda d: min(d["result"]["costs"]))


def test_values_that_are_not_objects_and_zero_costs_are_skipped_with_one_warning(tuned, tmp_path, capsys):
    good = _lines(tuned / "tune.jsonl")
    zero = dict(_best_ok(good), result={"costs": [0.0]})
    negative = dict(_best_ok(good), result={"costs": [-1.0]})
    path = tmp_path / "bad.jsonl"
    _write(path, NOT_OBJECTS + good + [zero, negative, {"version": 1, "result": None}])
    with pytest.warns(RuntimeWarning, match=r"skipped 7 line\(s\)") as caught:
        assert len(load_records(path)) == len(good)
    assert len([w for w in caught if "skipped" in str(w.message)]) == 1
    # the command line prints each warning as one line on stderr
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["inspect", "--records", str(path)]) == 0
    out, err = capsys.readouterr()
    assert f"{len(good)} records" in out
    assert [line for line in err.splitlines() if "skipped" in line] == [
        line for line in err.splitlines() if line.startswith("tensorforge: warning: skipped 7 line(s)")]
    assert err.count("skipped 7 line(s)") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["compile", str(tuned / "m.onnx"), "-o", str(tmp_path / "m.tfm"), "--records", str(path),
                         "--target", "c"]) == 0
    err = capsys.readouterr().err
    assert err.count("tensorforge: warning: skipped 7 line(s)") == 1
    assert "tuning records applied to 1 kernel" in err


def test_a_record_with_an_invalid_config_and_the_best_cost_is_skipped(tuned, tmp_path, capsys):
    good = _lines(tuned / "tune.jsonl")
    best = _best_ok(good)
    invalid = [dict(best, config={knob: "not a value" for knob in best["config"]}, result={"costs": [1e-12]}, stage="model"),
               dict(best, config={"no_such_knob": 3}, result={"costs": [1e-12]}, stage="model")]
    path = tmp_path / "bad.jsonl"
    _write(path, good + invalid)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert cli.main(["compile", str(tuned / "m.onnx"), "-o", str(tmp_path / "m.tfm"), "--records", str(path),
                         "--target", "c"]) == 0
    err = capsys.readouterr().err
    assert "tuning records applied to 1 kernel" in err
    messages = [line for line in err.splitlines() if "not valid for its kernel" in line]
    assert len(messages) == 1 and messages[0].startswith("tensorforge: warning: skipped 2 tuning record(s)")
