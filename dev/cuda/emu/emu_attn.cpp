// attn_prefill and attn_decode kernels (real source, launchers cut) on the host emulator vs
// attn_prefill_batch_ref and attn_decode_dtype_ref.
#include "emu.h"
#include "attn_prefill_emu.inc"
#undef MAXD
#include "attn_decode_emu.inc"

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

static int split_parts; /* path 4 (split): parts of the keys, 0 = 3 */
#define EMU_PATH_WG 5   /* FLASH on wgmma (attn_prefill's ATTN_PREFILL_PATH_WGMMA) */

/* the FLASH kernel as launch_flash_t picks it (WG: its wgmma form, 1 KiB of alignment slack) */
template <bool WG>
static void flash_launch(dim3 grid, int hd, bool f8, float *got, const float *q, const float *hg,
                         const uint8_t *kc, const uint8_t *vc, const int32_t *bt, int mb,
                         const attn_prefill_seq *d, int hq, int hkv, int bs, float ql, float vs)
{
    const attn_prefill_seq none = {0, 0, 0, 0};
    const uint16_t *k16 = (const uint16_t *)kc, *v16 = (const uint16_t *)vc;
    const size_t sm = flash_smem_bytes(hd, f8) + (WG ? WG_ALIGN : 0);
    if (hd == 64 && !f8)
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<64, FNW, FBN, false, uint16_t, WG>(got, NULL, 1, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
    else if (hd == 128 && !f8)
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<128, FNW, FBN, false, uint16_t, WG>(got, NULL, 1, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
    else if (!f8)
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<256, FNW, FBN, false, uint16_t, WG>(got, NULL, 1, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
    else if (hd == 64)
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<64, FNW, FBN, false, uint8_t, WG>(got, NULL, 1, q, hg, kc, vc, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
    else if (hd == 128)
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<128, FNW, FBN, false, uint8_t, WG>(got, NULL, 1, q, hg, kc, vc, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
    else
        emu_launch(grid, FNT, [&] { attn_prefill_flash_kernel<256, FNW, FBN, false, uint8_t, WG>(got, NULL, 1, q, hg, kc, vc, bt, mb, d, none, hq, hkv, bs, ql, vs); }, sm);
}

static int run(int n, const int *T, const int *P, int hq, int hkv, int hd, int bs, int dt, float ks,
               float vs, int path, int gate_on)
{
    int mb = 1, rows = 0, max_rows = 0;
    for (int s = 0; s < n; s++) {
        int ctx = P[s] + T[s], b = (ctx + bs - 1) / bs;
        mb = b > mb ? b : mb;
        rows += T[s];
        max_rows = T[s] > max_rows ? T[s] : max_rows;
    }
    max_rows += 2;
    const int n_blocks = n * mb + 2;
    const size_t w = (size_t)hkv * hd, esz = (size_t)kv_dtype_bytes(dt), ncache = (size_t)n_blocks * bs * w;
    int32_t *bt = (int32_t *)malloc((size_t)n * mb * 4), *perm = (int32_t *)malloc((size_t)n_blocks * 4);
    uint8_t *kc = (uint8_t *)emu_alloc(ncache * esz), *vc = (uint8_t *)emu_alloc(ncache * esz);
    memset(kc, 0, ncache * esz); memset(vc, 0, ncache * esz);
    attn_prefill_seq *d = (attn_prefill_seq *)malloc(sizeof(*d) * n);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) { int j = (int)(ru32() % (uint32_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (int i = 0; i < n * mb; i++) bt[i] = perm[i];
    for (int s = 0, r = rows; s < n; s++) { r -= T[s]; d[s] = attn_prefill_seq{n - 1 - s, r, T[s], P[s]}; }
    for (int s = 0; s < n; s++) {
        const int ctx = P[s] + T[s];
        const int32_t *row = bt + (size_t)d[s].seq * mb;
        float *k = (float *)malloc((size_t)ctx * w * 4 + 4), *v = (float *)malloc((size_t)ctx * w * 4 + 4);
        int32_t *sm = (int32_t *)malloc((size_t)ctx * 4 + 4);
        for (size_t i = 0; i < (size_t)ctx * w; i++) { k[i] = runi(-1, 1); v[i] = runi(-1, 1); }
        for (int j = 0; j < ctx; j++) sm[j] = row[j / bs] * bs + j % bs;
        kv_write_dtype_ref(kc, vc, k, v, sm, ctx, hkv, hd, dt, ks, vs);
        free(k), free(v), free(sm);
    }
    const size_t nq = (size_t)rows * hq * hd;
    float *q = (float *)emu_alloc(nq * 4), *gate = (float *)malloc(nq * 4 + 4),
          *ref = (float *)malloc(nq * 4 + 4), *got = (float *)emu_alloc(nq * 4);
    for (size_t i = 0; i < nq; i++) { q[i] = runi(-3, 3); gate[i] = runi(-3, 3); got[i] = NAN; }
    const float scale = 1.0f / sqrtf((float)hd);
    const float *hg = gate_on ? gate : NULL;
    attn_prefill_batch_ref(ref, q, hg, kc, vc, dt, ks, vs, bt, mb, d, n, max_rows, hq, hkv, hd, bs, scale);
    if (dt == KV_DTYPE_BF16) ks = vs = 1.0f;
    const int g = hq / hkv, bm = path == ATTN_PREFILL_PATH_MMA ? MBM : path == ATTN_PREFILL_PATH_FLASH || path == EMU_PATH_WG ? FBM : BM;
    const dim3 grid(CEIL_DIV(max_rows * g, bm), hkv, n);
    const float qk = scale * ks;
    attn_prefill_seq none = {0, 0, 0, 0};
    if (path == 4) { /* the split form (attn_prefill_split_cuda): partials, then the merge */
        const uint16_t *k16 = (const uint16_t *)kc, *v16 = (const uint16_t *)vc;
        const float ql = scale * 1.4426950408889634f;
        if (dt != KV_DTYPE_BF16 || (hd != 64 && hd != 128 && hd != 256)) { printf("split: bad case\n"); return 1; }
        const int parts = split_parts > 0 ? split_parts : 3;
        const int tiles = CEIL_DIV(max_rows * g, 16 * SNW);
        const size_t nws = (size_t)rows * hq * parts * (hd + 2); /* attn_prefill_split_ws_floats */
        float *ws = (float *)emu_alloc(nws * 4);
        for (size_t i = 0; i < nws; i++) ws[i] = NAN; /* o of an empty part: never read */
        const dim3 sg(tiles * parts, hkv, n);
        if (hd == 64)
            emu_launch(sg, 32 * SNW, [&] { attn_prefill_flash_kernel<64, SNW, SBN, true>(got, ws, parts, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, 1.0f); }, flash_smem_bytes_nb(hd, SNW, SBN));
        else if (hd == 128)
            emu_launch(sg, 32 * SNW, [&] { attn_prefill_flash_kernel<128, SNW, SBN, true>(got, ws, parts, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, 1.0f); }, flash_smem_bytes_nb(hd, SNW, SBN));
        else
            emu_launch(sg, 32 * SNW, [&] { attn_prefill_flash_kernel<256, SNW, SBN, true>(got, ws, parts, q, hg, k16, v16, bt, mb, d, none, hq, hkv, bs, ql, 1.0f); }, flash_smem_bytes_nb(hd, SNW, SBN));
        emu_launch(dim3(hq, max_rows, n), CEIL_DIV(hd, 32) * 32, [&] { attn_flash_merge_kernel(got, ws, hg, d, hq, hd, parts); });
    } else if (path == ATTN_PREFILL_PATH_FLASH || path == EMU_PATH_WG) { /* bf16 or e4m3 caches */
        const float ql = qk * 1.4426950408889634f;
        if (hd != 64 && hd != 128 && hd != 256) { printf("flash: bad case\n"); return 1; }
        if (path == EMU_PATH_WG)
            flash_launch<true>(grid, hd, dt == KV_DTYPE_FP8, got, q, hg, kc, vc, bt, mb, d, hq, hkv, bs, ql, vs);
        else
            flash_launch<false>(grid, hd, dt == KV_DTYPE_FP8, got, q, hg, kc, vc, bt, mb, d, hq, hkv, bs, ql, vs);
    } else if (path == ATTN_PREFILL_PATH_MMA) { /* MAXHD as launch_mma picks it */
        if (dt == KV_DTYPE_BF16 && hd <= 64)
            emu_launch(grid, MNT, [&] { attn_prefill_mma_kernel<uint16_t, 64>(got, q, hg, (const uint16_t *)kc, (const uint16_t *)vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, mma_smem_bytes(hd));
        else if (dt == KV_DTYPE_BF16)
            emu_launch(grid, MNT, [&] { attn_prefill_mma_kernel<uint16_t, 256>(got, q, hg, (const uint16_t *)kc, (const uint16_t *)vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, mma_smem_bytes(hd));
        else if (hd <= 64)
            emu_launch(grid, MNT, [&] { attn_prefill_mma_kernel<uint8_t, 64>(got, q, hg, kc, vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, mma_smem_bytes(hd));
        else
            emu_launch(grid, MNT, [&] { attn_prefill_mma_kernel<uint8_t, 256>(got, q, hg, kc, vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, mma_smem_bytes(hd));
    } else {
        if (dt == KV_DTYPE_BF16)
            emu_launch(grid, NT, [&] { attn_prefill_kernel<uint16_t>(got, q, hg, (const uint16_t *)kc, (const uint16_t *)vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, smem_bytes(hd));
        else
            emu_launch(grid, NT, [&] { attn_prefill_kernel<uint8_t>(got, q, hg, kc, vc, bt, mb, d, none, hq, hkv, hd, bs, qk, vs); }, smem_bytes(hd));
    }
    double mx = 0;
    for (size_t i = 0; i < nq; i++) mx = fabs(ref[i]) > mx ? fabs(ref[i]) : mx;
    const double tol = path == ATTN_PREFILL_PATH_CORES ? 1e-4 : 2e-2;
    size_t bad = 0;
    double maxe = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= tol * mx + tol * fabs(ref[i]))) { if (bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]); bad++; }
        if (e > maxe || e != e) maxe = e;
    }
    printf("attn_prefill emu path=%d dt=%d n=%d hq=%d hkv=%d hd=%d bs=%d rows=%d: max_err=%.3g (mx %.3g) bad=%zu %s\n",
           path, dt, n, hq, hkv, hd, bs, rows, maxe, mx, bad, bad ? "FAIL" : "ok");
    return bad != 0;
}

/* attn_decode at max_seq_len ml (>= every length; a captured graph passes max_model_len) over a
 * grid of parts blocks per head (0: attn_decode_parts, the launcher's), fewer than a length's chunks
 * making a block walk several. Block table entries past a length point far outside the cache. */
/* the GQA form's kernel for (dtype, head_dim, warps) */
template <typename T, int HD, int NW>
static void launch_gqa_hd(dim3 grid, float *ws, const float *q, const T *k, const T *v,
                          const int32_t *bt, const int32_t *lens, int hq, int hkv, int bs, int mb,
                          int parts, float s2, float vs, int nk)
{
    emu_launch(
        grid, 32 * NW,
        [&] {
            attn_gqa_kernel<T, HD, NW>(ws, q, k, v, bt, lens, hq, hkv, bs, mb, parts, s2, vs, nk);
        },
        gqa_smem<T, HD, NW>());
}
template <typename T, int NW>
static void launch_gqa(int hd, int parts, int hkv, int n_seq, float *ws, const float *q,
                       const uint8_t *kc, const uint8_t *vc, const int32_t *bt, const int32_t *lens,
                       int hq, int bs, int mb, float s2, float vs, int nk)
{
    const dim3 grid(parts, hkv, n_seq);
    const T *k = (const T *)kc, *v = (const T *)vc;
    auto go = hd == 32    ? launch_gqa_hd<T, 32, NW>
              : hd == 64  ? launch_gqa_hd<T, 64, NW>
              : hd == 128 ? launch_gqa_hd<T, 128, NW>
                          : launch_gqa_hd<T, 256, NW>;
    go(grid, ws, q, k, v, bt, lens, hq, hkv, bs, mb, parts, s2, vs, nk);
}

/* gqa: 0 = the CUDA-core split kernel, 2, 4 or 8 (e4m3 only) = the GQA form with that many warps a block (parts
 * then counts blocks per kv head; 0: attn_decode_gqa_parts, the launcher's) */
static int run_decode(int n_seq, int hq, int hkv, int hd, int bs, const int *lens, int ml, int parts,
                      int dt, float ks, float vs, int gate_on, int gqa = 0)
{
    int used = 0;
    for (int s = 0; s < n_seq; s++) used = std::max(used, (lens[s] + bs - 1) / bs);
    const int mb = (ml + bs - 1) / bs, n_blocks = n_seq * used + 3;
    const size_t w = (size_t)hkv * hd, esz = (size_t)kv_dtype_bytes(dt), ncache = (size_t)n_blocks * bs * w;
    int32_t *bt = (int32_t *)malloc((size_t)n_seq * mb * 4), *perm = (int32_t *)malloc((size_t)n_blocks * 4);
    uint8_t *kc = (uint8_t *)emu_alloc(ncache * esz), *vc = (uint8_t *)emu_alloc(ncache * esz);
    memset(kc, 0, ncache * esz); memset(vc, 0, ncache * esz);
    for (int i = 0; i < n_blocks; i++) perm[i] = i;
    for (int i = n_blocks - 1; i > 0; i--) { int j = (int)(ru32() % (uint32_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    for (int s = 0; s < n_seq; s++)
        for (int i = 0; i < mb; i++) bt[(size_t)s * mb + i] = i < used ? perm[s * used + i] : 1 << 30;
    for (int s = 0; s < n_seq; s++) {
        const int n = lens[s];
        float *k = (float *)malloc((size_t)n * w * 4 + 4), *v = (float *)malloc((size_t)n * w * 4 + 4);
        int32_t *sm = (int32_t *)malloc((size_t)n * 4 + 4);
        for (size_t i = 0; i < (size_t)n * w; i++) { k[i] = runi(-1, 1); v[i] = runi(-1, 1); }
        if (n > 3 && dt == KV_DTYPE_FP8) k[3] = 1000.0f * ks; /* saturates to 448 * ks */
        for (int j = 0; j < n; j++) sm[j] = bt[(size_t)s * mb + j / bs] * bs + j % bs;
        kv_write_dtype_ref(kc, vc, k, v, sm, n, hkv, hd, dt, ks, vs);
        free(k), free(v), free(sm);
    }
    const size_t nq = (size_t)n_seq * hq * hd;
    float *q = (float *)emu_alloc(nq * 4), *gate = (float *)malloc(nq * 4), *ref = (float *)malloc(nq * 4),
          *got = (float *)emu_alloc(nq * 4);
    for (size_t i = 0; i < nq; i++) { q[i] = runi(-2, 2); gate[i] = runi(-3, 3); got[i] = NAN; }
    const float scale = 1.0f / sqrtf((float)hd), *hg = gate_on ? gate : NULL;
    attn_decode_dtype_ref(ref, NULL, q, hg, kc, vc, dt, ks, vs, bt, lens, n_seq, hq, hkv, hd, bs, mb, ml, scale);
    const bool launcher = !parts;
    if (launcher) parts = gqa ? attn_decode_gqa_parts(n_seq, hkv) : attn_decode_parts(n_seq, hq, ml);
    const size_t need = (size_t)n_seq * hq * parts * (hd + 2);
    /* the launcher's parts fit the workspace attn_decode_ws_floats sizes; a harness choice gets
     * its own */
    if (launcher && need > attn_decode_ws_floats(n_seq, hq, hkv, hd, ml)) { printf("attn_decode emu: %d parts overflow the workspace FAIL\n", parts); return 1; }
    const size_t nws = std::max(need, attn_decode_ws_floats(n_seq, hq, hkv, hd, ml));
    float *ws = (float *)emu_alloc(nws * 4);
    for (size_t i = 0; i < nws; i++) ws[i] = NAN; /* partials past a length's chunks: never read */
    const dim3 grid(parts, hq, n_seq);
    const float s2 = scale * (dt == KV_DTYPE_BF16 ? 1.0f : ks) * GQA_LOG2E, v2 = dt == KV_DTYPE_BF16 ? 1.0f : vs;
    /* the GQA form reads keys before its PDL wait: the last nk keys of every sequence are guarded
     * as the kernel before (attn_prep) would write them (emu.h: emu_pdl_guard_add), and no read
     * of them may come before the wait. Once, the check is shown to see: the last 32 keys
     * guarded but the launch told of 1 must count reads. */
    auto guard = [&](int g) {
        emu_pdl_guard_clear();
        for (int s = 0; s < n_seq; s++)
            for (int j = std::max(lens[s] - g, 0); j < lens[s]; j++) {
                const size_t slot = (size_t)bt[(size_t)s * mb + j / bs] * bs + j % bs;
                emu_pdl_guard_add(kc + slot * w * esz, w * esz);
                emu_pdl_guard_add(vc + slot * w * esz, w * esz);
            }
        g_emu_prewait_reads = 0;
    };
    auto launch_any_gqa = [&](int nk) {
        if (gqa == 8 && dt != KV_DTYPE_BF16)
            launch_gqa<uint8_t, 8>(hd, parts, hkv, n_seq, ws, q, kc, vc, bt, lens, hq, bs, mb, s2, v2, nk);
        else if (gqa == 4 && dt == KV_DTYPE_BF16)
            launch_gqa<uint16_t, 4>(hd, parts, hkv, n_seq, ws, q, kc, vc, bt, lens, hq, bs, mb, s2, v2, nk);
        else if (gqa == 4)
            launch_gqa<uint8_t, 4>(hd, parts, hkv, n_seq, ws, q, kc, vc, bt, lens, hq, bs, mb, s2, v2, nk);
        else if (gqa == 2 && dt == KV_DTYPE_BF16)
            launch_gqa<uint16_t, 2>(hd, parts, hkv, n_seq, ws, q, kc, vc, bt, lens, hq, bs, mb, s2, v2, nk);
        else
            launch_gqa<uint8_t, 2>(hd, parts, hkv, n_seq, ws, q, kc, vc, bt, lens, hq, bs, mb, s2, v2, nk);
    };
    static bool blind_checked = false;
    int longest = 0;
    for (int s = 0; s < n_seq; s++) longest = std::max(longest, lens[s]);
    long early = 0, blind = 0;
    if (gqa && !blind_checked && longest >= 64 && GQA_PRE_WAIT) {
        guard(32);
        launch_any_gqa(1);
        blind = g_emu_prewait_reads == 0;
        printf("  pdl check: last 32 keys guarded, launch told of 1: %ld reads before the wait %s\n",
               (long)g_emu_prewait_reads, blind ? "FAIL (the check is blind)" : "ok");
        blind_checked = true;
    }
    const int nk = 1;
    if (gqa) {
        guard(nk);
        launch_any_gqa(nk);
        early = g_emu_prewait_reads;
        emu_pdl_guard_clear();
    } else if (dt == KV_DTYPE_BF16)
        emu_launch(grid, THREADS, [&] { attn_split_kernel<uint16_t>(ws, q, (const uint16_t *)kc, (const uint16_t *)vc, bt, lens, hq, hkv, hd, bs, mb, parts, scale, 1.0f); });
    else
        emu_launch(grid, THREADS, [&] { attn_split_kernel<uint8_t>(ws, q, kc, vc, bt, lens, hq, hkv, hd, bs, mb, parts, scale * ks, vs); });
    emu_launch(dim3(hq, n_seq), THREADS,
               [&] { attn_merge_kernel(got, ws, hg, lens, hq, hd, parts, gqa ? 1 : 0); });
    /* CORES computes in fp32; GQA rounds q and P to bf16 (bf16 K/V) or fp16 (e4m3) */
    double mx = 0;
    for (size_t i = 0; i < nq; i++) mx = std::max(mx, fabs((double)ref[i]));
    const double ta = gqa ? (dt == KV_DTYPE_BF16 ? 1e-2 : 2e-3) * mx : 2e-5, tr = gqa ? (dt == KV_DTYPE_BF16 ? 1e-2 : 2e-3) : 1e-4;
    size_t bad = 0;
    double maxe = 0;
    for (size_t i = 0; i < nq; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= ta + tr * fabs(ref[i]))) { if (bad < 3) printf("  mismatch %zu got %g ref %g\n", i, got[i], ref[i]); bad++; }
        if (e > maxe || e != e) maxe = e;
    }
    int most = 0;
    for (int s = 0; s < n_seq; s++) most = std::max(most, (lens[s] + SPLIT - 1) / SPLIT);
    /* the output's bits: the same from every build of the kernels (-DGQA_PRE_WAIT=0 moves loads,
     * no arithmetic: diff two runs' lines) */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < nq * 4; i++)
        h = (h ^ ((const unsigned char *)got)[i]) * 1099511628211ull;
    printf("attn_decode emu %s dt=%d seq=%d hq=%d hkv=%d hd=%d bs=%d max_seq_len=%d parts=%d "
           "(chunks <= %d) gate=%d: max_err=%.3g (mx %.3g) bad=%zu bits=%016llx %s\n",
           gqa == 8   ? "gqa8"
           : gqa == 4 ? "gqa4"
           : gqa == 2 ? "gqa2"
                      : "cores",
           dt, n_seq, hq, hkv, hd, bs, ml, parts, most, gate_on, maxe, mx, bad,
           (unsigned long long)h, bad || early ? "FAIL" : "ok");
    if (early)
        printf("  %ld reads of the newest key before the PDL wait FAIL\n", early);
    free(bt), free(perm), free(kc), free(vc), free(q), free(gate), free(ref), free(got), free(ws);
    return bad != 0 || early != 0 || blind != 0;
}

static int decode_cases(bool quick)
{
    static const int la[] = {1, 15, 16, 255, 256, 257, 1000}, lb[] = {1337, 3, 600}, lc[] = {2100, 40};
    int f = 0;
    /* GQA 8, head_dim 256, the graph case (max_seq_len 262144): the launcher's grid of 5 parts */
    f += run_decode(7, 16, 2, 256, 16, la, 262144, 0, KV_DTYPE_BF16, 1, 1, 1);
    /* grids narrower than the chunks: blocks walk 3 (2 parts) or 2 and 1 (4 parts) chunks */
    f += run_decode(3, 8, 1, 256, 16, lb, 4096, 2, KV_DTYPE_FP8, 0.02f, 0.03f, 1);
    f += run_decode(3, 8, 1, 128, 32, lb, 1337, 4, KV_DTYPE_BF16, 1, 1, 0);
    /* batch 1 in the graph (33 parts a head): a 2,048-token context's 32 partials, 4 a merge
     * warp; 2 heads (264 parts): 79 partials, more than a warp's lanes in the merge's max */
    static const int l1[] = {2048}, l2[] = {5000};
    f += run_decode(1, 16, 2, 256, 16, l1, 262144, 0, KV_DTYPE_BF16, 1, 1, 1);
    /* the GQA form: the model's shape (GQA 8, head_dim 256) in a graph's grid (66 parts a kv
     * head, most of them empty at these lengths), bf16 and e4m3; parts of several tiles a warp
     * (the pipeline's stages wrap); groups of 2 and 6 heads (columns past the group); head_dim
     * 32 (the tiny model's) and 128; block sizes that split tiles */
    f += run_decode(7, 16, 2, 256, 16, la, 262144, 0, KV_DTYPE_BF16, 1, 1, 1, 4);
    f += run_decode(7, 16, 2, 256, 16, la, 262144, 0, KV_DTYPE_FP8, 0.05f, 0.1f, 1, 4);
    f += run_decode(3, 8, 1, 256, 16, lb, 4096, 2, KV_DTYPE_FP8, 0.02f, 0.03f, 0, 2);
    f += run_decode(3, 8, 4, 128, 5, lb, 1337, 1, KV_DTYPE_BF16, 1, 1, 1, 4);
    f += run_decode(1, 16, 2, 256, 16, l2, 8192, 3, KV_DTYPE_BF16, 1, 1, 1, 4);
    f += run_decode(2, 4, 2, 32, 7, lc, 3000, 3, KV_DTYPE_FP8, 0.1f, 0.1f, 1, 2);
    f += run_decode(2, 12, 2, 64, 16, lc, 2100, 0, KV_DTYPE_BF16, 1, 1, 0, 4);
    /* e4m3 at 8 warps (the launcher's choice where the shared memory holds them): the model's
     * shape in the graph's grid, parts of 13-14 tiles a warp (3 stages wrap), head_dim 32 (V
     * fragments of 4 dims) */
    f += run_decode(7, 16, 2, 256, 16, la, 262144, 0, KV_DTYPE_FP8, 0.05f, 0.1f, 1, 8);
    f += run_decode(1, 16, 2, 256, 16, l2, 8192, 3, KV_DTYPE_FP8, 0.05f, 0.1f, 1, 8);
    f += run_decode(2, 4, 2, 32, 7, lc, 3000, 3, KV_DTYPE_FP8, 0.1f, 0.1f, 1, 8);
    /* an empty sequence (zeros times the gate), the model's shape at batch 1 in the graph's grid
     * (66 parts) */
    static const int ld[] = {0, 33, 2048};
    f += run_decode(3, 16, 2, 256, 16, ld, 4096, 0, KV_DTYPE_FP8, 0.05f, 0.1f, 1, 8);
    f += run_decode(3, 16, 2, 256, 16, ld, 4096, 0, KV_DTYPE_BF16, 1, 1, 1, 4);
    f += run_decode(1, 16, 2, 256, 16, l1, 262144, 0, KV_DTYPE_FP8, 0.05f, 0.1f, 1, 8);
    if (quick)
        return f;
    f += run_decode(1, 2, 1, 128, 16, l2, 262144, 0, KV_DTYPE_BF16, 1, 1, 0);
    f += run_decode(7, 16, 2, 256, 16, la, 262144, 0, KV_DTYPE_FP8, 0.05f, 0.1f, 1);
    /* the launcher's grid of 2 parts (3 * 96 heads): blocks walk up to 3 chunks */
    f += run_decode(3, 96, 12, 64, 16, lb, 8192, 0, KV_DTYPE_BF16, 1, 1, 1);
    /* small head_dims: 4 keys per warp at once (64; 40 with 3 of each 8 lanes idle), 32 (8) */
    f += run_decode(2, 8, 2, 64, 7, lc, 3000, 3, KV_DTYPE_FP8, 0.1f, 0.1f, 1);
    f += run_decode(2, 6, 3, 40, 5, lc, 2100, 2, KV_DTYPE_BF16, 1, 1, 1);
    f += run_decode(2, 4, 4, 8, 5, lc, 2100, 1, KV_DTYPE_FP8, 0.1f, 0.1f, 0);
    return f;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0; /* sanitizer runs */
    static const int t3[] = {7, 1, 0, 40}, p3[] = {0, 70, 9, 5};
    static const int t1[] = {33}, p1[] = {3};
    int f = 0;
    for (int path = 1; path <= 2; path++) {
        f += run(4, t3, p3, 8, 2, 64, 16, KV_DTYPE_BF16, 1, 1, path, 1);
        f += run(4, t3, p3, 6, 3, 32, 5, KV_DTYPE_FP8, 0.05f, 0.03f, path, 0);
        f += run(1, t1, p1, 4, 1, 256, 7, KV_DTYPE_BF16, 1, 1, path, 1);
        f += run(1, t1, p1, 16, 2, 256, 16, KV_DTYPE_FP8, 0.02f, 0.05f, path, 1);
    }
    f += run(1, t1, p1, 9, 3, 40, 5, KV_DTYPE_FP8, 0.1f, 0.1f, 1, 1);
    /* FLASH (bf16 caches): several 64-key tiles (the double buffer's both halves, the causal
     * mask only on the last ones), blocks of 128 flattened rows past one tile, rows past the
     * chunk's end, an empty chunk, GQA 8 at head_dim 256 (the model's shape) */
    static const int t4[] = {37, 1, 0, 300}, p4[] = {150, 203, 9, 0};
    static const int t5[] = {20}, p5[] = {190};
    f += run(4, t4, p4, 8, 2, 64, 16, KV_DTYPE_BF16, 1, 1, 3, 1);
    f += run(1, t5, p5, 16, 2, 256, 16, KV_DTYPE_BF16, 1, 1, 3, 1);
    /* FLASH on e4m3 caches (staged, widened to fp16): the model's shape, scales */
    f += run(1, t5, p5, 16, 2, 256, 16, KV_DTYPE_FP8, 0.05f, 0.03f, 3, 1);
    f += run(4, t4, p4, 8, 2, 64, 16, KV_DTYPE_FP8, 1, 1, 3, 0);
    /* FLASH on wgmma (path 5): the same cases, head dims 64 / 128 / 256, bf16 and e4m3 */
    f += run(1, t5, p5, 16, 2, 256, 16, KV_DTYPE_BF16, 1, 1, EMU_PATH_WG, 1);
    f += run(4, t4, p4, 8, 2, 64, 16, KV_DTYPE_BF16, 1, 1, EMU_PATH_WG, 1);
    f += run(1, t5, p5, 16, 2, 256, 16, KV_DTYPE_FP8, 0.05f, 0.03f, EMU_PATH_WG, 1);
    if (!quick) {
        f += run(4, t4, p4, 8, 2, 64, 16, KV_DTYPE_FP8, 1, 1, EMU_PATH_WG, 0);
        f += run(4, t3, p3, 4, 2, 128, 5, KV_DTYPE_BF16, 1, 1, EMU_PATH_WG, 0);
    }
    /* split (path 4): decode rows (one token an item) and verify windows (4, 9 rows), parts
     * that get no key tile (3 parts of 1 tile), parts of several tiles, one part */
    static const int t6[] = {1, 1, 4, 9, 1}, p6[] = {0, 200, 100, 37, 31};
    split_parts = 3;
    f += run(5, t6, p6, 16, 2, 256, 16, KV_DTYPE_BF16, 1, 1, 4, 1);
    split_parts = 1;
    f += run(5, t6, p6, 8, 2, 64, 16, KV_DTYPE_BF16, 1, 1, 4, 0);
    if (!quick) {
        split_parts = 7;
        f += run(5, t6, p6, 4, 2, 128, 7, KV_DTYPE_BF16, 1, 1, 4, 1);
        f += run(4, t3, p3, 4, 2, 128, 5, KV_DTYPE_BF16, 1, 1, 3, 0);
        f += run(1, t1, p1, 4, 1, 256, 7, KV_DTYPE_BF16, 1, 1, 3, 1);
    }
    f += decode_cases(quick);
    printf("failures=%d\n", f);
    return f != 0;
}
