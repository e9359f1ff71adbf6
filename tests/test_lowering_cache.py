"""The lowering cache (lowering.lower_group_cached, with the printed C of each kernel) and
kernel sharing between fused groups of one signature (driver.compile): a warm compile lowers
and prints nothing, a damaged entry is made again, and groups that differ in shape, attributes
or config do not share."""
import numpy as np
import pytest

import tensorforge
import tensorforge.lowering as lowering
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference


def _net(scale=1.0):
    """relu(conv + bias) blocks: the first reads the NCHW input, the next two blocked data of
    one shape (one kernel serves both), the last has another stride and shape."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("cache")
    x = b.input("x", (1, 16, 16, 16), "float32")   # the stride-2 output 8 wide: blocked on any x86
    h = x
    for k, (c, stride) in enumerate([(16, 1), (16, 1), (16, 1), (32, 2)]):
        w = b.const(rng.standard_normal((c, 16, 3, 3)).astype("float32") * 0.2 * scale, f"w{k}")
        bias = b.const(rng.standard_normal((c, 1, 1)).astype("float32"), f"b{k}")
        conv = b.add1("conv2d", [h, w], {"padding": (1, 1, 1, 1), "strides": (stride, stride)})
        h = b.add1("relu", [b.add1("add", [conv, bias])])
    return b.finish([h]), rng.standard_normal((1, 16, 16, 16)).astype("float32")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_warm_compile_lowers_nothing_and_groups_share_kernels(cache, monkeypatch):
    graph, x = _net()
    calls = []
    real = lowering.lower_group
    monkeypatch.setattr(lowering, "lower_group", lambda *a, **k: calls.append(a[2]) or real(*a, **k))
    cold = tensorforge.compile(graph, opt_level=2)
    kernels = [st for st in cold.spec.steps if st["kind"] == "kernel"]
    assert len(calls) == len(cold.info["funcs"]) < len(kernels)      # the two equal blocks share one kernel
    assert len({st["symbol"] for st in kernels}) == len(calls)
    entries = sorted((cache / "lowered").glob("*.ir"))
    texts = sorted((cache / "lowered").glob("*.c.entry"))
    assert len(entries) == len(texts) == len(calls)
    calls.clear()
    # without the build record (build_records.py), the kernels come from the lowering cache
    _forget_builds(cache)
    warm = tensorforge.compile(graph, opt_level=2)
    assert calls == [] and warm.source == cold.source          # printed C from the cache too
    _forget_builds(cache)
    texts[0].write_bytes(b"damaged")                           # printed again, same text
    assert tensorforge.compile(graph, opt_level=2).source == cold.source
    want = run_reference(graph, x)[0]
    np.testing.assert_allclose(warm(x)[0], want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(warm(x)[0], cold(x)[0])
    # other weights, same shapes: the same kernels (values are arguments, not code)
    tensorforge.compile(_net(scale=2.0)[0], opt_level=2)
    assert calls == []
    # a damaged entry is lowered again, with a warning, and rewritten
    entries[0].write_bytes(entries[0].read_bytes()[:-10])
    _forget_builds(cache)
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        again = tensorforge.compile(graph, opt_level=2)
    assert len(calls) == 1
    np.testing.assert_array_equal(again(x)[0], cold(x)[0])


def _forget_builds(cache) -> None:
    for record in (cache / "builds").glob("*.json"):
        record.unlink()


def test_signature_tells_shapes_attributes_and_configs_apart():
    from tensorforge.driver import _group_signature
    from tensorforge.graph.fuse import fuse
    from tensorforge.graph.pipeline import optimize

    graph, _ = _net()
    groups = [g for g in fuse(optimize(graph, "c", 2)) if g.master is not None]
    sigs = [_group_signature(g, None) for g in groups]
    assert sigs[1] == sigs[2]
    assert sigs[0] != sigs[1]                                        # NCHW input, not blocked
    assert sigs[2] != sigs[3]                                        # stride and shapes differ
    from tensorforge.autotune.task import task_of_group
    from tensorforge.target import Target
    space = task_of_group(groups[1], Target.parse("c")).config_space
    other = next(c for c in (space.get(i) for i in range(space.size)) if c != space.default_config())
    assert _group_signature(groups[1], other) != _group_signature(groups[1], space.default_config())
