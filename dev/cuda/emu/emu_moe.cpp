// moe_grouped kernels (the real source, launchers cut) on the host emulator vs moe_grouped_ref.
#include "emu.h"
#include <type_traits>
#include "moe_grouped_emu.inc"

extern "C" {
#include "kdtype.h"
}

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

static kweight make_w(int fmt, int sk, int E, int rows, int cols)
{
    kweight h;
    memset(&h, 0, sizeof(h));
    size_t n = (size_t)E * rows * cols;
    h.fmt = fmt; h.rows = rows; h.cols = cols; h.row_stride = cols;
    h.expert_stride = E > 1 ? (int64_t)rows * cols : 0;
    if (fmt == KW_FMT_BF16) {
        uint16_t *d = (uint16_t *)malloc(n * 2);
        for (size_t i = 0; i < n; i++) d[i] = kdtype_f32_to_bf16(runi(-1, 1));
        h.data = d;
    } else if (fmt == KW_FMT_FP8) {
        uint8_t *d = (uint8_t *)malloc(n);
        for (size_t i = 0; i < n; i++) { uint8_t c = (uint8_t)ru32(); if ((c & 0x7f) == 0x7f) c = 0x3f; d[i] = c; }
        h.data = d; h.scale_kind = sk; h.block_rows = 128; h.block_cols = 128;
        size_t ns = sk == KW_SCALE_TENSOR ? 1 : sk == KW_SCALE_CHANNEL ? (size_t)rows
                  : (size_t)((rows + 127) / 128) * ((cols + 127) / 128);
        h.scale_expert_stride = (int64_t)ns;
        float *s = (float *)malloc(sizeof(float) * ns * E);
        for (size_t i = 0; i < ns * E; i++) s[i] = runi(0.001f, 0.01f);
        h.scale = s;
    } else {
        uint8_t *d = (uint8_t *)malloc(n / 2);
        size_t nb = (size_t)E * rows * (cols / 16);
        uint8_t *bs = (uint8_t *)malloc(nb);
        float *g = (float *)malloc(sizeof(float) * E);
        for (size_t i = 0; i < n / 2; i++) d[i] = (uint8_t)ru32();
        for (size_t i = 0; i < nb; i++) bs[i] = (uint8_t)(0x08 + ru32() % (0x7e - 0x08 + 1));
        for (int e = 0; e < E; e++) g[e] = runi(1e-4f, 1e-3f);
        h.data = d; h.bscale = bs; h.bscale_stride = cols / 16;
        h.bscale_expert_stride = E > 1 ? (int64_t)rows * (cols / 16) : 0;
        h.gscale = g[0]; h.gscale_e = E > 1 ? g : NULL;
    }
    return h;
}

