"""Build records (build_records.py): a compile whose library was built before lowers, prints and
reads back no kernel; a record whose library is gone, damaged, or built by another compiler or
with other flags is a miss, and the model is built again, right."""
import numpy as np
import pytest

import tensorforge
import tensorforge.lowering as lowering
from tensorforge.graph.builder import GraphBuilder
from tensorforge.graph.reference import run_reference


def _net(channels: int = 16):
    rng = np.random.default_rng(1)
    b = GraphBuilder("records")
    x = b.input("x", (1, channels, 12, 12), "float32")
    h = x
    for k in range(3):
        w = b.const(rng.standard_normal((channels, channels, 3, 3)).astype("float32") * 0.2, f"w{k}")
        h = b.add1("relu", [b.add1("conv2d", [h, w], {"padding": (1, 1, 1, 1)})])
    s = b.add1("softmax", [b.add1("reshape", [h], {"shape": (1, -1)})], {"axes": (-1,)})
    return b.finish([s]), rng.standard_normal((1, channels, 12, 12)).astype("float32")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TENSORFORGE_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.fixture
def reads(monkeypatch):
    """Names of the kernels lowered or read back from the lowering cache."""
    seen: list = []
    real = lowering.lower_group_cached
    monkeypatch.setattr("tensorforge.driver.lower_group_cached",
                        lambda group, target, name, *a: seen.append(name) or real(group, target, name, *a))
    monkeypatch.setattr("tensorforge.build_records.lower_group_cached",
                        lambda group, target, name, *a: seen.append(name) or real(group, target, name, *a))
    return seen


def test_warm_compile_reads_no_kernel_and_runs_the_same_library(cache, reads):
    graph, x = _net()
    cold = tensorforge.compile(graph)
    assert reads and sorted(p.name for p in (cache / "builds").glob("*.json")) != []
    reads.clear()
    warm = tensorforge.compile(graph)
    assert reads == []                                     # no loop program lowered or read
    assert "restore" in warm.info["timings"] and "lowering" not in warm.info["timings"]
    assert warm.lib_path == cold.lib_path and warm.source == cold.source
    assert [st.get("symbol") for st in warm.spec.steps] == [st.get("symbol") for st in cold.spec.steps]
    assert [st.get("params") for st in warm.spec.steps] == [st.get("params") for st in cold.spec.steps]
    assert warm.spec.runs == cold.spec.runs
    np.testing.assert_array_equal(warm(x)[0], cold(x)[0])
    np.testing.assert_allclose(warm(x)[0], run_reference(graph, x)[0], rtol=1e-4, atol=1e-6)
    # the loop programs are there when asked for, read back then
    assert len(warm.info["funcs"]) == len(cold.info["funcs"])
    assert reads == []
    assert [str(f) for f in warm.info["funcs"]] == [str(f) for f in cold.info["funcs"]]
    assert len(reads) == len(cold.info["funcs"])


def test_a_restored_model_exports_and_loads(cache, tmp_path):
    graph, x = _net()
    cold = tensorforge.compile(graph)
    warm = tensorforge.compile(graph)
    path = warm.export(str(tmp_path / "m.tfm"))
    loaded = tensorforge.load(path)
    np.testing.assert_array_equal(loaded(x)[0], cold(x)[0])


def test_other_shapes_make_another_record(cache, reads):
    graph, _ = _net(16)
    tensorforge.compile(graph)
    other, x = _net(8)
    reads.clear()
    model = tensorforge.compile(other)
    assert reads                                            # built, not restored
    np.testing.assert_allclose(model(x)[0], run_reference(other, x)[0], rtol=1e-4, atol=1e-6)
    assert len(list((cache / "builds").glob("*.json"))) == 2


def test_a_library_gone_or_damaged_is_built_again(cache, reads):
    graph, x = _net()
    cold = tensorforge.compile(graph)
    want = cold(x)[0]
    for lib in cache.glob("tf_*.so"):
        lib.unlink()
    reads.clear()
    with pytest.warns(RuntimeWarning, match="damaged cache entry") as caught:
        again = tensorforge.compile(graph)
    assert len(caught) == 1                                 # the build reports it, not the record too
    assert reads                                            # from the lowering cache, compiled again
    np.testing.assert_array_equal(again(x)[0], want)
    (lib,) = cache.glob("tf_*.so")
    lib.write_bytes(lib.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        third = tensorforge.compile(graph)
    np.testing.assert_array_equal(third(x)[0], want)


def test_a_damaged_record_warns_and_is_rewritten(cache, reads):
    graph, x = _net()
    want = tensorforge.compile(graph)(x)[0]
    (record,) = (cache / "builds").glob("*.json")
    record.write_bytes(record.read_bytes()[:-5])
    with pytest.warns(RuntimeWarning, match="damaged cache entry"):
        model = tensorforge.compile(graph)
    np.testing.assert_array_equal(model(x)[0], want)
    reads.clear()
    tensorforge.compile(graph)                              # the rewritten record holds
    assert reads == []


def test_another_compiler_or_other_flags_miss(cache, reads, monkeypatch):
    graph, x = _net()
    want = tensorforge.compile(graph)(x)[0]
    import tensorforge.runtime.compile as rc
    real = rc.compiler_identity
    monkeypatch.setattr(rc, "compiler_identity", lambda cc=None: real(cc) + " (upgraded)")
    reads.clear()
    model = tensorforge.compile(graph)
    assert reads
    np.testing.assert_array_equal(model(x)[0], want)
    monkeypatch.setattr(rc, "compiler_identity", real)
    import tensorforge.backends.cpu as cpu
    flags = cpu.compile_flags
    monkeypatch.setattr(cpu, "compile_flags", lambda target: flags(target) + ["-DTF_TEST_FLAG"])
    reads.clear()
    model = tensorforge.compile(graph)
    assert reads
    np.testing.assert_array_equal(model(x)[0], want)


def test_a_record_names_files_of_the_cache_folder_only(cache, reads, tmp_path):
    import json

    from tensorforge.runtime.cache_files import read_entry, write_entry
    graph, x = _net()
    want = tensorforge.compile(graph)(x)[0]
    (record_path,) = (cache / "builds").glob("*.json")
    record = json.loads(read_entry(record_path))
    record["module"]["manifest"] = "../" + record["module"]["manifest"]
    write_entry(record_path, json.dumps(record).encode())
    reads.clear()
    model = tensorforge.compile(graph)
    assert reads                                            # not restored: built again
    np.testing.assert_array_equal(model(x)[0], want)
