/* ktest: shared helpers of the kernel tests (see ktest.h). */
#include "ktest.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

void ktest_require_gpu(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        fprintf(stderr, "SKIPPED: no CUDA device\n");
        exit(77);
    }
}

void ktest_seed(uint64_t s)
{
    rng_state = s ? s : 1;
}

uint32_t ktest_u32(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

float ktest_uniform(float lo, float hi)
{
    return lo + (hi - lo) * (float)(ktest_u32() >> 8) / 16777216.0f;
}

void ktest_fill(float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = ktest_uniform(lo, hi);
}

static void check(cudaError_t e, const char *what)
{
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

void *ktest_dev_alloc(size_t n)
{
    void *p = NULL;
    check(cudaMalloc(&p, n ? n : 16), "cudaMalloc");
    return p;
}

void *ktest_dev_from(const void *host, size_t n)
{
    void *p = ktest_dev_alloc(n);
    check(cudaMemcpy(p, host, n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
    return p;
}

float *ktest_dev_poison(size_t n)
{
    float *p = ktest_dev_alloc(n * sizeof(float));
    check(cudaMemset(p, 0xff, n * sizeof(float)), "cudaMemset"); /* 0xffffffff = NaN */
    return p;
}

void ktest_to_host(void *host, const void *dev, size_t n)
{
    check(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

void ktest_sync(void)
{
    check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

void ktest_free(void *dev)
{
    if (dev)
        check(cudaFree(dev), "cudaFree");
}

size_t ktest_compare(const char *what, const float *got, const float *ref, size_t n, double atol,
                     double rtol)
{
    size_t bad = 0;
    double maxabs = 0.0, maxrel = 0.0;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i], d = fabs(g - r);
        if (!(d <= atol + rtol * fabs(r))) {
            if (bad < 5)
                fprintf(stderr, "  %s: mismatch at %zu: got %.9g ref %.9g\n", what, i, g, r);
            bad++;
        }
        if (d > maxabs || isnan(d))
            maxabs = d;
        if (fabs(r) > 1e-6 && d / fabs(r) > maxrel)
            maxrel = d / fabs(r);
    }
    fprintf(stderr, "%s: n=%zu mismatches=%zu max_abs=%.3g max_rel=%.3g %s\n", what, n, bad, maxabs,
            maxrel, bad ? "FAIL" : "ok");
    return bad;
}

double ktest_time_us(void (*fn)(void *), void *arg, int warmup, int reps)
{
    cudaEvent_t a, b;
    float *ts = malloc(sizeof(float) * (size_t)reps);
    double med;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < warmup; i++)
        fn(arg);
    for (int i = 0; i < reps; i++) {
        check(cudaEventRecord(a, 0), "cudaEventRecord");
        fn(arg);
        check(cudaEventRecord(b, 0), "cudaEventRecord");
        check(cudaEventSynchronize(b), "cudaEventSynchronize");
        check(cudaEventElapsedTime(&ts[i], a, b), "cudaEventElapsedTime");
    }
    for (int i = 1; i < reps; i++) /* insertion sort: reps is small */
        for (int j = i; j > 0 && ts[j] < ts[j - 1]; j--) {
            float t = ts[j];
            ts[j] = ts[j - 1];
            ts[j - 1] = t;
        }
    med = ts[reps / 2] * 1000.0;
    free(ts);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return med;
}

double ktest_time_us_b2b(void (*fn)(void *), void *arg, int warmup, int reps)
{
    cudaEvent_t a, b;
    float ms = 0.0f;
    check(cudaEventCreate(&a), "cudaEventCreate");
    check(cudaEventCreate(&b), "cudaEventCreate");
    for (int i = 0; i < warmup; i++)
        fn(arg);
    check(cudaEventRecord(a, 0), "cudaEventRecord");
    for (int i = 0; i < reps; i++)
        fn(arg);
    check(cudaEventRecord(b, 0), "cudaEventRecord");
    check(cudaEventSynchronize(b), "cudaEventSynchronize");
    check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms * 1000.0 / reps;
}
