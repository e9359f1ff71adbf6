/* The machine's fp32 FMA peak: GFLOP/s of independent vector FMA chains, per thread count.
 *
 * What it does: every thread keeps CHAINS vector accumulators in registers and updates each one
 * with acc = acc * a + b (one fused multiply-add) `iters` times.  The chains do not depend on one
 * another, so the core can issue as many FMAs per cycle as it has FMA pipes, and with more chains
 * than latency x pipes (4 x 2 on current x86 cores) the pipes never wait for a result.  Nothing
 * touches memory inside the loop, so the number is the arithmetic ceiling that a conv or GEMM
 * kernel is measured against ("% of peak").
 *
 * Why GCC vector extensions: one source that is 512 bits wide where AVX-512 is available, 256
 * with AVX/AVX2, 128 otherwise (SSE, NEON), and that the compiler turns into vfmadd* / fmla
 * without intrinsics.  Build with -O2 -march=native (FMA contraction is on by default in GNU C).
 *
 * Invariant: each of the FMA_CHAINS statements in the loop body is one vector FMA, so one
 * iteration is FMA_CHAINS * LANES * 2 flops.  a < 1 and b > 0 keep the accumulators near
 * b / (1 - a) = 1: no overflow, no denormals, and the compiler cannot fold the loop away.
 *
 * As a library (what benchmarks/_peak.py loads through ctypes):
 *     double fma_peak_run(int threads, long iters);   seconds for all threads to finish
 *     int fma_peak_vector_bits(void), fma_peak_chains(void);
 *     double fma_peak_clock_ghz(long iters);           core clock from a dependent add chain
 * As a program:
 *     cc -O2 -march=native -fopenmp -DFMA_PEAK_MAIN benchmarks/fma_peak.c -o fma_peak && ./fma_peak 1
 */
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__AVX512F__)
#define VEC_BYTES 64
#define FMA_CHAINS 24          /* 32 zmm registers: 24 accumulators + a + b */
#elif defined(__AVX__)
#define VEC_BYTES 32
#define FMA_CHAINS 12          /* 16 ymm registers: 12 accumulators + a + b */
#else
#define VEC_BYTES 16
#define FMA_CHAINS 12
#endif
#define LANES (VEC_BYTES / 4)

typedef float vfloat __attribute__((vector_size(VEC_BYTES)));

/* Sink for the accumulators, so the chains are live. */
volatile float fma_peak_sink;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* One thread's work: FMA_CHAINS independent chains of `iters` FMAs each. */
static void fma_chains(long iters, float seed) {
    vfloat a = (vfloat){0} + 0.999999f, b = (vfloat){0} + 1e-6f;
#define DECL(k) vfloat c##k = (vfloat){0} + seed + (float)(k) * 1e-3f;
#define STEP(k) c##k = c##k * a + b;
#define SUM(k) total += c##k;
#define REP12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define REP24(X) REP12(X) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) X(20) X(21) X(22) X(23)
#if FMA_CHAINS == 24
#define REP REP24
#else
#define REP REP12
#endif
    REP(DECL)
    for (long i = 0; i < iters; i++) {
        REP(STEP)
    }
    vfloat total = (vfloat){0};
    REP(SUM)
    float s = 0.0f;
    for (int l = 0; l < LANES; l++) s += total[l];
    fma_peak_sink = s;
}

int fma_peak_vector_bits(void) { return VEC_BYTES * 8; }

int fma_peak_chains(void) { return FMA_CHAINS; }

/* Wall-clock seconds for `threads` threads to each run `iters` iterations (FMA_CHAINS * LANES * 2
 * flops per iteration per thread).  Without OpenMP, threads > 1 runs on one thread. */
double fma_peak_run(int threads, long iters) {
    double start = now_seconds();
#ifdef _OPENMP
#pragma omp parallel num_threads(threads)
    fma_chains(iters, 0.5f + 0.01f * (float)omp_get_thread_num());
#else
    (void)threads;
    fma_chains(iters, 0.5f);
#endif
    return now_seconds() - start;
}

/* The core clock in GHz while it runs a chain of dependent integer adds (one cycle each on every
 * x86-64 core), or -1 where the probe has no such chain.  With the 1-thread FMA rate it gives
 * the FMA units per core: flops per second / (clock x lanes x 2). */
double fma_peak_clock_ghz(long iters) {
#if defined(__x86_64__)
    unsigned long x = 0;
    double start = now_seconds();
    for (long i = 0; i < iters; i++) {
        /* 32 dependent adds; the loop counter runs beside them on other ports */
        __asm__ volatile(
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
            "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
            : "+r"(x));
    }
    double elapsed = now_seconds() - start;
    fma_peak_sink = (float)x;
    return 32.0 * (double)iters / elapsed / 1e9;
#else
    (void)iters;
    return -1.0;
#endif
}

#ifdef FMA_PEAK_MAIN
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    long iters = argc > 2 ? atol(argv[2]) : 100000000L;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t = fma_peak_run(threads, iters);
        if (t < best) best = t;
    }
    double flops = 2.0 * FMA_CHAINS * LANES * (double)iters * threads;
    printf("fma peak: %d-bit vectors, %d chains, %d thread(s): %.1f GFLOP/s\n",
           VEC_BYTES * 8, FMA_CHAINS, threads, flops / best / 1e9);
    return 0;
}
#endif
