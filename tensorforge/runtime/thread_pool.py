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
- A region of `team` shares (share k is what OpenMP's static schedule gives thread k): the
  caller takes the run lock, stores the job (body, data, team), resets `claim` to (new
  generation, share 0) and then bumps `generation`; the caller and every woken worker claim
  shares with a CAS on `claim` and run them, counting finished shares in `done`; the caller
  returns when `done` reaches the team.  Shares are claimed, not assigned: a worker that a
  busy machine has not scheduled yet delays nothing, the caller runs its share too.
  Waiting spins for about SPIN_NS (a hand-over in microseconds) and then sleeps on a futex,
  so idle workers take no CPU time.
- Memory ordering: the caller closes `claim`, writes the job fields, opens `claim` and
  stores `generation`, all seq_cst; a worker reads the fields after it sees the generation,
  and its claiming CAS on (generation, k < team) proves that the fields it read were this
  region's (run_shares).  Each finished share adds to `done` (seq_cst,
  after the share's outputs); the caller's acquire load that sees the whole team therefore
  sees all outputs, and only then may it write the next job.  Sleeping uses seq_cst on both
  sides (waiter: announce, then re-check; waker: publish, then read the announcement), so a
  wake-up is never lost; futex_wait also re-checks the word in the kernel.
- A region started while another runs (a kernel called from a second Python thread), or from
  inside a region, runs serially on its caller: never a deadlock, never two jobs at once.
- Kernel-local buffers (a Winograd conv's transformed tiles, a packed panel) come from
  tf_pool_alloc and go back through tf_pool_free, which keeps up to KEEP_BLOCKS freed blocks
  (KEEP_BYTES in all) for the next request of a size it fits (at most twice the request), so a
  kernel called again reuses its buffers.  A request scans the slots' size hints and takes a
  block only where the hint fits, so a miss costs a few loads, not an atomic per slot.  With
  malloc and free per call, glibc hands large blocks back to the system when they are at the
  top of the heap, and each call then faulted its pages in again: one instance of an 8 -> 16
  channel Winograd conv on 112x112 ran in 2.3 ms instead of 0.45, depending only on where its
  buffers fell.  Slots are taken and filled with atomic exchanges (the block's size is read
  only by the thread that took it).
- fork(): the child starts with no workers.  At exit (or unload) idle workers are stopped and
  joined; the library is linked -z nodelete so it is never unmapped under running workers.
"""
from __future__ import annotations

import ctypes
import functools

SPIN_NS = 100_000    # how long a waiting thread spins before it sleeps (0.1 ms)
KEEP_BLOCKS = 32     # freed kernel-local buffers kept for reuse ...
KEEP_MIB = 256       # ... and their total size at most

SOURCE = r"""
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define TF_MAX_THREADS 256
#define TF_SPIN_NS %(spin_ns)d
#define CLOSED 0xFFFFFFFFu                        /* share count of a region being set up */

typedef void (*tf_body)(void*);

static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_t workers[TF_MAX_THREADS];
static uint32_t first_seen[TF_MAX_THREADS];      /* the generation current when a worker was made */
static int32_t n_workers = 0;                     /* workers 1..n_workers; only under run_lock */
static _Atomic uint32_t generation = 0;           /* bumped once per region; a futex word */
static _Atomic uint64_t claim = 0;                /* (generation << 32) | next unclaimed share */
static _Atomic uint32_t done = 0;                 /* shares of the region finished; a futex word */
static _Atomic int32_t sleeping_workers = 0;
static _Atomic int32_t caller_sleeping = 0;
static _Atomic int32_t stopping = 0;
static _Atomic(tf_body) job_fn;                   /* the job, valid while its shares are claimed */
static _Atomic(void*) job_data;
static _Atomic int32_t job_team;
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

/* Claim and run shares of region `gen` until none is left (or the region is over).  The
   job fields are read before the claiming CAS, all seq_cst: the caller closes `claim`
   (CLOSED) before it writes the fields of the next region, so if a read saw a newer field, the
   CAS comes after the closing store in the single seq_cst order and fails.  A CAS that
   succeeds at (gen, k < team) therefore ran against the fields of region `gen`. */
static void run_shares(uint32_t gen) {
  tf_body fn = atomic_load(&job_fn);
  void* data = atomic_load(&job_data);
  int32_t team = atomic_load(&job_team);
  uint64_t c = atomic_load(&claim);
  for (;;) {
    if ((uint32_t)(c >> 32) != gen || (uint32_t)c >= (uint32_t)team) return;
    if (!atomic_compare_exchange_weak(&claim, &c, c + 1)) continue;
    tl_num = (int32_t)(uint32_t)c;
    tl_team = team;
    fn(data);
    tl_num = 0;
    tl_team = 1;
    if (atomic_fetch_add_explicit(&done, 1, memory_order_seq_cst) + 1 == (uint32_t)team &&
        atomic_load(&caller_sleeping))
      futex_wake(&done, 1);
    c = atomic_load_explicit(&claim, memory_order_acquire);
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
    run_shares(seen);
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
  uint32_t gen = atomic_load_explicit(&generation, memory_order_relaxed) + 1;
  /* close the old region before the job fields change (see run_shares), then open the new one */
  atomic_store(&claim, ((uint64_t)gen << 32) | CLOSED);
  atomic_store(&job_fn, fn);
  atomic_store(&job_data, data);
  atomic_store(&job_team, team);
  atomic_store_explicit(&done, 0, memory_order_relaxed);
  atomic_store(&claim, (uint64_t)gen << 32);
  atomic_store(&generation, gen);                                    /* publish the job */
  if (atomic_load(&sleeping_workers) > 0) futex_wake(&generation, INT_MAX);
  run_shares(gen);               /* the caller claims shares too: a late worker delays nothing */
  int64_t start = 0;
  for (int i = 0; atomic_load_explicit(&done, memory_order_acquire) != (uint32_t)team; ++i) {
    cpu_relax();                 /* a worker is finishing a share it claimed */
    if ((i & 63) != 63) continue;
    int64_t t = now_ns();
    if (start == 0) { start = t; continue; }
    if (t - start <= TF_SPIN_NS) continue;
    uint32_t finished = atomic_load(&done);
    if (finished == (uint32_t)team) break;
    atomic_store(&caller_sleeping, 1);                              /* announce, then re-check */
    if (atomic_load(&done) == finished) futex_wait(&done, finished);
    atomic_store(&caller_sleeping, 0);
  }
  atomic_thread_fence(memory_order_acquire);
  pthread_mutex_unlock(&run_lock);
}

#define KEEP_BLOCKS %(keep_blocks)d
#define KEEP_BYTES ((size_t)%(keep_mib)d << 20)
#define BLOCK_HEADER 64                           /* the block's size; keeps 64-byte alignment */
static _Atomic(void*) kept[KEEP_BLOCKS];
static atomic_size_t kept_size[KEEP_BLOCKS];      /* a hint: the size of the block last kept there */
static atomic_size_t kept_bytes;

static int fits(size_t size, size_t n) { return size >= n && size / 2 <= n; }

static void keep_or_free(void* block) {
  size_t size = *(size_t*)block;
  if (atomic_fetch_add(&kept_bytes, size) + size <= KEEP_BYTES) {
    for (int k = 0; k < KEEP_BLOCKS; ++k) {
      void* empty = NULL;
      if (atomic_load_explicit(&kept[k], memory_order_relaxed) == NULL
          && atomic_compare_exchange_strong(&kept[k], &empty, block)) {
        atomic_store_explicit(&kept_size[k], size, memory_order_relaxed);
        return;
      }
    }
  }
  atomic_fetch_sub(&kept_bytes, size);
  free(block);
}

void* tf_pool_alloc(size_t n) {
  for (int k = 0; k < KEEP_BLOCKS; ++k) {
    if (!fits(atomic_load_explicit(&kept_size[k], memory_order_relaxed), n)) continue;
    void* block = atomic_exchange(&kept[k], NULL);
    if (block == NULL) continue;
    size_t size = *(size_t*)block;       /* read once the block is ours: the hint may be stale */
    atomic_fetch_sub(&kept_bytes, size);
    if (fits(size, n)) return (char*)block + BLOCK_HEADER;
    keep_or_free(block);
  }
  if (n > SIZE_MAX - BLOCK_HEADER) return NULL;
  void* block = NULL;
  if (posix_memalign(&block, BLOCK_HEADER, n + BLOCK_HEADER) != 0) return NULL;
  *(size_t*)block = n;
  return (char*)block + BLOCK_HEADER;
}

void tf_pool_free(void* p) {
  if (p != NULL) keep_or_free((char*)p - BLOCK_HEADER);
}

int32_t tf_pool_thread_num(void) { return tl_num; }
int32_t tf_pool_team_size(void) { return tl_team; }
int32_t tf_pool_workers(void) { return n_workers; }

static void reset_in_child(void) {
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
  run_lock = fresh;
  n_workers = 0;
  atomic_store(&claim, (uint64_t)atomic_load(&generation) << 32);
  atomic_store(&done, 0);
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
""" % {"spin_ns": SPIN_NS, "keep_blocks": KEEP_BLOCKS, "keep_mib": KEEP_MIB}

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
