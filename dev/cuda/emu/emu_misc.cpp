// kv_write + attn_decode (bf16 and fp8) and the gemm_fp8 kernels (quant / dequant / epilogue; the
// cuBLASLt GEMM replaced by a host double GEMM of the same operands) on the host emulator.
#include "emu.h"
#include <cublasLt.h>
#include "kv_write_emu.inc"
#include "attn_decode_emu.inc"
#undef THREADS
#include "gemm_fp8_emu.inc"
extern "C" {
#include "kdtype.h"
}

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

static int run_attn(int n_seq, int hq, int hkv, int hd, int bs, const int *lens, int dt, float ks, float vs)
{
    int max_len = 0;
    for (int s = 0; s < n_seq; s++) max_len = lens[s] > max_len ? lens[s] : max_len;
    const int mb = (max_len + bs - 1) / bs, n_blocks = n_seq * mb + 3;
    const size_t w = (size_t)hkv * hd, ncache = (size_t)n_blocks * bs * w, esz = (size_t)kv_dtype_bytes(dt);
    int32_t *bt = (int32_t *)malloc((size_t)n_seq * mb * 4), *perm = (int32_t *)malloc((size_t)n_blocks * 4);
    uint8_t *kc = (uint8_t *)emu_alloc(ncache * esz), *vc = (uint8_t *)emu_alloc(ncache * esz);
    uint8_t *kg = (uint8_t *)emu_alloc(ncache * esz), *vg = (uint8_t *)emu_alloc(ncache * esz);
    memset(kc, 0, ncache * esz), memset(vc, 0, ncache * esz), memset(kg, 0, ncache * esz), memset(vg, 0, ncache * esz);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) { int j = (int)(ru32() % (uint32_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (int i = 0; i < n_seq * mb; i++) bt[i] = perm[i];
    for (int s = 0; s < n_seq; s++) {
        int n = lens[s];
        float *k = (float *)malloc((size_t)n * w * 4), *v = (float *)malloc((size_t)n * w * 4);
        int32_t *sm = (int32_t *)malloc((size_t)n * 4);
        for (size_t i = 0; i < (size_t)n * w; i++) { k[i] = runi(-1, 1); v[i] = runi(-1, 1); }
        if (n > 3 && dt == KV_DTYPE_FP8) k[3] = 1000.0f * ks;
        for (int j = 0; j < n; j++) sm[j] = bt[s * mb + j / bs] * bs + j % bs;
        kv_write_dtype_ref(kc, vc, k, v, sm, n, hkv, hd, dt, ks, vs);
        const int ww = hkv * hd;
        if (dt == KV_DTYPE_BF16)
            emu_launch(dim3(n), 256, [&] { kv_write_kernel((uint16_t *)kg, (uint16_t *)vg, k, v, sm, ww); });
        else
            emu_launch(dim3(n), 256, [&] { kv_write_fp8_kernel(kg, vg, k, v, sm, ww, 1.0f / ks, 1.0f / vs); });
        free(k), free(v), free(sm);
    }
    size_t badc = 0;
    for (size_t i = 0; i < ncache * esz; i++) badc += (kc[i] != kg[i]) + (vc[i] != vg[i]);
    const size_t nq = (size_t)n_seq * hq * hd;
    float *q = (float *)malloc(nq * 4), *gate = (float *)malloc(nq * 4), *ref = (float *)malloc(nq * 4), *got = (float *)malloc(nq * 4);
    for (size_t i = 0; i < nq; i++) { q[i] = runi(-1, 1); gate[i] = runi(-3, 3); got[i] = NAN; }
    const float scale = 1.0f / sqrtf((float)hd);
    attn_decode_dtype_ref(ref, NULL, q, gate, kc, vc, dt, ks, vs, bt, lens, n_seq, hq, hkv, hd, bs, mb, max_len, scale);
    const size_t nws = attn_decode_ws_floats(n_seq, hq, hkv, hd, max_len);
    float *ws = (float *)malloc(nws * 4);
    for (size_t i = 0; i < nws; i++) ws[i] = NAN; // splits past a sequence's keys are not written: never read
    const int n_splits = attn_decode_parts(n_seq, hq, max_len); /* the launcher's grid */
    if (dt == KV_DTYPE_BF16)
        emu_launch(dim3(n_splits, hq, n_seq), 256, [&] { attn_split_kernel<uint16_t>(ws, q, (uint16_t *)kg, (uint16_t *)vg, bt, lens, hq, hkv, hd, bs, mb, n_splits, scale, 1.0f); });
    else
        emu_launch(dim3(n_splits, hq, n_seq), 256, [&] { attn_split_kernel<uint8_t>(ws, q, kg, vg, bt, lens, hq, hkv, hd, bs, mb, n_splits, scale * ks, vs); });
    emu_launch(dim3(hq, n_seq), 256, [&] { attn_merge_kernel(got, ws, gate, lens, hq, hd, n_splits, 0); }); /* the launcher's 256 threads (8 warps split the partials) */
    size_t bad = 0;
    double maxe = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= 2e-5 + 1e-4 * fabs(ref[i]))) { if (bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]); bad++; }
        if (e > maxe || e != e) maxe = e;
    }
    printf("attn_decode emu dt=%d seq=%d hq=%d hkv=%d hd=%d bs=%d max_len=%d: cache_bad=%zu max_err=%.3g bad=%zu %s\n", dt,
           n_seq, hq, hkv, hd, bs, max_len, badc, maxe, bad, bad || badc ? "FAIL" : "ok");
    return bad || badc;
}

