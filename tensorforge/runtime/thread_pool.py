"""tensorforge's own thread pool: the parallel loops of generated kernels run on it, not on the
OpenMP runtime, so how fast threads hand work over does not depend on OMP_WAIT_POLICY,
GOMP_SPINCOUNT or any other OpenMP setting made for other libraries in the process.

The generated C keeps its `#pragma omp parallel for` loops (GCC outlines each loop body into a
function and calls `GOMP_parallel`, `omp_get_num_threads` and `omp_get_thread_num`); each
kernel library defines those three entry points itself, hidden (codegen/c.py POOL_SHIM), and
forwards them to the pool below.  The pool is one small shared library per process, compiled
once (content-addressed cache) and loaded with RTLD_GLOBAL before any kernel library, so every
library uses the same workers.  A library loaded without it (plain ctypes) runs its loops on
the calling thread.

How the pool works:
- One persistent worker per extra thread, created when a region first asks for that many.
- A region: the caller takes the run lock, stores the job (body, data, team size), then bumps
  the generation counter; each worker waits for the counter to change, runs its share when
  its index is below the team size, and decrements `pending`; the caller runs share 0 and
  waits until `pending` is 0.  Waiting spins for about SPIN_NS (a hand-over in microseconds)
  and then sleeps on a futex, so idle workers take no CPU time.
- Memory ordering: the job fields are plain stores made before the seq_cst increment of
  `generation`; a worker reads them only after an acquire load sees the new generation, so
  it sees the job.  Every worker (in the team or not) decrements `pending` with a release RMW
  after its last read of the job and its last write of outputs; the caller's acquire load that
  sees 0 therefore sees all outputs, and no worker still reads the job when the next one is
  written.  Sleeping uses seq_cst on both sides (waiter: announce, then re-check; waker:
  publish, then read the announcement), so a wake-up is never lost; futex_wait also re-checks
  the word in the kernel.
- A region started while another runs (a kernel called from a second Python thread), or from
  inside a region, runs serially on its caller: never a deadlock, never two jobs at once.
- fork(): the child starts with no workers.  At exit (or unload) idle workers are stopped and
  joined; the library is linked -z nodelete so it is never unmapped under running workers.
"""
from __future__ import annotations

import ctypes
import functools

SPIN_NS = 100_000    # how long a waiting thread spins before it sleeps (0.1 ms)

