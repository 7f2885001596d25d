// fused_add_rmsnorm (the float4 register kernel at 1..3 chunks per thread, and the shared-memory
// one for dim % 4 != 0), argmax (16-byte loads, ties inside a load and across threads, NaNs,
// the scalar form for vocab % 4 != 0) and attn_prep (gate split, q/k norms, rope, cache stores:
// bf16 and fp8, a partial warp, a row with slot -1) through their real launchers vs the CPU
// references. Tolerance for the norms: 1e-5 relative (fp32 sums in another order); cache bytes
// may differ by an ulp where a value sits on a rounding boundary (at most 1 in 1,000).
// embed_rmsnorm (the gather and the first norm in one launch) against embed_ref + rmsnorm_ref:
// the rows exactly, the norm at 1e-5, an id out of range a zero row.
#include "emu_kw.h"
#include "fused_add_rmsnorm_emu.inc"
#include "argmax_emu.inc"
#include "attn_prep_emu.inc"
#include "rmsnorm_emu.inc"
#include "embed_emu.inc"
extern "C" {
#include "kdtype.h"
}

static int run_norm(int rows, int dim, float off)
{
    const size_t n = (size_t)rows * dim;
    float *x = (float *)emu_alloc(n * 4), *res = (float *)emu_alloc(n * 4), *w = (float *)emu_alloc((size_t)dim * 4);
    float *out = (float *)emu_alloc(n * 4), *rref = (float *)malloc(n * 4), *oref = (float *)malloc(n * 4);
    for (size_t i = 0; i < n; i++) { x[i] = runi(-2, 2); res[i] = runi(-2, 2); out[i] = NAN; }
    for (int i = 0; i < dim; i++) w[i] = runi(-0.5f, 0.5f);
    memcpy(rref, res, n * 4);
    int rc = fused_add_rmsnorm_ref(oref, rref, x, w, rows, dim, 1e-6f, off);
    g_emu_launched.clear();
    rc |= fused_add_rmsnorm_cuda(out, res, x, w, rows, dim, 1e-6f, off, 0);
    const kw_cmp a = kw_compare(out, oref, n, 1e-5, 1e-5), b = kw_compare(res, rref, n, 0, 0);
    const int fail = rc || a.bad || b.bad;
    printf("norm emu rows=%d dim=%d ran=%s: max_err/amax=%.2e bad=%zu resid_bad=%zu rc=%d %s\n", rows, dim,
           g_emu_launched.c_str(), a.max_err / a.amax, a.bad, b.bad, rc, fail ? "FAIL" : "ok");
    return fail;
}

static int run_embed_norm(int n_tok, int dim, int vocab)
{
    uint16_t *tab = (uint16_t *)emu_alloc((size_t)vocab * dim * 2);
    int32_t *ids = (int32_t *)emu_alloc((size_t)n_tok * 4);
    float *w = (float *)emu_alloc((size_t)dim * 4), *h = (float *)emu_alloc((size_t)n_tok * dim * 4),
          *x = (float *)emu_alloc((size_t)n_tok * dim * 4);
    float *hr = (float *)malloc((size_t)n_tok * dim * 4), *xr = (float *)malloc((size_t)n_tok * dim * 4);
    for (size_t i = 0; i < (size_t)vocab * dim; i++) tab[i] = kdtype_f32_to_bf16(runi(-1, 1));
    for (int i = 0; i < dim; i++) w[i] = runi(-0.5f, 0.5f);
    for (int t = 0; t < n_tok; t++) ids[t] = (t * 7 + 3) % vocab;
    if (n_tok > 1) ids[1] = vocab + 2; /* out of range: a zero row */
    for (size_t i = 0; i < (size_t)n_tok * dim; i++) h[i] = x[i] = NAN;
    int rc = embed_rmsnorm_ref(hr, xr, tab, ids, n_tok, dim, vocab, w, 1e-6f, 1.0f);
    g_emu_launched.clear();
    rc |= embed_rmsnorm_cuda(h, x, tab, ids, n_tok, dim, vocab, w, 1e-6f, 1.0f, 0);
    const kw_cmp a = kw_compare(h, hr, (size_t)n_tok * dim, 0, 0), b = kw_compare(x, xr, (size_t)n_tok * dim, 1e-5, 1e-5);
    const int fail = rc || a.bad || b.bad;
    printf("embed_rmsnorm emu tok=%d dim=%d ran=%s: h_bad=%zu x_bad=%zu rc=%d %s\n", n_tok, dim, g_emu_launched.c_str(),
           a.bad, b.bad, rc, fail ? "FAIL" : "ok");
    return fail;
}