static int run(int fmt, int gsk, int dsk, int n_tok, int E, int k, int H, int I, int acc, int skew,
               int bm)
{
    kweight gu = make_w(fmt, gsk, E, 2 * I, H), dn = make_w(fmt, dsk, E, H, I);
    size_t nx = (size_t)n_tok * H, ns = (size_t)n_tok * k;
    float *x = (float *)emu_alloc(nx * 4), *w = (float *)malloc(ns * 4);
    float *ref = (float *)malloc(nx * 4), *got = (float *)malloc(nx * 4);
    int32_t *ids = (int32_t *)malloc(ns * 4);
    for (size_t i = 0; i < nx; i++) x[i] = runi(-1, 1);
    for (size_t i = 0; i < ns; i++) w[i] = runi(0, 1);
    for (size_t i = 0; i < nx; i++) ref[i] = got[i] = acc ? runi(-1, 1) : NAN;
    if (acc) memcpy(got, ref, nx * 4);
    for (size_t i = 0; i < ns; i++) ids[i] = (int32_t)(ru32() % (uint32_t)(skew && (i % 5) ? 2 : E));
    if (ns > 3) ids[3] = -1;
    if (ns > 6) ids[6] = E;
    size_t wsf = moe_grouped_ws_floats(n_tok, k, E, I, H);
    float *ws = (float *)emu_alloc(wsf * 4);
    for (size_t i = 0; i < wsf; i++) ws[i] = NAN;
    if (moe_grouped_ref(ref, x, ids, w, n_tok, k, E, &gu, &dn, acc) != 0) { printf("ref failed\n"); return 1; }
    const int n_slots = n_tok * k;
    const mg_ws s = mg_ws_split(ws, (size_t)n_slots, E, I);
    const int tiles = (int)(CEIL_DIV(n_slots, bm) + E);
    emu_launch(dim3(1), MG_PLAN_THREADS, [&] { moe_grouped_plan_kernel(s, ids, n_slots, E, bm); },
               sizeof(int) * (3 * (size_t)E + 1));
    /* as the launcher: the pipelined NVFP4 kernel where nvt_ok (the 16-row tiles always,
     * the 64-row ones with MOE_GROUPED_PIPE64, also at 1 x 4 warps: MOE_GROUPED_PIPE64_COLS,
     * checked bit for bit against the 2 x 2 grid), each checked bit for bit against the plain
     * kernel of the same tile on the same plan (which runs second and feeds the combine) */
    int piped = 0;
    nvt_rows rg;
    memset(&rg, 0, sizeof rg);
    rg.tile_e = s.tile_e; rg.tile_r0 = s.tile_r0; rg.offsets = s.offsets; rg.perm = s.perm;
    rg.top_k = k; rg.x = x; rg.h = s.h; rg.h_out = s.h; rg.y = s.ys;
    auto gemms = [&](auto bmc) {
        constexpr int BM = decltype(bmc)::value, BK = BM == 16 ? MG_BK_SMALL : MG_BK;
        if (nvt_ok(&gu)) {
            piped |= 1;
            emu_launch(dim3(CEIL_DIV(I, MG_BN / 2), tiles), MG_THREADS,
                       [&] { nvfp4_tile_kernel<NVT_GATE_UP, BM>(gu, rg, I); });
            const size_t nh = (size_t)s.offsets[E] * I; /* rows of routed slots */
            uint16_t *h1 = (uint16_t *)malloc(nh * 2 + 2);
            memcpy(h1, s.h, nh * 2);
            if (BM == 64) { /* MOE_GROUPED_PIPE64_COLS: warps 1 x 4, the same bits */
                memset(s.h, 0xff, nh * 2);
                emu_launch(dim3(CEIL_DIV(I, MG_BN / 2), tiles), MG_THREADS,
                           [&] { nvfp4_tile_kernel<NVT_GATE_UP, BM, 1>(gu, rg, I); });
                if (memcmp(h1, s.h, nh * 2)) { printf("  pipelined 1x4 gate_up differs from 2x2\n"); piped |= 4; }
            }
            emu_launch(dim3(CEIL_DIV(I, MG_BN / 2), tiles), MG_THREADS,
                       [&] { moe_grouped_gemm_kernel<true, BM, BK>(gu, s, x, k, I); });
            if (memcmp(h1, s.h, nh * 2)) { printf("  pipelined gate_up differs from the plain kernel\n"); piped |= 4; }
            free(h1);
        } else {
            emu_launch(dim3(CEIL_DIV(I, MG_BN / 2), tiles), MG_THREADS,
                       [&] { moe_grouped_gemm_kernel<true, BM, BK>(gu, s, x, k, I); });
        }
        if (nvt_ok(&dn)) {
            piped |= 2;
            emu_launch(dim3(CEIL_DIV(H, MG_BN), tiles), MG_THREADS,
                       [&] { nvfp4_tile_kernel<NVT_DOWN, BM>(dn, rg, H); });
            const size_t ny = (size_t)s.offsets[E] * H;
            float *y1 = (float *)malloc(ny * 4 + 4);
            memcpy(y1, s.ys, ny * 4);
            if (BM == 64) {
                for (size_t i = 0; i < ny; i++) s.ys[i] = NAN;
                emu_launch(dim3(CEIL_DIV(H, MG_BN), tiles), MG_THREADS,
                           [&] { nvfp4_tile_kernel<NVT_DOWN, BM, 1>(dn, rg, H); });
                if (memcmp(y1, s.ys, ny * 4)) { printf("  pipelined 1x4 down differs from 2x2\n"); piped |= 4; }
            }
            emu_launch(dim3(CEIL_DIV(H, MG_BN), tiles), MG_THREADS,
                       [&] { moe_grouped_gemm_kernel<false, BM, BK>(dn, s, nullptr, k, H); });
            if (memcmp(y1, s.ys, ny * 4)) { printf("  pipelined down differs from the plain kernel\n"); piped |= 4; }
            free(y1);
        } else {
            emu_launch(dim3(CEIL_DIV(H, MG_BN), tiles), MG_THREADS,
                       [&] { moe_grouped_gemm_kernel<false, BM, BK>(dn, s, nullptr, k, H); });
        }
    };
    if (bm == 16)
        gemms(std::integral_constant<int, 16>());
    else
        gemms(std::integral_constant<int, 64>());
    emu_launch(dim3(n_tok, CEIL_DIV(H, 256)), 256,
               [&] { moe_grouped_combine_kernel(got, s, w, k, H, acc); });
    double amax = 0, se = 0, sr = 0;
    size_t bad = 0;
    for (size_t i = 0; i < nx; i++) {
        amax = fabs(ref[i]) > amax ? fabs(ref[i]) : amax;
        se += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        sr += (double)ref[i] * ref[i];
    }
    for (size_t i = 0; i < nx; i++)
        if (!(fabs((double)got[i] - ref[i]) <= 2e-2 * amax + 2e-2 * fabs(ref[i]))) {
            if (bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]);
            bad++;
        }
    double rr = sqrt(se / sr);
    printf("moe_grouped emu bm=%d%s fmt=%d sc=%d/%d tok=%d E=%d k=%d H=%d I=%d acc=%d skew=%d: rel_rms=%.2e bad=%zu %s\n",
           bm, piped & 3 ? (piped & 3) == 3 ? " piped" : piped & 1 ? " piped_gu" : " piped_dn" : "",
           fmt, gsk, dsk, n_tok, E, k, H, I, acc, skew, rr, bad,
           (bad || !(rr <= 1.2e-2) || (piped & 4)) ? "FAIL" : "ok");
    return bad || !(rr <= 1.2e-2) || (piped & 4);
}

