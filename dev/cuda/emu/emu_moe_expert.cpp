// moe_expert through its real launcher (moe_expert_cuda_path: path selection; kernels on the host
// emulator) vs moe_expert_ref:
//   - the stream path (nvfp4, the default at 1..8 tokens): launch 1 = nvs_kernel<NVS_SLOT> (gate|up
//     rows of every slot's expert into ws), launch 2 = nvs_kernel<NVS_COMBINE> (down rows of a
//     token's top_k slots, SwiGLU while staging, routing-weighted sum, accumulate or overwrite);
//     hidden / inter with K % 32 == 16 (non-VEC16 instance), empty (-1) and out-of-range slots,
//     the shared-expert form (E = 1, top_k = 1), 9 tokens (grid over tokens), a 32-expert
//     2048 x 512 shape at 1 token;
//   - fp8 on the stream path (channel-scaled gate_up in SLOT, block-scaled down in COMBINE), 1,
//     2 and 8 tokens, by AUTO up to 8 tokens and forced;
//   - moe_expert_sh_cuda (a folded shared expert's gate/up before the PDL wait) bit for bit
//     against moe_expert_cuda_path on the same ids, stream and cores;
//   - AUTO: the path picked (by kernel name) and its result; the CUDA-core path (moe_gate_up /
//     moe_down kernels, per-format wdot) for bf16, fp8 past 8 tokens or with a channel-scaled
//     down, and narrow nvfp4; the nvfp4 tensor path once.
// Tolerances (test_moe.c's): stream / tensor 2e-3 * amax + 2e-3 |ref|, cores 1e-5 * amax +
// 1e-4 |ref|; plus for stream / tensor a tight check, 1e-4 * amax, against a reference with the
// kernels' fp16 roundings (x, and silu(g) * u after fp32 gate/up). out's guard must stay NaN.
#include "emu_kw.h"
#include "moe_expert_emu.inc"

