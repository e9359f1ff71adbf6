"""The tunable window templates (window2d_nchwc.cpu: blocked depthwise conv and pooling) and the
tunable transposed conv (conv_transpose2d_nchwc.cpu): the default point is the untuned schedule,
every config computes the reference's answer, the zoo models yield their tasks, and records
apply at compile time."""
import random

import numpy as np
import pytest

import tensorforge
from tensorforge.autotune import extract_tasks
from tensorforge.autotune.records import Record, RecordWriter
from tensorforge.autotune.task import Task, build_candidate, task_of_group
from tensorforge.frontend import from_onnx
from tensorforge.graph.fuse import fuse
from tensorforge.graph.pipeline import optimize
from tensorforge.lowering import lower_group
from tensorforge.target import Target
from tensorforge.testing import check_candidate, models
from tensorforge.testing.models_builder import OnnxModelBuilder

WINDOW, TRANSPOSE = "window2d_nchwc.cpu", "conv_transpose2d_nchwc.cpu"

TASKS = {
    "depthwise": Task.for_op("depthwise_conv2d_nchwc", [((1, 2, 20, 20, 32), "float32"), ((2, 1, 3, 3, 32), "float32")],
                             {"strides": (1, 1), "padding": (1, 1, 1, 1)}),
    # a padded plane over PLANE_BYTES: a padded copy is built per tile of output rows
    "depthwise_rows": Task.for_op("depthwise_conv2d_nchwc", [((1, 1, 40, 70, 32), "float32"),
                                                             ((1, 1, 3, 3, 32), "float32")],
                                  {"strides": (2, 1), "padding": (1, 0, 1, 1)}),
    "max_pool": Task.for_op("max_pool2d_nchwc", [((1, 2, 15, 15, 16), "float32")],
                            {"kernel": (3, 3), "strides": (2, 2), "padding": (1, 1, 1, 1)}),
    "avg_pool": Task.for_op("avg_pool2d_nchwc", [((1, 1, 12, 12, 32), "float32")],
                            {"kernel": (3, 3), "strides": (1, 1), "padding": (1, 1, 1, 1)}),
    "transpose": Task.for_op("conv_transpose2d_nchwc", [((1, 16, 5, 6), "float32"), ((2, 2, 2, 16, 2, 2, 16), "float32")],
                             {"strides": (2, 2), "out_hw": (10, 12), "kernel": (4, 4), "padding": (1, 1, 1, 1)}),
    # fewer channels than a vector (an RGB output layer): vectors along the phase rows
    "transpose_narrow": Task.for_op("conv_transpose2d_nchwc", [((1, 8, 9, 7), "float32"),
                                                               ((1, 2, 2, 8, 2, 2, 3), "float32")],
                                    {"strides": (2, 2), "out_hw": (18, 14), "kernel": (4, 4),
                                     "padding": (1, 1, 1, 1)}),
    # a 3x3 kernel with stride 2: phases of 2x2, 2x1, 1x2 and 1x1 taps, a stage each
    "transpose_exact_taps": Task.for_op("conv_transpose2d_nchwc", [((1, 16, 5, 6), "float32"),
                                                                   ((2, 2, 2, 16, 2, 2, 16), "float32")],
                                        {"strides": (2, 2), "out_hw": (9, 11), "kernel": (3, 3),
                                         "padding": (1, 1, 1, 1)}),
    # a 1x3 kernel with stride 4 along its rows, 3 channels: three rows of phases without taps
    "transpose_exact_narrow": Task.for_op("conv_transpose2d_nchwc", [((1, 8, 9, 7), "float32"),
                                                                     ((1, 4, 1, 8, 1, 3, 3), "float32")],
                                          {"strides": (4, 1), "out_hw": (33, 7), "kernel": (1, 3),
                                           "padding": (0, 1, 0, 1)}),
}