static int run_gemm(int rows, int n, int k, int sk, int E, int e, int acc, int fallback)
{
    kweight w;
    memset(&w, 0, sizeof(w));
    size_t nw = (size_t)E * n * k;
    uint8_t *d = (uint8_t *)emu_alloc(nw);
    for (size_t i = 0; i < nw; i++) { uint8_t c = (uint8_t)ru32(); if ((c & 0x7f) == 0x7f) c = 0x3f; d[i] = c; }
    w.fmt = KW_FMT_FP8; w.rows = n; w.cols = k; w.row_stride = k; w.expert_stride = E > 1 ? (int64_t)n * k : 0;
    w.data = d; w.scale_kind = sk; w.block_rows = 128; w.block_cols = 128;
    size_t ns = sk == KW_SCALE_TENSOR ? 1 : sk == KW_SCALE_CHANNEL ? (size_t)n : (size_t)((n + 127) / 128) * ((k + 127) / 128);
    w.scale_expert_stride = (int64_t)ns;
    float *s = (float *)malloc(sizeof(float) * ns * E);
    for (size_t i = 0; i < ns * E; i++) s[i] = runi(0.001f, 0.01f);
    w.scale = s;
    size_t nx = (size_t)rows * k, ny = (size_t)rows * n;
    float *x = (float *)emu_alloc(nx * 4), *ref = (float *)malloc(ny * 4), *got = (float *)malloc(ny * 4);
    for (size_t i = 0; i < nx; i++) x[i] = runi(-2, 2);
    if (rows > 2) for (int c = 0; c < k; c++) x[(size_t)k + c] = 0.0f;
    if (rows > 3) x[(size_t)2 * k + 5] = 100.0f;
    for (size_t i = 0; i < ny; i++) ref[i] = got[i] = acc ? runi(-1, 1) : NAN;
    if (acc) memcpy(got, ref, ny * 4);
    gemm_fp8_ref(ref, x, rows, &w, e, acc);
    float *ytmp = (float *)malloc(ny * 4);
    uint8_t *xq = (uint8_t *)emu_alloc(nx);
    float *sx = (float *)malloc(rows * 4);
    uint16_t *xb = (uint16_t *)malloc(nx * 2), *wb = (uint16_t *)malloc((size_t)n * k * 2);
    const int64_t nx64 = (int64_t)nx;
    auto host_gemm_bf16 = [&] {
        for (int t = 0; t < rows; t++)
            for (int r = 0; r < n; r++) {
                double a = 0;
                for (int c = 0; c < k; c++) a += (double)kdtype_bf16_to_f32(xb[(size_t)t * k + c]) * kdtype_bf16_to_f32(wb[(size_t)r * k + c]);
                ytmp[(size_t)t * n + r] = (float)a;
            }
    };
    if (sk == KW_SCALE_BLOCK) {
        emu_launch(dim3(n, CEIL_DIV(k, 256)), 256, [&] { gemm_fp8_dequant_kernel(wb, w, e, 1); });
        emu_launch(dim3((unsigned)CEIL_DIV(nx64, 256)), 256, [&] { gemm_fp8_to_bf16_kernel(xb, x, nx64); });
        host_gemm_bf16();
        emu_launch(dim3(rows, CEIL_DIV(n, 256)), 256, [&] { gemm_fp8_epilogue_kernel(got, ytmp, NULL, NULL, 0, n, acc); });
    } else {
        emu_launch(dim3(rows), 256, [&] { gemm_fp8_quant_kernel(xq, sx, x, k); });
        if (fallback) {
            emu_launch(dim3(n, CEIL_DIV(k, 256)), 256, [&] { gemm_fp8_dequant_kernel(wb, w, e, 0); });
            emu_launch(dim3((unsigned)CEIL_DIV(nx64, 256)), 256, [&] { gemm_fp8_xq_to_bf16_kernel(xb, xq, nx64); });
            host_gemm_bf16();
        } else { /* what cuBLASLt computes: D(n,m) = W(e)[n,:] . xq[m,:] */
            const uint8_t *we = d + (size_t)e * w.expert_stride;
            for (int t = 0; t < rows; t++)
                for (int r = 0; r < n; r++) {
                    double a = 0;
                    for (int c = 0; c < k; c++) a += (double)kdtype_e4m3_to_f32(xq[(size_t)t * k + c]) * kdtype_e4m3_to_f32(we[(size_t)r * w.row_stride + c]);
                    ytmp[(size_t)t * n + r] = (float)a;
                }
        }
        const float *wsc = s + (size_t)e * w.scale_expert_stride;
        emu_launch(dim3(rows, CEIL_DIV(n, 256)), 256, [&] { gemm_fp8_epilogue_kernel(got, ytmp, sx, wsc, sk == KW_SCALE_CHANNEL, n, acc); });
    }
    double amax = 0, se = 0, sr = 0;
    for (size_t i = 0; i < ny; i++) {
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
        se += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    size_t bad = 0;
    for (size_t i = 0; i < ny; i++)
        if (!(fabs((double)got[i] - ref[i]) <= 5e-3 * amax + 5e-3 * fabs(ref[i]))) bad++;
    double rr = sqrt(se / sr);
    printf("gemm_fp8 emu rows=%d n=%d k=%d sk=%d E=%d e=%d acc=%d fallback=%d: rel_rms=%.2e bad=%zu %s\n", rows, n, k, sk, E, e,
           acc, fallback, rr, bad, bad || !(rr <= 1e-3) ? "FAIL" : "ok");
    return bad || !(rr <= 1e-3);
}

int main(int argc, char **argv)
{
    static const int l1[] = {1}, l2[] = {17, 300, 1}, l3[] = {1337, 255}, lq[] = {9, 260};
    int f = 0;
    if (argc > 1 && strcmp(argv[1], "quick") == 0) { /* sanitizer runs */
        f += run_attn(2, 4, 2, 64, 16, lq, KV_DTYPE_BF16, 1, 1);
        f += run_attn(2, 4, 2, 64, 7, lq, KV_DTYPE_FP8, 0.02f, 0.03f);
        f += run_gemm(5, 32, 64, KW_SCALE_CHANNEL, 2, 1, 1, 0);
        f += run_gemm(5, 32, 64, KW_SCALE_BLOCK, 1, 0, 0, 0);
        f += run_gemm(5, 32, 64, KW_SCALE_TENSOR, 1, 0, 0, 1);
        printf("failures=%d\n", f);
        return f != 0;
    }
    f += run_attn(3, 16, 2, 256, 16, l2, KV_DTYPE_BF16, 1, 1);
    f += run_attn(2, 8, 2, 128, 32, l3, KV_DTYPE_FP8, 1, 1);
    f += run_attn(3, 16, 2, 256, 16, l2, KV_DTYPE_FP8, 0.02f, 0.03f);
    f += run_attn(3, 32, 4, 8, 5, l2, KV_DTYPE_FP8, 0.1f, 0.1f);
    f += run_attn(1, 4, 4, 64, 7, l1, KV_DTYPE_FP8, 0.005f, 0.25f);
    for (int sk = 1; sk <= 3; sk++) {
        f += run_gemm(7, 48, 64, sk, 1, 0, 1, 0);
        f += run_gemm(33, 272, 528, sk, 2, 1, 0, 0);
    }
    f += run_gemm(33, 272, 528, KW_SCALE_CHANNEL, 2, 1, 1, 1);
    f += run_gemm(9, 64, 160, KW_SCALE_TENSOR, 1, 0, 0, 1);
    printf("failures=%d\n", f);
    return f != 0;
}
