"""Tiny window ops, reductions and Winograd convs run without a parallel region; larger ones
keep it."""
import tensorforge
from tensorforge import te
from tensorforge.autotune.task import Task, build_candidate
from tensorforge.ops.nn_depthwise import depthwise_conv2d
from tensorforge.ops.schedules.cpu import reduction
from tensorforge.ops.schedules.cpu_window import window2d
from tensorforge.target import Target

TARGET = "c -mcpu=x86-64-v4"


def _depthwise(c: int, hw: int) -> str:
    data = te.placeholder((1, c, hw, hw), name="data")
    w = te.placeholder((c, 1, 3, 3), name="w")
    out = depthwise_conv2d.compute(data, w)
    s = te.create_schedule(out.op)
    window2d(s, [out], [out], Target.parse(TARGET))
    return str(tensorforge.lower(s, [data, w, out], name="dw"))


def _row_sums(rows: int, cols: int) -> str:
    a = te.placeholder((rows, cols), name="a")
    k = te.reduce_axis((0, cols), name="k")
    out = te.compute((rows,), lambda i: te.sum(a[i, k], axis=k), name="out")
    s = te.create_schedule(out.op)
    reduction(s, [out], [out], Target.parse(TARGET))
    return str(tensorforge.lower(s, [a, out], name="rows"))


def test_tiny_window_ops_and_reductions_skip_the_parallel_region(monkeypatch):
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    assert "parallel" not in _depthwise(8, 6)          # 8 x 4 x 4 outputs x 9 taps
    assert "parallel" in _depthwise(32, 56)
    assert "parallel" not in _row_sums(64, 4)          # 64 rows of 4: 256 elements read
    assert "parallel" in _row_sums(256, 256)


def _winograd(channels: int, hw: int, tile: int) -> str:
    """A channels -> channels 3x3 Winograd conv of an hw x hw input (NCHW32c, no padding)."""
    data = ((1, channels // 32, hw, hw, 32), "float32")
    u = ((tile + 2, tile + 2, channels // 32, channels, 32), "float32")
    task = Task.for_op("conv2d_winograd_nchwc", [data, u], {"tile": tile, "padding": (0, 0, 0, 0),
                                                               "data_layout": "NCHW32c"}, target=TARGET)
    return str(build_candidate(task, None))


def test_small_winograd_convs_run_serially(monkeypatch):
    """Its three loop nests hand data to each other split differently: DQN's third conv (64
    channels, 9x9 input: 1M multiply-adds in the product) is faster on one thread."""
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    assert "parallel" not in _winograd(64, 9, 2)
    assert _winograd(64, 30, 4).count("parallel") >= 3     # 49 tiles x 36 positions x 64 x 64


def _cut(rows: int, width: int, num_cores: int, monkeypatch) -> str:
    """The second third of each row of a (rows, 3 * width) array: a Split's output."""
    from tensorforge.ops.schedules.common import schedule_elementwise_stage
    monkeypatch.setattr(Target, "num_cores", property(lambda self: num_cores))
    a = te.placeholder((rows, 3 * width), name="a")
    out = te.compute((rows, width), lambda i, k: a[i, k + width], name="out")
    s = te.create_schedule(out.op)
    schedule_elementwise_stage(s, out, Target.parse(TARGET))
    return str(tensorforge.lower(s, [a, out], name="cut"))


def test_long_rows_run_their_vectors_in_an_inner_loop(monkeypatch):
    """Rows of many vectors: the rows share the threads, the row's vectors are a loop inside,
    with no division of a flat index per vector (a Split of 8 x 128 x 2304 into three took
    1.9x the time that way).  Too few rows for the cores keep one flat loop of vectors."""
    text = _cut(1024, 768, 2, monkeypatch)
    assert "for i in range(1024):  # parallel" in text and "for k.outer in range(48):" in text
    assert "//" not in text and "%" not in text
    flat = _cut(2, 768, 2, monkeypatch)                # 2 rows for 2 cores
    assert "i.k.outer.fused" in flat


def _pointwise_parallel_loop(out_channels: int, hw: int) -> str:
    """The parallel loop of a 1x1 conv of 144 channels (NCHW16c) to `out_channels` on hw x hw."""
    data = ((1, 9, hw, hw, 16), "float32")
    w = ((out_channels // 32, 144, 1, 1, 32), "float32")
    task = Task.for_op("conv2d_nchwc", [data, w], {"strides": (1, 1), "padding": (0, 0, 0, 0), "dilations": (1, 1),
                                                   "data_layout": "NCHW16c"}, target=TARGET)
    (line,) = [ln.strip() for ln in str(build_candidate(task, None)).splitlines() if "parallel" in ln]
    return line


def test_pointwise_convs_spread_position_tiles_when_blocks_leave_cores_idle(monkeypatch):
    """One output block (MobileNetV2's 144 -> 32 projection on 28x28) or three on two cores: the
    position tiles go on the thread pool too; two blocks on two cores split by blocks alone."""
    monkeypatch.setattr(Target, "num_cores", property(lambda self: 2))
    assert "range(2):" in _pointwise_parallel_loop(64, 28)
    for channels in (32, 96):
        loop = _pointwise_parallel_loop(channels, 28)
        extent = int(loop.split("range(")[1].split(")")[0])
        assert extent >= 28 * channels // 32, loop