def test_default_configs_are_the_heuristics():
    """The default point of a MobileNet depthwise layer and a DCGAN transposed conv, written out:
    8 columns of 2 vectors (16 accumulators), all taps unrolled, no padded copy (the taps test
    their bounds), its 4 planes on the thread pool (rows on a host with more cores than planes);
    4 x 4 positions of one phase per tile.  (On AVX-512: the tiles are sized in
    vector registers.)  The padded copy's heuristic tile (15 output rows of the 430 KiB padded
    plane) is a value of pad_rows."""
    avx512 = "c -mcpu=x86-64-v4"
    dw = Task.for_op("depthwise_conv2d_nchwc", [((1, 4, 56, 56, 32), "float32"), ((4, 1, 3, 3, 32), "float32")],
                     {"strides": (1, 1), "padding": (1, 1, 1, 1)}, target=avx512)
    assert dw.config_space.default_config().to_json() == {
        "tile_x": [7, 8], "tile_ci": [1, 2], "order": [0, 1, 2], "unroll_taps": ["unroll", "unroll"],
        "pad_rows": "inline", "parallel": "planes" if Target.parse(avx512).num_cores <= 4 else "rows"}
    assert [e.to_json() for e in dw.config_space.knob("pad_rows").entities] == ["inline", 0, 1, 2, 4, 8, 15]
    ct = Task.for_op("conv_transpose2d_nchwc", [((1, 512, 4, 4), "float32"), ((16, 2, 2, 512, 2, 2, 16), "float32")],
                     {"strides": (2, 2), "out_hw": (8, 8), "kernel": (4, 4), "padding": (1, 1, 1, 1)}, target=avx512)
    assert ct.config_space.default_config().to_json() == {
        "tile_x": [1, 4], "tile_y": [1, 4], "tile_rc": [512, 1], "order_reduce": [0, 1, 2],
        "unroll_taps": ["none", "none"], "order_outer": "phases"}


def test_narrow_default_tile_fits_the_register_file():
    """DCGAN's RGB output layer (64 -> 3 channels, 32x32 -> 64x64): the default tile counts every
    register it holds (3 accumulators and an input vector per position vector, 3 weight
    broadcasts), so it fits AVX-512's 32: 4 phase rows of one 16-lane vector, 19 registers.  The
    tile that counted only its accumulators (4 rows x 2 vectors: 24 + 8 + 3 = 35) spilled and ran
    2.2x slower."""
    ct = Task.for_op("conv_transpose2d_nchwc", [((1, 64, 32, 32), "float32"), ((1, 2, 2, 64, 2, 2, 3), "float32")],
                     {"strides": (2, 2), "out_hw": (64, 64), "kernel": (4, 4), "padding": (1, 1, 1, 1)},
                     target="c -mcpu=x86-64-v4")
    default = ct.config_space.default_config().to_json()
    assert default["tile_x"] == [2, 1, 16] and default["tile_y"] == [8, 4]
    positions = default["tile_x"][1] * default["tile_y"][1]
    assert positions * (3 + 1) + 3 <= 32


@pytest.mark.parametrize("name", list(TASKS))
def test_default_point_is_the_untuned_schedule(name):
    task = TASKS[name]
    untuned = build_candidate(task, None)
    assert str(build_candidate(task, task.config_space.default_config())) == str(untuned)


@pytest.mark.parametrize("name", list(TASKS))
def test_configs_compute_the_reference(name):
    """The last point of the space (every knob at its last value: the widest tiles, the other
    loop orders, parallel rows) and two random ones."""
    space = TASKS[name].config_space
    rng = random.Random(name)
    for config in [space.get(space.size - 1), space.random(rng), space.random(rng)]:
        check_candidate(TASKS[name], config)


@pytest.mark.parametrize("name", ["depthwise_rows", "max_pool"])
def test_window_knob_corners_compute_the_reference(name):
    """The knobs of the padded input and the parallel loop, each combination once, with one
    vector of the block per tile (when the block has two): no copy, a plane, tiles of rows."""
    task = TASKS[name]
    space = task.config_space
    base = space.default_config().to_json()
    assert base["pad_rows"] == "inline"
    # the last value: the heuristic tile of rows (depthwise_rows: its plane is over PLANE_BYTES)
    heuristic = space.knob("pad_rows").entities[-1].to_json()
    assert heuristic > 0
    narrow = {"tile_ci": [2, 1]} if base["tile_ci"] == [1, 2] else {}
    for pad_rows, parallel in [("inline", "planes"), ("inline", "rows"), (0, "planes"), (0, "rows"),
                               (2, "rows"), (heuristic, "planes")]:
        check_candidate(task, space.from_json({**base, "pad_rows": pad_rows, "parallel": parallel,
                                             "order": [2, 0, 1], **narrow}))


