// gemv through its real launcher (gemv_cuda_path: path selection, nvs_launch (nvfp4 and fp8) /
// CUDA-core launches; kernels on the host emulator) vs gemv_ref:
//   - the NVFP4 stream kernel (internal/nvfp4_stream.cuh, PLAIN mode) at 1..8 tokens: K % 128 != 0,
//     K % 32 == 16 (8-byte loads, byte scales), padded row strides (views), expert stacks with
//     expert stride % 32 == 16, long K (8 K-split warps), a single row;
//   - the FP8 stream kernel: tensor / channel / block (128x128 and 32x256) scales, K % 128 != 0,
//     padded views, stacks, 1..8 tokens;
//   - GEMV_PATH_AUTO: which kernel it picks (checked by name) and its result, including bf16 and
//     fp8 at 1 token on the CUDA cores (internal/wdot.cuh per-format kernels: fp8 block scales
//     64 columns wide or K beyond the stream kernel's shared memory), and the nvfp4 tensor path;
//   - the row kernel (internal/wrows.cuh, bf16 and fp8, one token): 1, 2, 4 and 8 warps a row, two
//     rounds, stacks, padded views, fp8 block / channel / tensor scales; in gemv_multi (bf16 and fp8
//     mixed) bit for bit against its single-weight launch;
//   - GEMV_PATH_CORES for every format incl. narrow nvfp4 (K % 32 == 16), 1 token (4 rows per
//     lane group) and 3 / 5 tokens (4-token tiles).
// Tolerances (test_gemv.c's): stream / tensor 1e-3 * amax + 1e-3 |ref| (activations rounded to
// fp16), cores 1e-5 * amax + 1e-4 |ref|; plus for stream / tensor a tight check, 2e-5 * amax,
// against the reference on fp16-rounded activations (only fp32 sum order differs). Outputs and a
// guard past them start as NaN; padding of views holds NaN codes.
#include "emu_kw.h"
#include "gemv_emu.inc"

static const char *path_name(int p)
{
    return p == GEMV_PATH_AUTO ? "auto" : p == GEMV_PATH_CORES ? "cores" : p == GEMV_PATH_TENSOR ? "tensor"
         : p == GEMV_PATH_ROWS ? "rows" : "stream";
}

/* expect: substring of the launched kernel names that must appear (the path taken) */
static int run(int fmt, int sk, int E, int e, int rows, int cols, int cols_alloc, int n_tok, int path,
               const char *expect, int br = 128, int bc = 128)
{
    kweight w = kw_make(fmt, sk, E, rows, cols, cols_alloc, br, bc);
    const size_t nx = (size_t)n_tok * cols, ny = (size_t)n_tok * rows;
    float *x = (float *)emu_alloc(nx * 4), *xh = (float *)emu_alloc(nx * 4);
    for (size_t i = 0; i < nx; i++) x[i] = runi(-2, 2);
    kw_round_f16(xh, x, nx);
    float *ref = (float *)malloc(ny * 4), *ref16 = (float *)malloc(ny * 4), *y = kw_out(ny);
    int rc = gemv_ref(ref, &w, e, x, n_tok);
    rc |= gemv_ref(ref16, &w, e, xh, n_tok);
    g_emu_launched.clear();
    rc |= gemv_cuda_path(y, &w, e, x, n_tok, path, 0);
    const bool f16 = g_emu_launched.find("nvs_kernel") != std::string::npos ||
                     g_emu_launched.find("nvfp4_mma_kernel") != std::string::npos;
    const kw_cmp c = kw_compare(y, ref, ny, f16 ? 1e-3 : 1e-5, f16 ? 1e-3 : 1e-4);
    kw_cmp t = {0, 0, 0, 0};
    if (f16) t = kw_compare(y, ref16, ny, 2e-5, 0);
    const bool path_ok = g_emu_launched.find(expect) != std::string::npos;
    const bool guard = kw_guard_ok(y, ny);
    const int fail = rc || c.bad || t.bad || !path_ok || !guard;
    printf("gemv emu fmt=%d sk=%d blk=%dx%d e=%d/%d rows=%d cols=%d/%d tok=%d path=%s ran=%s: max_err/amax=%.2e "
           "rel_rms=%.2e tight=%.2e bad=%zu/%zu guard=%d rc=%d %s\n",
           fmt, sk, br, bc, e, E, rows, cols, cols_alloc, n_tok, path_name(path), g_emu_launched.c_str(),
           c.max_err / c.amax, c.rel_rms, f16 ? t.max_err / t.amax : 0.0, c.bad, t.bad, guard, rc,
           fail ? "FAIL" : "ok");
    return fail;
}

