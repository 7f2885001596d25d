// Random struct kweight fixtures and output checks for the gemv / moe_expert harnesses.
// Weights may be views (cols < row_stride = cols_alloc, as padded checkpoint rows give): the
// padding holds NaN codes (bf16 0x7fc0, e4m3 0x7f) and NaN nvfp4 block scales (0x7f), so a
// kernel that reads past cols into its sums shows NaN. Buffers are exactly sized (ASan).
#pragma once
#include "emu.h"
extern "C" {
#include "kweight.h"
}

static uint64_t kw_rs = 88172645463325252ull;
static uint32_t ru32() { kw_rs ^= kw_rs << 13; kw_rs ^= kw_rs >> 7; kw_rs ^= kw_rs << 17; return (uint32_t)(kw_rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

/* fmt/sk as kweight; E experts of rows x cols (row stride cols_alloc); fp8 block scales br x bc. */
static kweight kw_make(int fmt, int sk, int E, int rows, int cols, int cols_alloc, int br = 128, int bc = 128)
{
    kweight h;
    memset(&h, 0, sizeof(h));
    const size_t n = (size_t)E * rows * cols_alloc;
    h.fmt = fmt; h.rows = rows; h.cols = cols; h.row_stride = cols_alloc;
    h.expert_stride = E > 1 ? (int64_t)rows * cols_alloc : 0;
    if (fmt == KW_FMT_BF16) {
        uint16_t *d = (uint16_t *)emu_alloc(n * 2);
        for (size_t i = 0; i < n; i++) {
            const float v = runi(-1, 1);
            uint32_t u;
            memcpy(&u, &v, 4);
            d[i] = (int)(i % cols_alloc) < cols ? (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16) : 0x7fc0;
        }
        h.data = d;
    } else if (fmt == KW_FMT_FP8) {
        uint8_t *d = (uint8_t *)emu_alloc(n);
        for (size_t i = 0; i < n; i++) {
            uint8_t c = (uint8_t)ru32();
            if ((c & 0x7f) == 0x7f) c = 0x3f;
            d[i] = (int)(i % cols_alloc) < cols ? c : 0x7f;
        }
        h.data = d; h.scale_kind = sk; h.block_rows = br; h.block_cols = bc;
        const size_t ns = sk == KW_SCALE_TENSOR ? 1 : sk == KW_SCALE_CHANNEL ? (size_t)rows
                        : (size_t)((rows + br - 1) / br) * ((cols + bc - 1) / bc);
        h.scale_expert_stride = (int64_t)ns;
        float *s = (float *)emu_alloc(sizeof(float) * ns * E);
        for (size_t i = 0; i < ns * E; i++) s[i] = runi(0.001f, 0.01f);
        h.scale = s;
    } else {
        uint8_t *d = (uint8_t *)emu_alloc(n / 2);
        const size_t sst = (size_t)cols_alloc / 16, nb = (size_t)E * rows * sst;
        uint8_t *bs = (uint8_t *)emu_alloc(nb);
        float *g = (float *)emu_alloc(sizeof(float) * E);
        for (size_t i = 0; i < n / 2; i++) d[i] = (uint8_t)ru32();
        for (size_t i = 0; i < nb; i++) /* 2^-6 .. 448; NaN past cols */
            bs[i] = (i % sst) < (size_t)cols / 16 ? (uint8_t)(0x08 + ru32() % (0x7e - 0x08 + 1)) : 0x7f;
        for (int e = 0; e < E; e++) g[e] = runi(1e-4f, 1e-3f);
        h.data = d; h.bscale = bs; h.bscale_stride = (int64_t)sst;
        h.bscale_expert_stride = E > 1 ? (int64_t)rows * sst : 0;
        h.gscale = g[0]; h.gscale_e = E > 1 ? g : NULL;
    }
    return h;
}

/* x rounded to fp16 (what the tensor / stream kernels stage), for the tight reference */
static void kw_round_f16(float *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = __half2float(__float2half_rn(src[i]));
}

/* Output buffer of n floats + a 16-float guard, all one NaN bit pattern. */
static const uint32_t KW_POISON = 0x7fc0dead;
static float *kw_out(size_t n)
{
    float *p = (float *)emu_alloc((n + 16) * 4);
    for (size_t i = 0; i < n + 16; i++) memcpy(p + i, &KW_POISON, 4);
    return p;
}
static int kw_guard_ok(const float *p, size_t n)
{
    for (size_t i = n; i < n + 16; i++)
        if (memcmp(p + i, &KW_POISON, 4)) return 0;
    return 1;
}

struct kw_cmp {
    double amax, max_err, rel_rms;
    size_t bad;
};
/* bad: |got - ref| > atol_rel * amax + rtol |ref| (NaN is bad). */
static kw_cmp kw_compare(const float *got, const float *ref, size_t n, double atol_rel, double rtol)
{
    kw_cmp c = {0, 0, 0, 0};
    double se = 0, sr = 0;
    for (size_t i = 0; i < n; i++) c.amax = fabs(ref[i]) > c.amax ? fabs(ref[i]) : c.amax;
    for (size_t i = 0; i < n; i++) {
        const double e = fabs((double)got[i] - ref[i]);
        if (!(e <= atol_rel * c.amax + rtol * fabs(ref[i]))) {
            if (c.bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]);
            c.bad++;
        }
        if (e > c.max_err || e != e) c.max_err = e;
        se += e * e;
        sr += (double)ref[i] * ref[i];
    }
    c.rel_rms = sr > 0 ? sqrt(se / sr) : sqrt(se);
    return c;
}
