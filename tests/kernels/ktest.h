/* ktest: helpers shared by the GPU-vs-reference kernel tests: skip without a GPU, seeded random
 * data, device buffers that abort on error, and a tolerance check that prints the first
 * mismatches with their index. */
#ifndef TESTS_KTEST_H
#define TESTS_KTEST_H

#include <stddef.h>
#include <stdint.h>

/* Exit 77 (skipped) when no CUDA device is usable. */
void ktest_require_gpu(void);
/* xorshift64* generator; ktest_seed() resets it. */
void ktest_seed(uint64_t s);
float ktest_uniform(float lo, float hi);
uint32_t ktest_u32(void);
void ktest_fill(float *x, size_t n, float lo, float hi);
/* Device memory: alloc + copy from host (n bytes); aborts on failure. */
void *ktest_dev_from(const void *host, size_t n);
void *ktest_dev_alloc(size_t n);
/* Poisoned (NaN) device buffer of n floats, so unwritten outputs fail the comparison. */
float *ktest_dev_poison(size_t n);
void ktest_to_host(void *host, const void *dev, size_t n);
void ktest_sync(void);
void ktest_free(void *dev);
/* Compare got vs ref: |got-ref| <= atol + rtol*|ref| (NaN fails). Prints up to 5 mismatches and
 * the max errors under `what`. Returns the number of mismatches. */
size_t ktest_compare(const char *what, const float *got, const float *ref, size_t n, double atol,
                     double rtol);
/* Time fn(arg) with CUDA events: median of reps after warm-up, in microseconds. */
double ktest_time_us(void (*fn)(void *), void *arg, int warmup, int reps);
/* Mean microseconds per call of reps calls issued back to back between one pair of events (the
 * host's launch gap hidden as in a queue; ktest_time_us times each call alone, launch included). */
double ktest_time_us_b2b(void (*fn)(void *), void *arg, int warmup, int reps);

#endif
