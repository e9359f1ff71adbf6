"""Target strings: parsing, printing back, machine facts, errors."""
import pytest

from tensorforge.backends import cpu
from tensorforge.target import Target


@pytest.mark.parametrize("text,printed", [
    ("c", "c"), ("llvm", "c"), ("c -mcpu=native", "c"), ("c -O2", "c -O2"),
    ("c -mcpu=x86-64-v3", "c -mcpu=x86-64-v3"), ("c  -O1 -mcpu=haswell", "c -mcpu=haswell -O1"),
    ("cuda -arch=sm_90", "cuda -arch=sm_90"), ("opencl", "opencl"),
])
def test_parse_and_round_trip(text, printed):
    t = Target.parse(text)
    assert str(t) == printed
    assert Target.parse(str(t)) == t
    assert Target.parse(t) is t
    assert hash(t) == hash(Target.parse(printed))


@pytest.mark.parametrize("text,pattern", [
    ("", "empty target string"), ("tpu", "unknown target kind 'tpu'"),
    ("c -mcpu", "bad target option '-mcpu'"), ("c -O7", "bad optimization level '-O7'"),
    ("c -arch=sm_80", "unknown option '-arch=sm_80' for target kind 'c'"),
    ("c fast", "bad target option 'fast'"),
])
def test_bad_strings_name_the_bad_part(text, pattern):
    with pytest.raises(ValueError, match=pattern):
        Target.parse(text)


def test_machine_facts():
    host = Target.parse("c")
    assert host.simd_bytes in (16, 32, 64)
    assert host.simd_lanes("float32") == host.simd_bytes // 4
    assert host.simd_lanes("float64x4") == host.simd_bytes // 8
    assert Target.parse("c -mcpu=x86-64-v3").simd_bytes == 32
    assert Target.parse("c -mcpu=x86-64-v4").simd_lanes("int8") == 64
    assert Target.parse("c -mcpu=some-unknown-cpu").simd_bytes == 16
    assert host.num_cores >= 1
    assert host.l1_cache_bytes >= 4096 and host.l2_cache_bytes >= host.l1_cache_bytes
    assert host.thread_axes == () and host.memory_scopes == ("global", "local")
    assert "threadIdx.x" in Target.parse("cuda").thread_axes


def test_compile_flags_follow_the_target():
    flags = cpu.compile_flags(Target.parse("c -mcpu=x86-64-v3 -O2"))
    assert "-O2" in flags and any(f.endswith("=x86-64-v3") for f in flags)
    assert {"-fPIC", "-shared", "-fopenmp", "-ffp-contract=fast", "-fno-math-errno", "-std=gnu11", "-lm"} <= set(flags)
    assert any(f.endswith("=native") for f in cpu.compile_flags(Target.parse("c")))
    with pytest.raises(ValueError, match="serves target kinds"):
        cpu.compile_flags(Target.parse("cuda"))


def test_predictive_commoning_is_off_with_16_vector_registers_only():
    avx2, avx512 = Target.parse("c -mcpu=x86-64-v3"), Target.parse("c -mcpu=skylake-avx512")
    assert (avx2.vector_registers, avx512.vector_registers) == (16, 32)
    assert "-fno-predictive-commoning" in cpu.compile_flags(avx2)
    assert "-fno-predictive-commoning" not in cpu.compile_flags(avx512)
