"""The thread pool parallel loops run on: shares, the OpenMP runtime left out, concurrent
callers, fork, exit, and libraries loaded without the pool."""
import ctypes
import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

from tensorforge.codegen.c import POOL_SHIM
from tensorforge.runtime import thread_pool
from tensorforge.runtime.compile import compile_source
from tensorforge.runtime.module import load_library

# Each iteration records which thread ran it and the team size it saw.
SOURCE = "#include <stdint.h>\nint32_t tf_num_threads = 1;\n" + POOL_SHIM + """
int omp_get_thread_num(void);
int omp_get_num_threads(void);
int32_t who(int32_t* out, int32_t n) {
  #pragma omp parallel for num_threads(tf_num_threads) schedule(static)
  for (int32_t i = 0; i < n; ++i) out[i] = omp_get_thread_num() * 1000 + omp_get_num_threads();
  return 0;
}
"""
FLAGS = ["-O2", "-fPIC", "-shared", "-fopenmp", "-Wl,--as-needed", "-std=gnu11"]


@pytest.fixture(scope="module")
def path():
    return compile_source(SOURCE, FLAGS)


def _run(lib, team: int, n: int = 12) -> np.ndarray:
    ctypes.c_int32.in_dll(lib, "tf_num_threads").value = team
    out = np.full(n, -1, np.int32)
    assert lib.who(out.ctypes.data_as(ctypes.c_void_p), n) == 0
    return out