/* moe_expert_ref with x and the SwiGLU product rounded to fp16 as the tensor / stream kernels do */
static void ref_f16(float *out, const float *x, const int32_t *ids, const float *wts, int n_tok, int k, int E,
                    const kweight *gu, const kweight *dn, int acc)
{
    const int H = dn->rows, I = dn->cols;
    std::vector<float> xh(H), g(2 * I), h(I), y(H);
    for (int t = 0; t < n_tok; t++) {
        float *o = out + (size_t)t * H;
        if (!acc)
            for (int i = 0; i < H; i++) o[i] = 0.0f;
        kw_round_f16(xh.data(), x + (size_t)t * H, H);
        for (int j = 0; j < k; j++) {
            const int e = ids[t * k + j];
            if (e < 0 || e >= E) continue;
            gemv_ref(g.data(), gu, e, xh.data(), 1);
            for (int i = 0; i < I; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * g[I + i];
            kw_round_f16(h.data(), h.data(), I);
            gemv_ref(y.data(), dn, e, h.data(), 1);
            for (int i = 0; i < H; i++) o[i] += wts[t * k + j] * y[i];
        }
    }
}

static const char *path_name(int p)
{
    return p == GEMV_PATH_AUTO ? "auto" : p == GEMV_PATH_CORES ? "cores" : p == GEMV_PATH_TENSOR ? "tensor" : "stream";
}

static int run(int fmt, int n_tok, int E, int k, int H, int I, int acc, int path, const char *expect)
{
    kweight gu = kw_make(fmt, KW_SCALE_CHANNEL, E, 2 * I, H, H), dn = kw_make(fmt, KW_SCALE_BLOCK, E, H, I, I);
    const size_t nx = (size_t)n_tok * H, ns = (size_t)n_tok * k;
    float *x = (float *)emu_alloc(nx * 4), *wts = (float *)emu_alloc(ns * 4);
    int32_t *ids = (int32_t *)emu_alloc(ns * 4);
    for (size_t i = 0; i < nx; i++) x[i] = runi(-1, 1);
    for (size_t i = 0; i < ns; i++) wts[i] = runi(0, 1);
    for (size_t i = 0; i < ns; i++) ids[i] = (int32_t)(ru32() % (uint32_t)E);
    if (ns > 3) ids[3] = -1;
    if (ns > 6) ids[6] = E; /* out of range: contributes nothing */
    float *ref = (float *)malloc(nx * 4), *ref16 = (float *)malloc(nx * 4), *out = kw_out(nx);
    for (size_t i = 0; i < nx; i++) ref[i] = acc ? runi(-1, 1) : NAN;
    if (acc) memcpy(out, ref, nx * 4);
    memcpy(ref16, ref, nx * 4);
    const size_t wsf = moe_expert_ws_floats(n_tok, k, I, H);
    float *ws = (float *)emu_alloc(wsf * 4), *hb = (float *)malloc(ns * I * 4 + 4);
    for (size_t i = 0; i < wsf; i++) ws[i] = NAN;
    int rc = moe_expert_ref(ref, hb, x, ids, wts, n_tok, k, E, &gu, &dn, acc);
    ref_f16(ref16, x, ids, wts, n_tok, k, E, &gu, &dn, acc);
    g_emu_launched.clear();
    rc |= moe_expert_cuda_path(out, ws, x, ids, wts, n_tok, k, E, &gu, &dn, acc, path, 0);
    const bool f16 = g_emu_launched.find("nvs_kernel") != std::string::npos ||
                     g_emu_launched.find("nvfp4_mma_kernel") != std::string::npos;
    const kw_cmp c = kw_compare(out, ref, nx, f16 ? 2e-3 : 1e-5, f16 ? 2e-3 : 1e-4);
    kw_cmp t = {0, 0, 0, 0};
    if (f16) t = kw_compare(out, ref16, nx, 1e-4, 0);
    const bool path_ok = g_emu_launched.find(expect) != std::string::npos, guard = kw_guard_ok(out, nx);
    const int fail = rc || c.bad || t.bad || !path_ok || !guard;
    printf("moe_expert emu fmt=%d tok=%d E=%d k=%d H=%d I=%d acc=%d path=%s ran=%s: max_err/amax=%.2e rel_rms=%.2e "
           "tight=%.2e bad=%zu/%zu guard=%d rc=%d %s\n",
           fmt, n_tok, E, k, H, I, acc, path_name(path), g_emu_launched.c_str(), c.max_err / c.amax, c.rel_rms,
           f16 ? t.max_err / t.amax : 0.0, c.bad, t.bad, guard, rc, fail ? "FAIL" : "ok");
    return fail;
}

/* moe_expert_sh_cuda (the last slot of every token expert E - 1, its gate/up blocks first and
 * before the PDL wait) against moe_expert_cuda_path on the same ids: bit for bit, the same
 * kernels */
static int run_sh(int fmt, int n_tok, int E, int k, int H, int I, int acc, int path)
{
    kweight gu = kw_make(fmt, KW_SCALE_CHANNEL, E, 2 * I, H, H), dn = kw_make(fmt, KW_SCALE_BLOCK, E, H, I, I);
    const size_t nx = (size_t)n_tok * H, ns = (size_t)n_tok * k;
    float *x = (float *)emu_alloc(nx * 4), *wts = (float *)emu_alloc(ns * 4);
    int32_t *ids = (int32_t *)emu_alloc(ns * 4);
    for (size_t i = 0; i < nx; i++) x[i] = runi(-1, 1);
    for (size_t i = 0; i < ns; i++) wts[i] = runi(0, 1);
    for (size_t i = 0; i < ns; i++) ids[i] = (int32_t)(ru32() % (uint32_t)(E - 1));
    for (int t = 0; t < n_tok; t++) ids[t * k + k - 1] = E - 1;
    if (ns > 3 && k > 4) ids[3] = -1;
    float *a = kw_out(nx), *b = kw_out(nx);
    for (size_t i = 0; i < nx; i++) a[i] = b[i] = acc ? runi(-1, 1) : NAN;
    const size_t wsf = moe_expert_ws_floats(n_tok, k, I, H);
    float *ws = (float *)emu_alloc(wsf * 4);
    for (size_t i = 0; i < wsf; i++) ws[i] = NAN;
    g_emu_launched.clear();
    int rc = moe_expert_cuda_path(a, ws, x, ids, wts, n_tok, k, E, &gu, &dn, acc, path, 0);
    const std::string plain = g_emu_launched;
    for (size_t i = 0; i < wsf; i++) ws[i] = NAN; /* a slot the launch skips cannot pass */
    g_emu_launched.clear();
    rc |= moe_expert_sh_cuda(b, ws, x, ids, wts, n_tok, k, E, &gu, &dn, acc, E - 1, path, 0);
    const bool same = memcmp(a, b, nx * 4) == 0 && plain == g_emu_launched, guard = kw_guard_ok(b, nx);
    const int fail = rc || !same || !guard;
    printf("moe_expert_sh emu fmt=%d tok=%d E=%d k=%d H=%d I=%d acc=%d path=%s ran=%s: bit-identical=%d guard=%d rc=%d %s\n",
           fmt, n_tok, E, k, H, I, acc, path_name(path), g_emu_launched.c_str(), same, guard, rc, fail ? "FAIL" : "ok");
    return fail;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int S = GEMV_PATH_STREAM, A = GEMV_PATH_AUTO, C = GEMV_PATH_CORES, T = GEMV_PATH_TENSOR;
    const int NV = KW_FMT_NVFP4;
    /* source text of the launches (template arguments as written) */
    /* SLOT at 8 warps, then COMBINE in the wide form (16 warps: the down projection's grid
     * fits the 132 SMs of the emulated device) */
    const char *ST = "nvs_kernel<MODE, true>;nvs_kernel<MODE, true, false, false, WIDE_W>;";
    const char *ST_8 = "nvs_kernel<MODE, true>;nvs_kernel<MODE, true>;";
    const char *ST8 = "nvs_kernel<MODE, false>;nvs_kernel<MODE, false>;";
    const char *CO = "moe_gate_up_kernel<", *TE = "nvfp4_mma_kernel<1, true>";
    int f = 0;
    f += run(NV, 1, 16, 8, 256, 64, 0, A, ST);
    f += run(NV, 4, 8, 8, 272, 80, 1, A, ST8); /* K % 32 == 16 in both stages */
    f += run(NV, 3, 1, 1, 256, 64, 1, A, ST);  /* shared-expert form */
    f += run(NV, 2, 17, 9, 256, 64, 0, A, ST); /* top-8 + a folded shared expert's slot */
    f += run(NV, 1, 8, 8, 288, 96, 0, A, ST);  /* K % 128 != 0, 16-byte loads */
    f += run(KW_FMT_BF16, 3, 8, 4, 264, 40, 0, A, CO);
    /* fp8 on the stream kernel (AUTO at 2..8 tokens: MOE_STREAM_FP8_AUTO / _MIN_TOK, measured
     * on the H200): gate_up channel scales (SLOT), down 128 x 128 blocks (COMBINE, routing
     * weights in the multiplier, block scale per item of the segment's expert); one token on the
     * cores (the slots form of the down stage, its first chunks loaded before the PDL wait) */
    const char *F8 = "nvs_kernel<MODE, true, true>;nvs_kernel<MODE, true, true>;";
    f += run(KW_FMT_FP8, 2, 6, 2, 272, 48, 1, A, F8);
    f += run(KW_FMT_FP8, 1, 16, 8, 256, 64, 0, S, F8);
    f += run(KW_FMT_FP8, 2, 17, 9, 272, 48, 1, S, F8); /* K % 32 == 16, empty and out-of-range slots */
    if (!quick) {
        f += run(NV, 5, 16, 8, 512, 96, 1, S, ST);
        f += run(NV, 1, 8, 8, 272, 48, 0, S, ST8);
        f += run(NV, 8, 16, 8, 1040, 48, 0, A, ST8);  /* 8 tokens x top-8: 64 slots */
        f += run(NV, 8, 33, 9, 512, 128, 0, A, ST);   /* 8 tokens x 9 slots (folded shared) */
        f += run(NV, 2, 8, 8, 384, 128, 1, A, ST);
        f += run(NV, 9, 32, 4, 256, 384, 0, S, ST);  /* more tokens than the AUTO limit */
        f += run(NV, 9, 32, 4, 256, 384, 1, A, CO);  /* AUTO beyond 8 tokens: CUDA cores */
        f += run(NV, 1, 32, 8, 2048, 512, 0, A, ST); /* 32 experts of 1024 x 2048 + 2048 x 512 */
        f += run(NV, 2, 8, 4, 256, 128, 1, T, TE);
        f += run(NV, 2, 8, 4, 272, 48, 1, C, CO);    /* narrow nvfp4 on the cores */
        f += run(KW_FMT_FP8, 1, 8, 8, 512, 96, 0, A, "moe_gate_up_kernel<KF_FP8>;moe_down_slots_kernel<KF_FP8>;");
        f += run(KW_FMT_FP8, 1, 17, 9, 2048, 512, 1, A, "moe_down_slots_kernel<KF_FP8>"); /* model shape */
        f += run(KW_FMT_BF16, 1, 17, 9, 2048, 512, 0, A, "moe_down_slots_kernel<KF_BF16>"); /* model shape */
        f += run(KW_FMT_BF16, 2, 9, 9, 1040, 528, 1, A, "moe_down_slots_kernel<KF_BF16>"); /* 3 chunks a lane */
        f += run(KW_FMT_FP8, 9, 16, 4, 256, 128, 1, A, CO); /* AUTO beyond 8 tokens: cores */
        f += run(KW_FMT_FP8, 3, 8, 4, 256, 128, 0, C, CO);
        f += run(KW_FMT_FP8, 8, 16, 8, 512, 256, 1, S, F8); /* 8 tokens, two down chunks */
        f += run(KW_FMT_BF16, 1, 4, 2, 136, 24, 1, A, CO);
    }
    /* the folded shared expert before the wait: stream SLOT (nvfp4, fp8), the cores (bf16, fp8
     * at one token), K % 32 == 16 */
    f += run_sh(NV, 1, 17, 9, 256, 64, 0, A);
    f += run_sh(NV, 3, 9, 9, 272, 48, 1, A);
    f += run_sh(KW_FMT_BF16, 1, 9, 9, 264, 40, 0, A);
    f += run_sh(KW_FMT_BF16, 2, 5, 3, 264, 40, 1, C);
    f += run_sh(KW_FMT_FP8, 1, 9, 9, 256, 64, 0, A);
    f += run_sh(KW_FMT_FP8, 2, 9, 9, 272, 48, 1, S);
    /* a device of 2 SMs: the COMBINE grids fill it, the 8-warp form runs (the same sums up to
     * the order of the K-split warps) */
    setenv("EMU_SMS", "2", 1);
    f += run(NV, 1, 16, 8, 256, 64, 0, A, ST_8);
    f += run(NV, 2, 17, 9, 256, 64, 1, A, ST_8);
    /* 4 tokens' experts at K = 2,048: no split fits one wave of 2 SMs, so split 1 (NVS_EXPERT_WAVE:
     * COMBINE in both formats, fp8's SLOT eight rounds a warp; nvfp4's SLOT too with
     * EMU_DEFS=-DNVS_SLOT_WAVE_NVFP4=1) */
    f += run(NV, 4, 17, 9, 2048, 64, 0, A, ST_8);
    f += run(KW_FMT_FP8, 4, 17, 9, 2048, 64, 1, S, F8);
    unsetenv("EMU_SMS");
    {
        /* the experts' split on the model's gate/up (1,024 rows, 16 chunks: nvs_pick_wk's 4) at
         * 132 SMs and 3 blocks an SM: one token's 9 slots keep it (288 blocks), 4 tokens' 36
         * take 1 (288 blocks), 8 tokens' 72 fit no split (576 at 1) and take 1 */
        const int rows = 1024;
        const int w1 = nvs_wave_wk(4, &rows, 1, 9, 0, 3, 1),
                  w4 = nvs_wave_wk(4, &rows, 1, 36, 0, 3, 1),
                  w8 = nvs_wave_wk(4, &rows, 1, 72, 0, 3, 1),
                  w2 = nvs_wave_wk(4, &rows, 1, 18, 0, 3, 1);
        const bool ok = w1 == 4 && w2 == 2 && w4 == 1 && w8 == 1;
        printf("nvs_wave_wk: 1 / 2 / 4 / 8 tokens -> %d / %d / %d / %d (4 2 1 1) %s\n", w1, w2, w4,
               w8, ok ? "ok" : "FAIL");
        f += !ok;
    }
    {
        /* the stream path refuses top_k * inter beyond its shared memory; nothing launched */
        kweight gu = kw_make(NV, 0, 2, 2 * 4608, 64, 64), dn = kw_make(NV, 0, 2, 64, 4608, 4608);
        float *d = (float *)emu_alloc(4096 * 4);
        int32_t *di = (int32_t *)emu_alloc(64 * 4);
        int ok = moe_expert_cuda_path(d, d, d, di, d, 1, 8, 2, &gu, &dn, 0, S, 0) == ERR_UNSUPPORTED;
        /* fp8 down with channel scales: COMBINE cannot apply them per segment */
        kweight fgu = kw_make(KW_FMT_FP8, KW_SCALE_CHANNEL, 2, 128, 256, 256),
                fdn = kw_make(KW_FMT_FP8, KW_SCALE_CHANNEL, 2, 256, 64, 64);
        g_emu_launched.clear();
        ok = ok && moe_expert_cuda_path(d, d, d, di, d, 1, 8, 2, &fgu, &fdn, 0, S, 0) == ERR_UNSUPPORTED &&
             g_emu_launched.empty(); /* refused before the SLOT launch, not after it */
        /* ... and AUTO runs those on the CUDA cores */
        g_emu_launched.clear();
        ok = ok && moe_expert_cuda_path(d, d, d, di, d, 1, 8, 2, &fgu, &fdn, 0, A, 0) == 0 &&
             g_emu_launched.rfind("moe_gate_up_kernel<", 0) == 0;
        printf("moe_expert emu launcher checks: %s, refused launches=%d\n", ok ? "ok" : "FAIL", g_emu_bad_launches);
        f += !ok || g_emu_bad_launches != 0;
    }
    printf("failures=%d\n", f);
    return f != 0;
}
