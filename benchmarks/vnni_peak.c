/* The machine's int8 dot-product peak: GOP/s of independent `vpdpbusd` chains on one thread
 * (AVX-512 VNNI, 16 int32 lanes, 4 u8 x s8 products per lane: 128 ops per instruction; or
 * AVX-VNNI, 8 lanes: 64 ops).
 *
 * What it does: CHAINS accumulators in registers, each updated with acc = dpbusd(acc, a, b)
 * `iters` times.  The chains are independent, so the core issues as many dot products per cycle
 * as it has ports for; nothing touches memory in the loop.  An op is a multiply or an add, as
 * for FLOPs (one u8 x s8 product accumulated = 2 ops).
 *
 * As a library (benchmarks/_peak_int8.py loads it through ctypes):
 *     double vnni_peak_run(long iters);   seconds
 *     int vnni_peak_lanes(void);          16, 8, or 0 when the CPU has neither unit
 */
#include <immintrin.h>
#include <stdint.h>
#include <time.h>

/* Named accumulators, and the instruction as inline assembly: with the intrinsic GCC 12 moves
 * and spills the accumulators around every vpdpbusd, which measures its register shuffling. */
#define CHAINS 20
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) \
                X(14) X(15) X(16) X(17) X(18) X(19)

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

#define DECL512(n) __m512i acc##n = _mm512_set1_epi32(n);
#define STEP512(n) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc##n) : "v"(a), "v"(b));
#define SUM512(n) s = _mm512_add_epi32(s, acc##n);
__attribute__((target("avx512f,avx512vnni"))) static double run512(long iters) {
  const __m512i a = _mm512_set1_epi32(0x01010101), b = _mm512_set1_epi32(0x01020102);
  EACH(DECL512)
  double t0 = now();
  for (long i = 0; i < iters; ++i) {
    EACH(STEP512)
  }
  double t = now() - t0;
  __m512i s = _mm512_setzero_si512();
  EACH(SUM512)
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return t;
}

#define DECL256(n) __m256i acc##n = _mm256_set1_epi32(n);
#define STEP256(n) __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+v"(acc##n) : "v"(a), "v"(b));
#define SUM256(n) s = _mm256_add_epi32(s, acc##n);
__attribute__((target("avx2,avxvnni"))) static double run256(long iters) {
  const __m256i a = _mm256_set1_epi32(0x01010101), b = _mm256_set1_epi32(0x01020102);
  EACH(DECL256)
  double t0 = now();
  for (long i = 0; i < iters; ++i) {
    EACH(STEP256)
  }
  double t = now() - t0;
  __m256i s = _mm256_setzero_si256();
  EACH(SUM256)
  volatile int sink = _mm256_extract_epi32(s, 1);
  (void)sink;
  return t;
}

int vnni_peak_lanes(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512vnni")) return 16;
#if __GNUC__ >= 11
  if (__builtin_cpu_supports("avxvnni")) return 8;
#endif
  return 0;
}

/* ops per call: iters * chains * lanes * 4 products * 2 */
double vnni_peak_run(long iters) {
  int lanes = vnni_peak_lanes();
  return lanes == 16 ? run512(iters) : lanes == 8 ? run256(iters) : -1.0;
}

int vnni_peak_chains(void) { return CHAINS; }