def _static_shares(team: int, n: int) -> np.ndarray:
    """OpenMP's schedule(static) without a chunk: contiguous blocks, the first n % team one longer."""
    sizes = [n // team + (k < n % team) for k in range(team)]
    return np.repeat([k * 1000 + team for k in range(team)], sizes).astype(np.int32)


def test_parallel_loop_runs_its_shares_on_the_pool(path):
    lib = load_library(path)
    for team in (2, 3, 1, 2):
        np.testing.assert_array_equal(_run(lib, team), _static_shares(team, 12))
    assert thread_pool.workers() >= 2


def test_kernel_libraries_do_not_use_the_openmp_runtime(path):
    """OMP_WAIT_POLICY and friends set for other libraries do not reach tensorforge's loops:
    a 2-thread kernel built by the CPU backend runs without libgomp in the process."""
    script = textwrap.dedent("""
        import numpy as np, tensorforge as tf
        from tensorforge import te
        A = te.placeholder((4096,), name="A")
        B = te.compute((4096,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        xo, xi = s[B].split(B.op.axis[0], factor=256)
        s[B].parallel(xo)
        m = tf.build(s, [A, B], target="c")
        tf.runtime.set_num_threads(2)
        a = np.arange(4096, dtype="float32"); b = np.empty_like(a)
        m(a, b)
        assert np.array_equal(b, 2 * a)
        maps = open("/proc/self/maps").read()
        assert "libgomp" not in maps, "libgomp loaded"
        from tensorforge.runtime import thread_pool
        assert thread_pool.workers() >= 1
        print("ok")
    """)
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", GOMP_SPINCOUNT="0", OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_without_the_pool_loops_run_on_the_caller(path):
    script = (f"import ctypes, numpy as np\nlib = ctypes.CDLL({path!r})\n"
              "ctypes.c_int32.in_dll(lib, 'tf_num_threads').value = 2\n"
              "out = np.zeros(8, np.int32)\nlib.who(out.ctypes.data_as(ctypes.c_void_p), 8)\n"
              "print(out.tolist())\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str([1] * 8)


def test_concurrent_callers_neither_deadlock_nor_mix_jobs(path):
    """Several Python threads calling 2-thread kernels at once (ctypes releases the GIL): each
    call runs either on the pool or, while the pool is busy, alone on its caller."""
    lib = load_library(path)
    ctypes.c_int32.in_dll(lib, "tf_num_threads").value = 2
    shares, serial = _static_shares(2, 64), np.ones(64, np.int32)
    bad = []

    def caller():
        for _ in range(300):
            out = np.full(64, -1, np.int32)
            lib.who(out.ctypes.data_as(ctypes.c_void_p), 64)
            if not (np.array_equal(out, shares) or np.array_equal(out, serial)):
                bad.append(out)

    threads = [threading.Thread(target=caller) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a kernel call did not return"
    assert not bad, bad[0]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_gets_a_pool_of_its_own(path):
    script = textwrap.dedent(f"""
        import ctypes, os, numpy as np
        from tensorforge.runtime.module import load_library
        lib = load_library({path!r})
        ctypes.c_int32.in_dll(lib, "tf_num_threads").value = 2
        def run():
            out = np.zeros(10, np.int32)
            lib.who(out.ctypes.data_as(ctypes.c_void_p), 10)
            return out.tolist()
        want = [2] * 5 + [1002] * 5
        assert run() == want
        pid = os.fork()
        if pid == 0:
            os._exit(0 if run() == want else 3)
        _, status = os.waitpid(pid, 0)
        print("child", os.waitstatus_to_exitcode(status))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "child 0"


BUSY_SOURCE = "#include <stdint.h>\nint32_t tf_num_threads = 1;\n" + POOL_SHIM + """
int32_t busy(double* out, int32_t n, int32_t steps) {
  #pragma omp parallel for num_threads(tf_num_threads) schedule(static)
  for (int32_t i = 0; i < n; ++i) {
    double x = i;
    for (int32_t k = 0; k < steps; ++k) x = x * 0.999999 + 1.0;
    out[i] = x;
  }
  return 0;
}
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs sched_setaffinity")
def test_two_threads_sharing_one_cpu_finish_with_every_share_done():
    """On a busy machine the caller and a worker can share one CPU.  Pinned to one CPU, every
    share of many back-to-back 2-thread loops is computed: a thread waiting for the other (which
    needs the same CPU) spins only about SPIN_NS before it sleeps, so the loops finish."""
    path = compile_source(BUSY_SOURCE, FLAGS)
    script = textwrap.dedent(f"""
        import ctypes, os
        os.sched_setaffinity(0, {{sorted(os.sched_getaffinity(0))[-1]}})   # before any thread starts
        from tensorforge.runtime.module import load_library
        lib = load_library({path!r})
        ctypes.c_int32.in_dll(lib, "tf_num_threads").value = 2
        want = []
        for i in range(16):
            x = float(i)
            for _ in range(2000):
                x = x * 0.999999 + 1.0
            want.append(x)
        for _ in range(200):
            out = (ctypes.c_double * 16)()
            lib.busy(out, 16, 2000)
            # (a compiler may contract the multiply-add: the same values up to rounding)
            assert all(abs(a - b) <= 1e-9 * abs(b) for a, b in zip(out, want)), list(out)
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def _pool_allocator():
    lib = thread_pool.load()
    lib.tf_pool_alloc.restype = ctypes.c_void_p
    lib.tf_pool_alloc.argtypes = [ctypes.c_size_t]
    lib.tf_pool_free.argtypes = [ctypes.c_void_p]
    return lib.tf_pool_alloc, lib.tf_pool_free


def test_freed_kernel_buffers_are_reused_for_requests_they_fit():
    """A kernel called again gets its buffers back instead of new pages from the system: a freed
    block serves the next request of at most its size (and at least half of it), 64-byte
    aligned; a block too large to keep (the cache holds KEEP_MIB in all) goes back to the heap."""
    alloc, free = _pool_allocator()
    size = 3 << 20
    first = alloc(size)
    assert first % 64 == 0
    ctypes.memset(first, 1, size)
    free(first)
    again = alloc(size - 1000)
    assert again == first
    other = alloc(size)                      # the kept block is in use: a new one
    assert other not in (None, first)
    free(again)
    small = alloc(4096)                      # far smaller than what is kept: not that block
    assert small != first
    free(small)
    free(other)
    huge = alloc((thread_pool.KEEP_MIB + 1) << 20)
    assert huge is not None
    free(huge)                               # not kept: freed (a later request gets new memory)
    assert alloc(1 << 62) is None            # fails like an exhausted heap


def test_pool_allocator_under_concurrent_threads():
    alloc, free = _pool_allocator()
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(300):
            n = int(rng.integers(64, 1 << 18))
            p = alloc(n)
            if p is None or p % 64:
                errors.append(p)
                return
            ctypes.memset(p, seed, n)
            if ctypes.string_at(p + n - 1, 1) != bytes([seed]):
                errors.append("overwritten")
            free(p)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