def test_extract_tasks_finds_depthwise_and_transposed_conv_tasks():
    mobilenet = extract_tasks(from_onnx(models.get("mobilenet_v1")[0]))
    windows = [t for t in mobilenet if t.template == WINDOW]
    assert sum(t.occurrences for t in windows) == 13            # every depthwise conv
    assert len(windows) == 9 and all(t.op == "depthwise_conv2d_nchwc" for t in windows)
    dcgan = extract_tasks(from_onnx(models.get("dcgan_generator")[0]))
    transposed = [t for t in dcgan if t.template == TRANSPOSE]
    assert len(transposed) == 4                                 # every up-sampling layer after the first
    assert all(100 <= t.config_space.size <= 5000 for t in windows + transposed)


def window_net():
    """conv -> depthwise conv + bn + relu -> max pool -> transposed conv + relu, in ONNX."""
    mb = OnnxModelBuilder("windows", 0)
    x = mb.input("x", (1, 8, 14, 14))
    y = mb.relu(mb.conv(x, 8, 32, 3, 1, 1, base="conv"))
    y = mb.relu(mb.batch_norm(mb.conv(y, 32, 32, 3, 1, 1, group=32, base="dw"), 32, "dw_bn"))
    y = mb.node("MaxPool", [y], "pool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    y = mb.relu(mb.conv_transpose(y, 32, 16, 4, 2, 1, "deconv"))
    return mb.finish([(y, (1, 16, 14, 14))]), mb.rng.normal(size=(1, 8, 14, 14)).astype(np.float32)


def test_default_records_compile_to_the_untuned_kernels():
    """A group scheduled with its task's default config lowers exactly as without a config
    (with the group's epilogue: bias, relu, layout change)."""
    target = Target.parse("c")
    groups = fuse(optimize(from_onnx(window_net()[0]), "c", 3))
    seen = set()
    for k, g in enumerate(groups):
        task = task_of_group(g, target)
        if task is None or task.template not in (WINDOW, TRANSPOSE):
            continue
        seen.add(g.master.op)
        default = task.config_space.default_config()
        assert str(lower_group(g, target, f"k{k}", default).func) == str(lower_group(g, target, f"k{k}").func)
    assert seen == {"depthwise_conv2d_nchwc", "max_pool2d_nchwc", "conv_transpose2d_nchwc"}


def test_compile_applies_window_and_transpose_records(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    model, x = window_net()
    graph = from_onnx(model)
    tasks = [t for t in extract_tasks(graph, target="c") if t.template in (WINDOW, TRANSPOSE)]
    assert len(tasks) == 3
    path = tmp_path / "tune.jsonl"
    with RecordWriter(path) as w:
        for task in tasks:
            space = task.config_space
            w.write(Record(task=task, config=space.get(space.size - 1).to_json(), costs=(1e-6,)))
            w.write(Record(task=task, config=space.default_config().to_json(), costs=(1e-3,)))
    tuned = tensorforge.compile(graph, target="c", records=str(path))
    assert tuned.info["tuned_groups"] == 3
    default = tensorforge.compile(graph, target="c")
    assert tuned.source != default.source
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, {"x": x})
    for m in (tuned, default):
        out = m(x)
        got = out[0] if isinstance(out, (list, tuple)) else out
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_fresh_process_finds_templates_that_live_in_ops_schedules():
    """extract_tasks looks templates up before lowering has imported ops/schedules/."""
    import subprocess
    import sys

    code = ("from tensorforge.autotune import extract_tasks; from tensorforge.testing import models; "
            "from tensorforge.frontend import from_onnx; m, _ = models.get('dcgan_generator'); "
            "print(sorted({t.template for t in extract_tasks(from_onnx(m))}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert "conv_transpose2d_nchwc.cpu" in out


def test_fewer_planes_than_cores_parallelize_rows(monkeypatch):
    import tensorforge.target as target_mod

    monkeypatch.setattr(target_mod, "_host_num_cores", lambda: 2)
    one = Task.for_op("depthwise_conv2d_nchwc", [((1, 1, 20, 20, 32), "float32"), ((1, 1, 3, 3, 32), "float32")],
                      {"strides": (1, 1), "padding": (1, 1, 1, 1)})
    two = Task.for_op("depthwise_conv2d_nchwc", [((1, 2, 20, 20, 16), "float32"), ((2, 1, 3, 3, 16), "float32")],
                      {"strides": (1, 1), "padding": (1, 1, 1, 1)})
    assert one.config_space.default_config().to_json()["parallel"] == "rows"
    assert two.config_space.default_config().to_json()["parallel"] == "planes"
    check_candidate(one, one.config_space.default_config())