static int run_argmax(int rows, int vocab)
{
    float *l = (float *)emu_alloc((size_t)rows * vocab * 4);
    int32_t *ids = (int32_t *)emu_alloc((size_t)rows * 4), ref[8];
    g_emu_launched.clear();
    unsigned long long *ws = (unsigned long long *)emu_alloc(argmax_ws_words(rows) * 8);
    memset(ws, 0, argmax_ws_words(rows) * 8);
    for (size_t i = 0; i < (size_t)rows * vocab; i++) l[i] = runi(-10, 10);
    l[vocab - 1] = 50; /* row 0: ties (one inside the 16-byte load of vocab/3) -> lower index */
    l[vocab / 3] = 50;
    if (vocab / 3 + 1 < vocab - 1) l[vocab / 3 + 1] = 50;
    if (rows > 1) { l[vocab + 1] = NAN; l[2 * vocab - 2] = 60; l[vocab + 3] = 60; }
    if (rows > 2) /* -0 before +0 as the maximum: equal, the lower index */
        for (int i = 0; i < vocab; i++) l[2 * (size_t)vocab + i] = i == 5 ? -0.0f : i == vocab - 2 ? 0.0f : -1.0f;
    int rc = argmax_ref(ref, l, rows, vocab);
    int bad = ref[0] != vocab / 3 || (rows > 2 && ref[2] != 5);
    for (int rep = 0; rep < 2; rep++) { /* twice: the words must be back at 0 */
        for (int r = 0; r < rows; r++) ids[r] = -7;
        rc |= argmax_cuda(ids, l, rows, vocab, ws, 0);
        for (int r = 0; r < rows; r++) bad += ids[r] != ref[r];
        for (size_t i = 0; i < argmax_ws_words(rows); i++) bad += ws[i] != 0;
    }
    printf("argmax emu rows=%d vocab=%d ran=%s: got %d ref %d, bad=%d rc=%d %s\n", rows, vocab, g_emu_launched.c_str(), ids[0], ref[0], bad, rc,
           rc || bad ? "FAIL" : "ok");
    return rc || bad;
}