/* gemv_multi_cuda of n weights (formats f0, f1, f2, then f2; rows r0, r1, then r1 + 3 ..) vs
 * gemv_ref of each, at the cores tolerance */
static int run_multi(int n, int f0, int f1, int f2, int r0, int r1, int cols, int n_tok,
                     const char *expect = "gemv_wide_kernel", int same_e = 0, bool bits = true)
{
    kweight w[4];
    gemv_out o[4];
    float *ref[4];
    size_t ny[4];
    const int fmts[4] = {f0, f1, f2, f2};
    const int rows[4] = {r0, r1, r1 + 3, r1 + 7};
    float *x = (float *)emu_alloc((size_t)n_tok * cols * 4);
    for (size_t i = 0; i < (size_t)n_tok * cols; i++) x[i] = runi(-2, 2);
    int rc = 0, bad = 0, guard = 1;
    for (int i = 0; i < n; i++) {
        w[i] = kw_make(fmts[i], fmts[i] == KW_FMT_FP8 ? KW_SCALE_CHANNEL : 0, 2, rows[i], cols, cols);
        ny[i] = (size_t)n_tok * rows[i];
        ref[i] = (float *)malloc(ny[i] * 4);
        const int e = same_e ? 1 : i % 2;
        rc |= gemv_ref(ref[i], &w[i], e, x, n_tok);
        o[i] = {&w[i], e, kw_out(ny[i])};
    }
    g_emu_launched.clear();
    rc |= gemv_multi_cuda(o, n, x, n_tok, 0);
    const std::string launched = g_emu_launched;
    const bool f16 = launched.find("nvs_kernel") != std::string::npos;
    for (int i = 0; i < n; i++) {
        const kw_cmp c = kw_compare(o[i].y, ref[i], ny[i], f16 ? 1e-3 : 1e-5, f16 ? 1e-3 : 1e-4);
        bad += (int)c.bad;
        guard &= kw_guard_ok(o[i].y, ny[i]);
        if (f16 && fmts[i] != KW_FMT_BF16) {
            /* the same bits as gemv_cuda's own launch in its 8-warp form (no SM count: the
             * small grids here would take the 16-warp form, another order of the K-split) */
            float *y1 = kw_out(ny[i]);
            const char *prev = getenv("EMU_SMS"); /* the caller's device (a 2-SM case) */
            const std::string keep = prev ? prev : "";
            setenv("EMU_SMS", "0", 1);
            rc |= gemv_cuda(y1, &w[i], o[i].expert, x, n_tok, 0);
            if (prev)
                setenv("EMU_SMS", keep.c_str(), 1);
            else
                unsetenv("EMU_SMS");
            if (bits)
                bad += memcmp(y1, o[i].y, ny[i] * 4) != 0;
        }
    }
    const bool one = launched.find(expect) != std::string::npos && launched.find(';') == launched.rfind(';');
    /* the dispatch log's source: gemv_multi_kind names the kernel that ran */
    const int kind = gemv_multi_kind(o, n, n_tok);
    const bool tail = fmts[n - 1] == KW_FMT_BF16; /* nvfp4 / fp8 weights, then bf16 a warp per row */
    const bool rows16 = launched.find("wrows_kernel") != std::string::npos;
    const bool named = kind == (rows16 ? GEMV_MULTI_ROWS
                                : f16  ? (tail ? GEMV_MULTI_STREAM_WIDE : GEMV_MULTI_STREAM)
                                       : GEMV_MULTI_WIDE);
    for (int i = 0; rows16 && i < n; i++) {
        /* the same bits as the row kernel on that weight alone */
        float *y1 = kw_out(ny[i]);
        rc |= gemv_cuda_path(y1, &w[i], o[i].expert, x, n_tok, GEMV_PATH_ROWS, 0);
        bad += memcmp(y1, o[i].y, ny[i] * 4) != 0;
    }
    const int fail = rc || bad || !guard || !one || !named;
    printf("gemv_multi emu n=%d fmts=%d,%d,%d rows=%d,%d cols=%d tok=%d ran=%s: bad=%d guard=%d rc=%d %s\n", n,
           f0, f1, f2, r0, r1, cols, n_tok, launched.c_str(), bad, guard, rc, fail ? "FAIL" : "ok");
    return fail;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    const int S = GEMV_PATH_STREAM, A = GEMV_PATH_AUTO, C = GEMV_PATH_CORES, R = GEMV_PATH_ROWS;
    const int NV = KW_FMT_NVFP4, F8 = KW_FMT_FP8, BF = KW_FMT_BF16;
    const int TS = KW_SCALE_TENSOR, CS = KW_SCALE_CHANNEL, BS = KW_SCALE_BLOCK;
    /* source text; NVS: the 16-warp form these small grids take on the emulated 132 SMs */
    const char *NVS = "nvs_kernel<MODE, true, false, false, WIDE_W>",
               *NVS8 = "nvs_kernel<MODE, false>";
    /* fp8 PLAIN: the 8-warp form (FP8S) where the grid has more blocks than SMs, else the
     * 16-warp one (FP8W: every single-weight case here on the emulated 132 SMs) */
    const char *FP8S = "nvs_kernel<MODE, true, true>",
               *FP8W = "nvs_kernel<MODE, true, true, false, WIDE_W8>";
    int f = 0;
    /* nvfp4 stream (the non-VEC16 instance: K, row or expert stride % 32 == 16) */
    f += run(NV, 0, 1, 0, 45, 96, 96, 3, S, NVS);
    f += run(NV, 0, 1, 0, 45, 48, 48, 1, S, NVS8);
    f += run(NV, 0, 3, 1, 29, 80, 80, 2, S, NVS8);
    f += run(NV, 0, 1, 0, 97, 512, 528, 1, S, NVS8);
    f += run(NV, 0, 2, 1, 33, 256, 288, 4, S, NVS);
    f += run(NV, 0, 1, 0, 1, 48, 48, 1, A, NVS8);
    /* the wide form over several row blocks: one K chunk (256 rows a block, 3 blocks), and
     * 8 chunks split over 4 warps (64 rows a block, 5 blocks) */
    f += run(NV, 0, 1, 0, 600, 96, 96, 1, S, NVS);
    f += run(NV, 0, 2, 1, 300, 1024, 1024, 2, A, NVS);
    setenv("EMU_SMS", "0", 1); /* no SM count: the 8-warp form */
    f += run(NV, 0, 1, 0, 45, 96, 96, 3, S, "nvs_kernel<MODE, true>");
    f += run(NV, 0, 2, 1, 33, 256, 288, 4, A, "nvs_kernel<MODE, true>");
    unsetenv("EMU_SMS");
    /* fp8 stream */
    f += run(F8, TS, 1, 0, 133, 272, 272, 1, S, FP8W);
    f += run(F8, BS, 1, 0, 259, 400, 400, 2, A, FP8W);
    f += run(F8, CS, 1, 0, 50, 256, 272, 3, A, FP8W);
    /* CUDA cores through AUTO at 1 token, and explicit */
    f += run(BF, 0, 3, 1, 33, 256, 256, 1, A, "gemv_wide_kernel");
    f += run(BF, 0, 1, 0, 513, 256, 256, 1, A, "wrows_kernel"); /* past the wide rows: the row kernel */
    f += run(BF, 0, 1, 0, 513, 256, 256, 1, C, "gemv_kernel<1, GEMV_ROWS_T1, KF>");
    /* the bf16 row kernel: 2 / 4 warps a row (K 4096 / 4104), two rounds of 8 warps (K 20000),
     * a stack, a padded view, a row count that leaves warps of the last block idle */
    f += run(BF, 0, 1, 0, 45, 4096, 4096, 1, R, "wrows_kernel");
    f += run(BF, 0, 3, 2, 37, 4104, 4104, 1, R, "wrows_kernel");
    /* fp8: 128 x 128 and 16 x 48 block scales (a scale a chunk), channel, tensor, K of 4 warps */
    f += run(F8, BS, 1, 0, 600, 400, 400, 1, R, "wrows_kernel");
    f += run(F8, BS, 1, 0, 600, 400, 400, 1, A, GEMV_FP8_ROWS_AUTO ? "wrows_kernel" : FP8W);
    f += run(F8, BS, 2, 1, 37, 4096, 4096, 1, R, "wrows_kernel", 16, 48);
    f += run(F8, CS, 3, 2, 45, 2064, 2080, 1, R, "wrows_kernel");
    f += run(F8, TS, 1, 0, 9, 8208, 8208, 1, R, "wrows_kernel");
    f += run(F8, BS, 1, 0, 9, 16400, 16400, 1, R, "wrows_kernel"); /* two rounds of 8 warps */
    f += run(BF, 0, 2, 1, 70, 1000, 1008, 1, A, "gemv_wide_kernel");
    f += run(F8, BS, 1, 0, 77, 400, 400, 1, R, "wrows_kernel");
    f += run(F8, CS, 2, 1, 70, 3072, 3072, 1, R, "wrows_kernel");
    f += run(BF, 0, 2, 1, 700, 1000, 1008, 1, A, "wrows_kernel");
    f += run(F8, BS, 1, 0, 70, 272, 272, 1, A, "gemv_wide_kernel", 128, 64);
    f += run(NV, 0, 1, 0, 45, 48, 48, 1, C, "gemv_wide_kernel");
    f += run(NV, 0, 1, 0, 600, 48, 48, 1, C, "gemv_kernel<1");
    f += run(F8, TS, 1, 0, 37, 64, 64, 3, C, "gemv_wide_kernel");
    f += run(F8, TS, 1, 0, 37, 64, 64, 9, C, "gemv_kernel<4, 1, KF>"); /* past the wide tokens */
    if (!quick) {
        f += run(NV, 0, 1, 0, 133, 208, 208, 8, S, NVS8);
        f += run(NV, 0, 1, 0, 70, 2064, 2064, 2, S, NVS8);
        f += run(NV, 0, 1, 0, 517, 2048, 2048, 1, A, NVS);
        f += run(NV, 0, 3, 2, 130, 512, 512, 8, S, NVS);
        f += run(NV, 0, 1, 0, 50, 96, 112, 5, S, NVS8);
        f += run(NV, 0, 1, 0, 300, 8192, 8192, 1, S, NVS);  /* 8 K-split warps, 2 rounds */
        f += run(NV, 0, 1, 0, 64, 8192, 8192, 8, A,
                 "nvfp4_mma_kernel<1, false>"); /* stream does not fit */
        /* 8 rows of 4,096 staged (66 KB: the out projections at 8 tokens) and 4 of 8,192: past
         * the 48 KB default, the launch opts in */
        f += run(NV, 0, 1, 0, 64, 4096, 4096, 8, A, NVS);
        f += run(NV, 0, 1, 0, 2200, 4096, 4096, 5, A, "nvs_kernel<MODE, true>"); /* 138 blocks */
        f += run(NV, 0, 1, 0, 64, 8192, 8192, 4, A, NVS);
        f += run(NV, 0, 1, 0, 77, 640, 640, 9, A, "nvfp4_mma_kernel<8, false>");
        f += run(F8, CS, 1, 0, 70, 1024, 1024, 3, S, FP8W);
        f += run(F8, BS, 1, 0, 300, 1040, 1040, 8, S, FP8W);
        f += run(F8, CS, 3, 2, 129, 2048, 2048, 2, A, FP8W);
        f += run(F8, BS, 2, 1, 200, 384, 384, 5, S, FP8W);
        f += run(F8, BS, 1, 0, 100, 384, 384, 1, S, FP8W, 32, 256);
        f += run(F8, TS, 1, 0, 77, 8192, 8192, 1, A, FP8W);
        f +=
            run(F8, TS, 1, 0, 20, 40960, 40960, 1, A, "gemv_wide_kernel"); /* too long for stream */
        f += run(F8, BS, 2, 1, 130, 400, 400, 1, A, "gemv_wide_kernel", 16, 64);
        f += run(F8, CS, 1, 0, 70, 1024, 1024, 1, C, "gemv_wide_kernel");
        f += run(F8, BS, 1, 0, 259, 400, 400, 5, C, "gemv_wide_kernel");
        f += run(BF, 0, 1, 0, 9, 20000, 20000, 1, R, "wrows_kernel");
        f += run(BF, 0, 1, 0, 37, 64, 64, 1, A, "gemv_wide_kernel");
        f += run(BF, 0, 1, 0, 301, 2056, 2056, 1, A, "gemv_wide_kernel");
        f += run(BF, 0, 1, 0, 301, 2056, 2056, 3, A, "gemv_wide_kernel");
        f += run(BF, 0, 1, 0, 600, 264, 264, 3, A, "gemv_kernel<4");
        f += run(NV, 0, 1, 0, 133, 208, 208, 1, C, "gemv_wide_kernel");
        f += run(NV, 0, 2, 1, 33, 256, 288, 5, C, "gemv_wide_kernel");
        f += run(NV, 0, 1, 0, 255, 512, 512, 1, C, "gemv_wide_kernel");
        f += run(NV, 0, 2, 1, 777, 256, 288, 5, C, "gemv_kernel<4");
    }
    /* gemv_multi: up to 4 weights of the same cols in one launch (formats mixed: KF_ANY) */
    f += run_multi(2, BF, BF, 1, 32, 32, 2048, 1);  /* the GDN b + a shape */
    f += run_multi(2, BF, BF, 1, 256, 2, 512, 3);   /* router + shared gate */
    /* bf16, one past the wide rows, one token: the row kernel (the BF16 GDN qkv, z, b, a) */
    f += run_multi(4, BF, BF, BF, 600, 45, 512, 1, "wrows_kernel", 1);
    f += run_multi(3, BF, BF, BF, 20, 530, 4096, 1, "wrows_kernel", 0); /* 2 warps a row */
    if (GEMV_FP8_ROWS_AUTO) /* fp8 + bf16 blocks, one launch */
        f += run_multi(4, F8, F8, BF, 600, 45, 256, 1, "wrows_kernel", 1);
    f += run_multi(3, BF, F8, NV, 17, 40, 256, 8);
    f += run_multi(4, NV, NV, NV, 5, 9, 208, 2);     /* narrow nvfp4, 4 weights: past the stream's 3 */
    /* 2..3 nvfp4 weights: the stream kernel, one launch (MULTI), blocks of each weight */
    const char *NVM = "nvs_kernel<NVS_PLAIN, true, false, true>", *NVM8 = "nvs_kernel<NVS_PLAIN, false, false, true>";
    f += run_multi(2, NV, NV, NV, 600, 45, 256, 1, NVM, 1); /* the GDN qkv + z shape class */
    f += run_multi(3, NV, NV, NV, 64, 16, 512, 3, NVM, 1);  /* attention q + k + v */
    f += run_multi(2, NV, NV, NV, 40, 24, 160, 3, NVM, 1);   /* K % 128 != 0: the register path */
    f += run_multi(3, NV, NV, NV, 33, 70, 208, 8, NVM8, 1); /* K % 32 == 16: 8-byte loads */
    f += run_multi(2, NV, NV, NV, 40, 40, 256, 1, "gemv_wide_kernel", 0); /* experts differ: wide */
    /* nvfp4 then bf16 (the GDN qkv, z, b, a): one stream launch, the bf16 rows a warp each */
    f += run_multi(4, NV, NV, BF, 600, 45, 256, 1, NVM, 1);
    f += run_multi(3, NV, NV, BF, 33, 70, 208, 8, NVM8, 1);   /* 8-byte loads; 73 bf16 rows */
    f += run_multi(4, NV, NV, BF, 40, 24, 160, 3, NVM, 1);
    /* fp8 (channel scales) the same way: the stream kernel's fp8 form, MULTI */
    const char *F8M = "nvs_kernel<NVS_PLAIN, true, true, true>";
    f += run_multi(2, F8, F8, F8, 600, 45, 256, 2, F8M, 1);
    f += run_multi(3, F8, F8, F8, 33, 70, 208, 8, F8M, 1); /* K % 128 != 0 */
    f += run_multi(4, F8, F8, BF, 600, 45, 256, 2, F8M, 1);
    f += run_multi(3, F8, F8, BF, 40, 24, 160, 3, F8M, 1);
    /* a device of 2 SMs: with NVS_FP8_WAVE (the default) the fp8 launches split K over fewer
     * warps to fit one wave (another order of the K-split: the tolerance only) */
    setenv("EMU_SMS", "2", 1);
    f += run_multi(3, F8, F8, F8, 200, 45, 2048, 1, F8M, 1, false); /* 6 blocks at wk 2 */
    f += run(F8, BS, 1, 0, 300, 2048, 2048, 2, S, FP8S); /* 5 row blocks at wk 2: 8 warps */
    unsetenv("EMU_SMS");
    {
        kweight a = kw_make(BF, 0, 1, 8, 256, 256), b = kw_make(BF, 0, 1, 8, 128, 128),
                c = kw_make(BF, 0, 1, 513, 256, 256);
        float *d = (float *)emu_alloc((size_t)9 * 513 * 4);
        gemv_out o[2] = {{&a, 0, d}, {&b, 0, d}};
        int ok = gemv_multi_cuda(o, 2, d, 1, 0) == ERR_INVAL; /* cols differ */
        o[1].w = &c;
        ok &= gemv_multi_cuda(o, 2, d, 2, 0) == ERR_UNSUPPORTED; /* 513 rows at 2 tokens */
        ok &= gemv_multi_kind(o, 2, 2) == GEMV_MULTI_NONE;
        ok &= gemv_multi_kind(o, 2, 1) == GEMV_MULTI_ROWS; /* the row kernel at 1 */
        o[1].w = &a;
        ok &= gemv_multi_cuda(o, 2, d, 9, 0) == ERR_UNSUPPORTED; /* 9 tokens */
        ok &= gemv_multi_cuda(o, 0, d, 1, 0) == ERR_INVAL && gemv_multi_cuda(o, 5, d, 1, 0) == ERR_INVAL;
        printf("gemv_multi emu launcher checks: %s\n", ok ? "ok" : "FAIL");
        f += !ok;
    }
    /* launcher checks: the stream kernel refuses what it cannot do, nothing is launched */
    {
        kweight w = kw_make(NV, 0, 1, 16, 8192, 8192);
        float *d = (float *)emu_alloc((size_t)9 * 8192 * 4);
        int ok =
            gemv_cuda_path(d, &w, 0, d, 5, S, 0) == ERR_UNSUPPORTED; /* 5 x 8192 fp16 > 68 KB */
        ok &= gemv_cuda_path(d, &w, 0, d, 9, S, 0) == ERR_UNSUPPORTED;
        kweight b = kw_make(F8, BS, 1, 16, 256, 256, 128, 64);
        ok &= gemv_cuda_path(d, &b, 0, d, 1, S, 0) == ERR_UNSUPPORTED;
        ok &= gemv_cuda_path(d, &b, 0, d + 1, 1, A, 0) == ERR_INVAL;
        printf("gemv emu launcher checks: %s, refused launches=%d\n", ok ? "ok" : "FAIL", g_emu_bad_launches);
        f += !ok || g_emu_bad_launches != 0;
    }
    printf("failures=%d\n", f);
    return f != 0;
}
