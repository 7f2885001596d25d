// logit_proc_kernel (real source, launcher cut) on the host emulator vs logit_proc_ref, bit for
// bit (as ktest_logit_proc requires on the GPU): bias pairs (repeated, out-of-range, onto a NaN),
// banned ids, allow masks (one all clear), rows without processors.
#include "emu.h"
#include "logit_proc_emu.inc"

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }

static int run(int B, int V)
{
    const int W = logit_proc_mask_words(V), NB = 12, NN = 5;
    const size_t n = (size_t)B * V;
    float *l = (float *)emu_alloc(n * 4), *ref = (float *)malloc(n * 4);
    int32_t *bi = (int32_t *)emu_alloc(sizeof(int32_t) * B * NB);
    float *bv = (float *)emu_alloc(sizeof(float) * B * NB);
    uint32_t *ban = (uint32_t *)emu_alloc(sizeof(uint32_t) * B * NN);
    uint32_t *al = (uint32_t *)emu_alloc(sizeof(uint32_t) * B * W);
    logit_proc_row *rows = (logit_proc_row *)emu_alloc(sizeof(logit_proc_row) * B);
    for (size_t i = 0; i < n; i++) l[i] = runi(-6, 6);
    for (int r = 0; r < B; r++) {
        int nb = (int)(ru32() % (NB + 1)), nn = (int)(ru32() % (NN + 1));
        if (r % 4 == 0) nb = nn = 0;
        l[(size_t)r * V + 3] = NAN;
        for (int i = 0; i < nb; i++) { bi[r * NB + i] = (int32_t)(ru32() % (V + 20)) - 10; bv[r * NB + i] = runi(-100, 100); }
        if (nb >= 3) { bi[r * NB + 1] = bi[r * NB]; bi[r * NB + 2] = 3; }
        for (int i = 0; i < nn; i++) ban[r * NN + i] = ru32() % (V + 4);
        for (int w = 0; w < W; w++) al[r * W + w] = r == 5 ? 0u : ru32();
        rows[r] = logit_proc_row{r * NB, nb, r * NN, nn, r % 3 ? r * W : -1, 0};
    }
    memcpy(ref, l, n * 4);
    if (logit_proc_ref(ref, B, V, rows, bi, bv, ban, al) != 0) { printf("ref failed\n"); return 1; }
    emu_launch(dim3(B), LP_THREADS, [&] { logit_proc_kernel(l, V, rows, bi, bv, ban, al); });
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&l[i], &ref[i], 4) != 0 && bad++ < 3) printf("  at %zu: got %a ref %a\n", i, l[i], ref[i]);
    printf("logit_proc emu B=%d V=%d differing=%zu %s\n", B, V, bad, bad ? "FAIL" : "ok");
    return bad != 0;
}

int main()
{
    int f = run(12, 1001) + run(3, 70001);
    printf("failures=%d\n", f);
    return f != 0;
}