int main()
{
    int f = 0;
    for (int bm = 64; bm >= 16; bm -= 48) { /* both tile shapes on the same cases */
        f += run(KW_FMT_BF16, 0, 0, 1, 8, 2, 264, 40, 0, 0, bm);
        f += run(KW_FMT_BF16, 0, 0, 5, 16, 4, 264, 72, 1, 0, bm);
        f += run(KW_FMT_BF16, 0, 0, 40, 4, 4, 136, 40, 0, 1, bm);
        f += run(KW_FMT_FP8, KW_SCALE_CHANNEL, KW_SCALE_BLOCK, 3, 8, 2, 272, 48, 0, 0, bm);
        f += run(KW_FMT_FP8, KW_SCALE_BLOCK, KW_SCALE_TENSOR, 9, 4, 3, 400, 144, 1, 0, bm);
        f += run(KW_FMT_NVFP4, 0, 0, 5, 8, 4, 288, 96, 0, 0, bm);
        f += run(KW_FMT_NVFP4, 0, 0, 30, 4, 4, 272, 48, 1, 1, bm);
    }
    /* 16-row tiles: experts with more than 16 rows (several tiles each), K not a multiple of 128 */
    f += run(KW_FMT_NVFP4, 0, 0, 24, 4, 4, 208, 80, 0, 1, 16);
    /* the pipelined NVFP4 16-row kernel: both GEMMs (K % 128 == 64: a half last stage), gate_up
     * only with a partial 32-intermediate column tile, multi-tile experts, empty experts */
    f += run(KW_FMT_NVFP4, 0, 0, 13, 8, 4, 320, 192, 1, 0, 16);
    f += run(KW_FMT_NVFP4, 0, 0, 40, 4, 4, 256, 208, 0, 1, 16);
    f += run(KW_FMT_NVFP4, 0, 0, 3, 32, 2, 512, 128, 0, 0, 16);
    /* more experts than plan threads (two per thread, the last run partial) */
    f += run(KW_FMT_BF16, 0, 0, 40, 1500, 4, 64, 16, 1, 0, 16);
    /* the same with 64-row tiles (the pipelined kernel with K steps of 64), and many rows per
     * expert (several 64-row tiles, a partial one) */
    f += run(KW_FMT_NVFP4, 0, 0, 13, 8, 4, 320, 192, 1, 0, 64);
    f += run(KW_FMT_NVFP4, 0, 0, 40, 4, 4, 256, 208, 0, 1, 64);
    f += run(KW_FMT_NVFP4, 0, 0, 70, 4, 3, 192, 128, 1, 1, 64);
    printf("failures=%d\n", f);
    return f != 0;
}
