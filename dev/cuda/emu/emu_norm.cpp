// fused_add_rmsnorm (the float4 register kernel at 1..3 chunks per thread, and the shared-memory
// one for dim % 4 != 0) and argmax (16-byte loads, ties inside a load and across threads, NaNs,
// the scalar form for vocab % 4 != 0) through their real launchers vs the CPU references.
// Tolerance for the norm: 1e-5 relative (fp32 sums in another order).
#include "emu_kw.h"
#include "fused_add_rmsnorm_emu.inc"
#include "argmax_emu.inc"

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

static int run_argmax(int rows, int vocab)
{
    float *l = (float *)emu_alloc((size_t)rows * vocab * 4);
    int32_t *ids = (int32_t *)emu_alloc((size_t)rows * 4), ref[8];
    for (size_t i = 0; i < (size_t)rows * vocab; i++) l[i] = runi(-10, 10);
    l[vocab - 1] = 50; /* row 0: ties (one inside the 16-byte load of vocab/3) -> lower index */
    l[vocab / 3] = 50;
    if (vocab / 3 + 1 < vocab - 1) l[vocab / 3 + 1] = 50;
    if (rows > 1) { l[vocab + 1] = NAN; l[2 * vocab - 2] = 60; l[vocab + 3] = 60; }
    int rc = argmax_ref(ref, l, rows, vocab);
    rc |= argmax_cuda(ids, l, rows, vocab, 0);
    int bad = ref[0] != vocab / 3;
    for (int r = 0; r < rows; r++) bad += ids[r] != ref[r];
    printf("argmax emu rows=%d vocab=%d: got %d ref %d, bad=%d rc=%d %s\n", rows, vocab, ids[0], ref[0], bad, rc,
           rc || bad ? "FAIL" : "ok");
    return rc || bad;
}

int main(int argc, char **argv)
{
    const bool quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    int f = 0;
    f += run_norm(2, 2048, 1.0f);  /* the model's: 512 threads, one float4 each */
    f += run_norm(1, 1002, 1.0f);  /* shared-memory kernel */
    f += run_norm(2, 36, 0.0f);    /* 9 float4: one partial warp */
    f += run_argmax(2, 1000);
    f += run_argmax(3, 1001);
    if (!quick) {
        f += run_norm(1, 8196, 1.0f);  /* 3 chunks per thread, the last one partial */
        f += run_norm(1, 12288, 0.0f); /* 3 chunks, 1024 threads */
        f += run_argmax(1, 248320);
    }
    printf("failures=%d\n", f);
    return f != 0;
}