static int run_prep(int n, int hq, int hkv, int hd, int rot, int gated, int dt)
{
    const size_t qd = (size_t)hq * hd, kd = (size_t)hkv * hd, slots = (size_t)n + 3, ns = gated ? 2 * qd : qd;
    const size_t eb = (size_t)kv_dtype_bytes(dt);
    float *src = (float *)emu_alloc(n * ns * 4), *k = (float *)emu_alloc(n * kd * 4), *v = (float *)emu_alloc(n * kd * 4);
    float *qn = (float *)emu_alloc(hd * 4), *kn = (float *)emu_alloc(hd * 4), *q = (float *)emu_alloc(n * qd * 4);
    float *g = (float *)emu_alloc(n * qd * 4), *rq = (float *)malloc(n * qd * 4), *rg = (float *)malloc(n * qd * 4);
    float *rk = (float *)malloc(n * kd * 4);
    int32_t *pos = (int32_t *)emu_alloc(n * 4), *map = (int32_t *)emu_alloc(n * 4);
    uint8_t *kc = (uint8_t *)emu_alloc(slots * kd * eb), *vc = (uint8_t *)emu_alloc(slots * kd * eb);
    uint8_t *rkc = (uint8_t *)calloc(slots * kd, eb), *rvc = (uint8_t *)calloc(slots * kd, eb);
    memset(kc, 0, slots * kd * eb);
    memset(vc, 0, slots * kd * eb);
    for (size_t i = 0; i < n * ns; i++) src[i] = runi(-3, 3);
    for (size_t i = 0; i < n * kd; i++) { k[i] = runi(-3, 3); v[i] = runi(-3, 3); }
    for (int i = 0; i < hd; i++) { qn[i] = runi(-0.5f, 0.5f); kn[i] = runi(-0.5f, 0.5f); }
    for (int t = 0; t < n; t++) { pos[t] = t * 20011 % 200000; map[t] = (int)slots - 1 - t; } /* distinct */
    if (n > 2) map[1] = -1;
    memcpy(rk, k, n * kd * 4);
    const float ks = dt == KV_DTYPE_FP8 ? 0.05f : 1.0f, vs = dt == KV_DTYPE_FP8 ? 0.03f : 1.0f;
    int rc = attn_prep_ref(rq, gated ? rg : NULL, src, rk, v, rkc, rvc, dt, ks, vs, qn, kn, pos, map, n, hq, hkv,
                           hd, rot, 1e-6f, 1e7f);
    rc |= attn_prep_cuda(q, gated ? g : NULL, src, k, v, kc, vc, dt, ks, vs, qn, kn, pos, map, n, hq, hkv, hd, rot,
                         1e-6f, 1e7f, 0);
    const kw_cmp a = kw_compare(q, rq, n * qd, 2e-6, 1e-5), b = kw_compare(k, rk, n * kd, 2e-6, 1e-5);
    kw_cmp c = {0, 0, 0, 0};
    if (gated) c = kw_compare(g, rg, n * qd, 0, 0);
    size_t kdiff = 0, vdiff = 0;
    for (size_t i = 0; i < slots * kd * eb; i++) { kdiff += kc[i] != rkc[i]; vdiff += vc[i] != rvc[i]; }
    const int fail = rc || a.bad || b.bad || c.bad || vdiff || kdiff * 1000 > slots * kd * eb + 999;
    printf("attn_prep emu n=%d hq=%d hkv=%d hd=%d rot=%d gated=%d dt=%d: q_bad=%zu k_bad=%zu gate_bad=%zu "
           "cache_diff=%zu/%zu rc=%d %s\n", n, hq, hkv, hd, rot, gated, dt, a.bad, b.bad, c.bad, kdiff, vdiff, rc,
           fail ? "FAIL" : "ok");
    return fail;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    int f = 0;
    f += run_norm(2, 2048, 1.0f);  /* the model's: 512 threads, one float4 each */
    f += run_norm(1, 1002, 1.0f);  /* shared-memory kernel */
    f += run_norm(2, 36, 0.0f);    /* 9 float4: one partial warp */
    f += run_embed_norm(3, 2048, 50);
    f += run_embed_norm(2, 300, 40); /* 128 threads, a partial round */
    f += run_argmax(2, 1000);
    f += run_argmax(3, 1001);
    f += run_argmax(3, 40000); /* 5 blocks a row */
    f += run_prep(3, 4, 2, 40, 16, 1, KV_DTYPE_BF16);
    f += run_prep(2, 2, 1, 72, 72, 0, KV_DTYPE_FP8);
    if (!quick) {
        f += run_norm(1, 8196, 1.0f);  /* 3 chunks per thread, the last one partial */
        f += run_norm(1, 12288, 0.0f); /* 3 chunks, 1024 threads */
        f += run_argmax(1, 248320);
        f += run_prep(2, 16, 2, 256, 64, 1, KV_DTYPE_FP8); /* the model's heads */
    }
    printf("failures=%d\n", f);
    return f != 0;
}
