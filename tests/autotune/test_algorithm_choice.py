"""Tuning records choose the form of each 3x3 stride-1 conv (autotune/algorithms.py): tune finds
the kernels of every form, compile runs each conv as the form whose best record is fastest."""
import numpy as np
import pytest
from autotune_graphs import conv_net

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.algorithms import MARGIN
from tensorforge.autotune.records import Record
from tensorforge.graph.reference import run_reference

WINOGRAD = "conv2d_winograd_nchwc"


def _forms(tasks):
    """{tile (0: direct): task} of conv_net's 32 -> 32 channel convs (c2 and c3, one workload)."""
    out = {}
    for t in tasks:
        shapes = [spec[0] for spec in t.inputs if spec is not None]
        if t.op == WINOGRAD:
            out[dict(t.attrs)["tile"]] = t
        elif t.op == "conv2d_nchwc" and shapes[1][2:4] == (3, 3) and len(shapes[0]) == 5:
            out[0] = t
    return out


def _records(forms, seconds: dict, stage="tune"):
    return [Record(task=forms[tile], config=forms[tile].config_space.default_config().to_json(),
                   costs=(s,), threads=1, stage=stage) for tile, s in seconds.items()]


def _tiles(model):
    """The Winograd tile (0: direct) of each conv of the compiled graph on blocked data (c2, c3;
    c1 reads the NCHW input, so it has no choice)."""
    return [int(n.attrs.get("tile", 0)) for n in model.info["graph"].nodes
            if n.op in ("conv2d_nchwc", WINOGRAD) and n.attrs.get("data_layout", "NCHW") != "NCHW"]


@pytest.fixture(scope="module")
def graph_and_forms():
    g = conv_net()
    return g, _forms(extract_tasks(g, "c", alternatives=True))


def test_tune_finds_every_form(graph_and_forms):
    g, forms = graph_and_forms
    assert set(forms) == {0, 2, 4}
    plain = _forms(extract_tasks(g, "c"))
    assert set(plain) == {4}                       # the rule's pick for 32 channels on 10x10
    assert forms[2].occurrences == forms[0].occurrences == 2


@pytest.mark.parametrize("seconds, tile", [
    ({0: 2e-3, 2: 0.5e-3, 4: 1e-3}, 2),             # the smaller tile is fastest
    ({0: 0.6e-3, 2: 0.9e-3, 4: 1e-3}, 0),           # the direct conv is fastest
    ({0: 2e-3, 2: MARGIN * 1.01e-3, 4: 1e-3}, 4),   # within the margin: the rule's pick stays
    ({0: 0.1e-3, 2: 0.1e-3}, 4),                   # the rule's pick has no record: it stays
])
def test_compile_runs_the_fastest_form(graph_and_forms, monkeypatch, seconds, tile):
    from tensorforge.runtime import module
    monkeypatch.setattr(module, "_num_threads", 1)
    g, forms = graph_and_forms
    model = tensorforge.compile(g, "c", records=_records(forms, seconds))
    assert _tiles(model) == [tile, tile]
    assert [(c.default, c.chosen) for c in model.info["algorithms"]] == ([(4, tile)] * 2 if tile != 4 else [])
    x = np.random.default_rng(1).standard_normal((1, 8, 10, 10)).astype("float32")
    np.testing.assert_allclose(model(x)[0], run_reference(g, x)[0], rtol=1e-4, atol=1e-4)


def test_times_in_the_model_compare_forms_where_each_has_one(graph_and_forms, monkeypatch):
    """Times in the model (stage "model") decide where the default form and another have them;
    with only one form timed there, the times alone decide."""
    from tensorforge.runtime import module
    monkeypatch.setattr(module, "_num_threads", 1)
    g, forms = graph_and_forms
    alone = _records(forms, {0: 2e-3, 2: 0.5e-3, 4: 1e-3})
    assert _tiles(tensorforge.compile(g, "c", records=alone + _records(forms, {2: 1.2e-3, 4: 1e-3}, "model"))) == [4, 4]
    assert _tiles(tensorforge.compile(g, "c", records=alone + _records(forms, {4: 1e-3}, "model"))) == [2, 2]


def test_confirm_in_model_times_every_form_where_it_runs(graph_and_forms, tmp_path, monkeypatch):
    from tensorforge.autotune import confirm_in_model
    from tensorforge.autotune.records import RecordWriter, load_records
    from tensorforge.runtime import module
    monkeypatch.setattr(module, "_num_threads", 1)
    g, forms = graph_and_forms
    path = tmp_path / "t.jsonl"
    with RecordWriter(path) as w:
        for r in _records(forms, {0: 2e-3, 2: 0.5e-3, 4: 1e-3}):
            w.write(r)
    lines = []
    confirm_in_model(g, str(path), rounds=1, runs=1, log=lines.append)
    timed = {r.task.key for r in load_records(path) if r.stage == "model" and r.ok}
    assert {forms[t].key for t in (0, 2, 4)} <= timed
    assert any("with its convs Winograd F(2x2)" in ln for ln in lines), lines
    model = tensorforge.compile(g, "c", records=str(path))   # the forms now compared where they ran
    assert len(_tiles(model)) == 2


def test_only_3x3_stride_1_conv_kernels_are_forms(graph_and_forms):
    from tensorforge.autotune.algorithms import is_form
    _, forms = graph_and_forms
    assert all(is_form(t) for t in forms.values())
    others = [t for t in extract_tasks(conv_net(), "c") if t.op not in ("conv2d_nchwc", WINOGRAD)]
    assert others and not any(is_form(t) for t in others)       # the dense layer
