// moe_router_cuda (router GEMV + shared gate + top-k in one launch, the last block routing)
// through its real launcher vs moe_router_ref, also with the blocks in reverse order
// (EMU_BLOCK_ORDER=reverse: the routing block is then another one), and twice in a row (the
// counter must be back at 0). Logits at the cores tolerance (fp32 sums), ids exact (random
// logits: no near ties at this size), weights 1e-5.
#include "emu_kw.h"
#include "moe_route_emu.inc"

static int run(int fmt, int E, int K, int H, int n_tok, bool shared, bool zero_x = false)
{
    const int sk = fmt == KW_FMT_FP8 ? KW_SCALE_CHANNEL : 0;
    kweight r = kw_make(fmt, sk, 1, E, H, H), sg = kw_make(fmt, sk, 1, 2, H, H);
    const int stride = K + (shared ? 1 : 0);
    float *x = (float *)emu_alloc((size_t)n_tok * H * 4);
    for (int i = 0; i < n_tok * H; i++) x[i] = zero_x ? 0.0f : runi(-1, 1); /* zero: all logits tie */
    float *lg = (float *)emu_alloc((size_t)n_tok * E * 4), *sl = (float *)emu_alloc((size_t)n_tok * 2 * 4);
    float *w = (float *)emu_alloc((size_t)n_tok * stride * 4);
    int32_t *ids = (int32_t *)emu_alloc((size_t)n_tok * stride * 4);
    unsigned *cnt = (unsigned *)emu_alloc(4);
    *cnt = 0;
    float *rlg = (float *)malloc((size_t)n_tok * E * 4), *rsl = (float *)malloc((size_t)n_tok * 2 * 4),
          *rw = (float *)malloc((size_t)n_tok * stride * 4);
    int32_t *rid = (int32_t *)malloc((size_t)n_tok * stride * 4);
    int rc = moe_router_ref(rid, rw, rlg, rsl, x, &r, shared ? &sg : NULL, n_tok, K);
    int bad = 0;
    for (int rep = 0; rep < 2; rep++) {
        for (int i = 0; i < n_tok * stride; i++) { ids[i] = -7; w[i] = NAN; }
        rc |= moe_router_cuda(ids, w, lg, sl, cnt, x, &r, shared ? &sg : NULL, n_tok, K, 0);
        const kw_cmp c = kw_compare(lg, rlg, (size_t)n_tok * E, 1e-5, 1e-4);
        const kw_cmp cw = kw_compare(w, rw, (size_t)n_tok * stride, 1e-5, 1e-5);
        bad += (int)c.bad + (int)cw.bad + (*cnt != 0);
        for (int i = 0; i < n_tok * stride; i++) bad += ids[i] != rid[i];
        if (shared)
            for (int t = 0; t < n_tok; t++) bad += fabsf(sl[2 * t] - rsl[2 * t]) > 1e-4f * (1 + fabsf(rsl[2 * t]));
    }
    /* the outputs' bits (logits, ids, weights): the same with every build of the kernel
     * (-DMOE_ROUTER_RB=1 against the default: diff the two runs' lines) */
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](const void *p, size_t n) {
        for (size_t i = 0; i < n; i++)
            h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    };
    mix(lg, (size_t)n_tok * E * 4);
    mix(ids, (size_t)n_tok * stride * 4);
    mix(w, (size_t)n_tok * stride * 4);
    if (shared)
        for (int t = 0; t < n_tok; t++)
            mix(&sl[2 * t], 4);
    printf("router emu fmt=%d E=%d K=%d H=%d tok=%d shared=%d zero=%d: bad=%d counter=%u rc=%d "
           "bits=%016llx %s\n",
           fmt, E, K, H, n_tok, shared, (int)zero_x, bad, *cnt, rc, (unsigned long long)h,
           rc || bad ? "FAIL" : "ok");
    return rc || bad;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    int f = 0;
    f += run(KW_FMT_BF16, 64, 8, 256, 1, true);
    f += run(KW_FMT_BF16, 40, 4, 128, 3, false);
    /* one token: the whole block routes it (route_token_block), chunks of 32 experts ranked */
    f += run(KW_FMT_BF16, 40, 4, 128, 1, false); /* E not a multiple of 32 */
    f += run(KW_FMT_BF16, 64, 8, 128, 1, true, true); /* every logit equal: experts 0..7 */
    if (!quick) {
        f += run(KW_FMT_BF16, 256, 8, 512, 8, true); /* the model's E and top-k, 8 tokens */
        f += run(KW_FMT_NVFP4, 48, 6, 256, 2, true);
        f += run(KW_FMT_BF16, 256, 8, 512, 1, true);  /* the model's batch-1 step */
        f += run(KW_FMT_BF16, 300, 8, 256, 1, true);  /* more experts than threads */
        f += run(KW_FMT_BF16, 64, 32, 128, 1, false); /* top_k 32: whole chunks are candidates */
    }
    f += run(KW_FMT_BF16, 40, 4, 4104, 1, true); /* one token past the chunks loaded early */
    f += run(KW_FMT_BF16, 40, 4, 4104, 3, true); /* three tokens past them */
    /* 2-8 tokens (MOE_ROUTER_RB rows a block): E not a multiple of the rows, every logit equal
     * (ties: experts 0..K-1), more experts than 256 (route_token_rx's 16 values a lane) */
    f += run(KW_FMT_BF16, 41, 4, 4104, 4, true);
    f += run(KW_FMT_BF16, 64, 8, 128, 3, true, true);
    f += run(KW_FMT_BF16, 300, 8, 256, 5, true);
    f += run(KW_FMT_FP8, 42, 8, 256, 2, false);
    /* the launcher refuses what it cannot do: nothing launched */
    {
        kweight r = kw_make(KW_FMT_BF16, 0, 1, 600, 64, 64), s = kw_make(KW_FMT_BF16, 0, 1, 2, 64, 64);
        float *d = (float *)emu_alloc(64 * 64 * 4);
        unsigned *c = (unsigned *)emu_alloc(4);
        int ok = moe_router_cuda((int32_t *)d, d, d, d, c, d, &r, &s, 1, 8, 0) == ERR_UNSUPPORTED; /* E > 512 */
        kweight r2 = kw_make(KW_FMT_BF16, 0, 1, 64, 64, 64);
        ok &= moe_router_cuda((int32_t *)d, d, d, d, c, d, &r2, &s, 9, 8, 0) == ERR_UNSUPPORTED; /* 9 tokens */
        ok &= moe_router_cuda((int32_t *)d, d, d, d, c, d + 1, &r2, &s, 1, 8, 0) == ERR_INVAL;  /* x misaligned */
        ok &= moe_router_cuda((int32_t *)d, d, d, NULL, c, d, &r2, &s, 1, 8, 0) == ERR_INVAL;   /* no sh_logits */
        printf("router emu launcher checks: %s\n", ok ? "ok" : "FAIL");
        f += !ok;
    }
    printf("failures=%d\n", f);
    return f != 0;
}