SOURCE = r"""
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TF_MAX_THREADS 256
#define TF_SPIN_NS %(spin_ns)d

typedef void (*tf_body)(void*);

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t workers[TF_MAX_THREADS];
static uint32_t first_seen[TF_MAX_THREADS];      /* the generation current when a worker was made */
static int32_t n_workers = 0;                     /* workers 1..n_workers; only under run_lock */
static _Atomic uint32_t generation = 0;           /* bumped once per region; a futex word */
static _Atomic int32_t pending = 0;               /* workers yet to finish the region; a futex word */
static _Atomic int32_t sleeping_workers = 0;
static _Atomic int32_t caller_sleeping = 0;
static _Atomic int32_t stopping = 0;
static tf_body job_fn;                            /* the job: written before `generation` moves */
static void* job_data;
static int32_t job_team;
static __thread int32_t tl_num = 0, tl_team = 1;

static void futex_wait(_Atomic void* word, uint32_t value) {
  syscall(SYS_futex, (void*)word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}
static void futex_wake(_Atomic void* word, int count) {
  syscall(SYS_futex, (void*)word, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}
static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}
static int64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spin up to TF_SPIN_NS until *word != value (acquire); returns 1 when it changed. */
static int spin_until_changed(_Atomic uint32_t* word, uint32_t value) {
  int64_t start = 0;
  for (int i = 0;; ++i) {
    if (atomic_load_explicit(word, memory_order_acquire) != value) return 1;
    cpu_relax();
    if ((i & 63) == 63) {
      int64_t t = now_ns();
      if (start == 0) start = t;
      else if (t - start > TF_SPIN_NS) return 0;
    }
  }
}

static void* worker_main(void* arg) {
  int32_t index = (int32_t)(intptr_t)arg;
  uint32_t seen = first_seen[index];
  for (;;) {
    if (!spin_until_changed(&generation, seen)) {
      atomic_fetch_add(&sleeping_workers, 1);                       /* announce, then re-check */
      while (atomic_load(&generation) == seen) futex_wait(&generation, seen);
      atomic_fetch_sub(&sleeping_workers, 1);
    }
    seen = atomic_load_explicit(&generation, memory_order_acquire);
    if (atomic_load_explicit(&stopping, memory_order_acquire)) return NULL;
    if (index < job_team) {
      tl_num = index;
      tl_team = job_team;
      job_fn(job_data);
      tl_num = 0;
      tl_team = 1;
    }
    if (atomic_fetch_sub_explicit(&pending, 1, memory_order_seq_cst) == 1 && atomic_load(&caller_sleeping))
      futex_wake(&pending, 1);
  }
}

/* Under run_lock.  A new worker starts from the generation current now (pthread_create
   publishes first_seen), so it takes part in the region about to be published. */
static int grow(int32_t team) {
  while (n_workers < team - 1 && n_workers < TF_MAX_THREADS - 1) {
    int32_t index = n_workers + 1;
    first_seen[index] = atomic_load(&generation);
    if (pthread_create(&workers[index], NULL, worker_main, (void*)(intptr_t)index) != 0) break;
    n_workers = index;
  }
  return team < n_workers + 1 ? team : n_workers + 1;      /* the team this region gets */
}

static void run_serial(tf_body fn, void* data) {
  int32_t num = tl_num, team = tl_team;
  tl_num = 0;
  tl_team = 1;
  fn(data);
  tl_num = num;
  tl_team = team;
}

void tf_pool_parallel(tf_body fn, void* data, int32_t team) {
  if (team > TF_MAX_THREADS) team = TF_MAX_THREADS;
  if (team <= 1 || tl_team > 1 || pthread_mutex_trylock(&run_lock) != 0) {
    run_serial(fn, data);
    return;
  }
  team = grow(team);
  if (team <= 1) {
    pthread_mutex_unlock(&run_lock);
    run_serial(fn, data);
    return;
  }
  job_fn = fn;
  job_data = data;
  job_team = team;
  atomic_store_explicit(&pending, n_workers, memory_order_relaxed);
  atomic_fetch_add(&generation, 1);                                /* publish the job */
  if (atomic_load(&sleeping_workers) > 0) futex_wake(&generation, INT_MAX);
  tl_num = 0;
  tl_team = team;
  fn(data);
  tl_team = 1;
  int64_t start = 0;
  for (int i = 0; atomic_load_explicit(&pending, memory_order_acquire) != 0; ++i) {
    cpu_relax();
    if ((i & 63) != 63) continue;
    int64_t t = now_ns();
    if (start == 0) { start = t; continue; }
    if (t - start <= TF_SPIN_NS) continue;
    int32_t left = atomic_load(&pending);
    if (left == 0) break;
    atomic_store(&caller_sleeping, 1);                              /* announce, then re-check */
    if (atomic_load(&pending) == left) futex_wait(&pending, (uint32_t)left);
    atomic_store(&caller_sleeping, 0);
  }
  pthread_mutex_unlock(&run_lock);
}

int32_t tf_pool_thread_num(void) { return tl_num; }
int32_t tf_pool_team_size(void) { return tl_team; }
int32_t tf_pool_workers(void) { return n_workers; }

static void reset_in_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  run_lock = fresh;
  n_workers = 0;
  atomic_store(&pending, 0);
  atomic_store(&sleeping_workers, 0);
  atomic_store(&caller_sleeping, 0);
  tl_num = 0;
  tl_team = 1;
}

__attribute__((constructor)) static void tf_pool_init(void) {
  pthread_atfork(NULL, NULL, reset_in_child);
}

__attribute__((destructor)) static void tf_pool_stop(void) {
  if (pthread_mutex_trylock(&run_lock) != 0) return;     /* a region is running: leave it */
  if (n_workers > 0) {
    atomic_store_explicit(&stopping, 1, memory_order_release);
    atomic_fetch_add(&generation, 1);
    futex_wake(&generation, INT_MAX);
    for (int32_t k = 1; k <= n_workers; ++k) pthread_join(workers[k], NULL);
    n_workers = 0;
  }
  pthread_mutex_unlock(&run_lock);
}
""" % {"spin_ns": SPIN_NS}

FLAGS = ["-O2", "-fPIC", "-shared", "-pthread", "-std=gnu11", "-Wl,-z,nodelete"]


@functools.lru_cache(maxsize=1)
def load() -> ctypes.CDLL:
    """The pool library, compiled once per machine and loaded into the global symbol scope
    (kernel libraries loaded after it bind their weak references to its entry points)."""
    from .compile import compile_source
    lib = ctypes.CDLL(compile_source(SOURCE, FLAGS), mode=ctypes.RTLD_GLOBAL)
    lib.tf_pool_workers.restype = ctypes.c_int32
    return lib


def workers() -> int:
    """How many worker threads the pool has started (besides the calling thread)."""
    return int(load().tf_pool_workers())
