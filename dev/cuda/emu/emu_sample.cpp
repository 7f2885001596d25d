// sample_kernel (real source, launcher cut) on the host emulator vs sample_ref: tokens, penalised
// logits and logprobs must match exactly (as test_sample requires on the GPU).
#include "emu.h"
#include "sample_emu.inc"

static uint64_t rs = 88172645463325252ull;
static uint32_t ru32() { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return (uint32_t)(rs >> 11); }
static float runi(float lo, float hi) { return lo + (hi - lo) * (float)(ru32() & 0xffffff) / 16777216.0f; }
static double rand_u() { return (double)(((uint64_t)ru32() << 21) ^ ru32()) / 9007199254740992.0 * 0.999; }

static void fill_row(float *l, int V, int kind)
{
    for (int i = 0; i < V; i++) l[i] = runi(-10, 10);
    switch (kind) {
    case 1: l[ru32() % V] = 45.0f; break;
    case 2: for (int i = 0; i < V; i++) l[i] = 2.25f; break;
    case 3: for (int i = 0; i < V; i++) l[i] = roundf(l[i] * 0.5f); break;
    case 4: for (int i = 0; i < V; i++) if (ru32() % 3 == 0) l[i] = -INFINITY;
            l[ru32() % V] = -0.0f; l[ru32() % V] = 0.0f; break;
    case 5: for (int i = 0; i < V; i++) l[i] = runi(-0.01f, 0.01f); break;
    case 6: for (int i = 0; i < V; i++) l[i] = -INFINITY; break;
    case 7: for (int i = 0; i < V; i++) if (ru32() % 5 == 0) l[i] = NAN; break;
    case 8: l[ru32() % V] = INFINITY; break;
    default: break;
    }
}

static int run(int B, int V)
{
    static const float temps[] = {0.0f, 1e-6f, 0.3f, 0.7f, 1.0f, 1.0f, 1.5f, 3.0f};
    static const float tops[] = {1.0f, 1.0f, 0.999f, 0.95f, 0.7f, 0.3f, 1e-3f, 2.0f};
    static const float minps[] = {0.0f, 0.0f, 0.0f, 0.01f, 0.1f, 0.5f, 1.0f};
    const int topk[] = {0, 0, -1, 1, 2, 7, 50, 1000, V - 1, V, V + 5, 3, 20};
    const size_t n = (size_t)B * V;
    float *l = (float *)malloc(n * 4), *lr = (float *)malloc(n * 4);
    sample_row *rows = (sample_row *)calloc(B, sizeof(sample_row));
    int32_t *ptok = (int32_t *)malloc(sizeof(int32_t) * B * 64), *pcnt = (int32_t *)malloc(sizeof(int32_t) * B * 64);
    int *scratch = (int *)calloc(V, sizeof(int));
    int npen = 0;
    for (int b = 0; b < B; b++) {
        fill_row(l + (size_t)b * V, V, (int)(ru32() % 9));
        sample_row *r = &rows[b];
        r->temperature = temps[ru32() % 8];
        r->top_p = tops[ru32() % 8];
        r->min_p = minps[ru32() % 7];
        r->top_k = topk[ru32() % 13];
        r->repetition_penalty = 1.0f;
        if (ru32() % 2) {
            r->repetition_penalty = ru32() % 2 ? 1.3f : 0.7f;
            r->presence_penalty = ru32() % 2 ? 0.5f : 0.0f;
            r->frequency_penalty = ru32() % 2 ? 0.25f : -0.1f;
        }
        uint32_t e = ru32() % 10;
        r->u = e == 0 ? 0.0 : e == 1 ? 1.0 - 1.0 / 9007199254740992.0 : rand_u();
        int32_t hist[60];
        int nh = (int)(ru32() % 60);
        for (int i = 0; i < nh; i++) hist[i] = (int)(ru32() % (uint32_t)(V < 64 ? V : 64)) - (ru32() % 7 == 0 ? 3 : 0);
        r->pen_off = npen;
        r->pen_n = sample_pen_pairs(hist, nh, V, scratch, ptok + npen, pcnt + npen);
        npen += r->pen_n;
    }
    memcpy(lr, l, n * 4);
    int32_t *tr = (int32_t *)malloc(B * 4), *tg = (int32_t *)malloc(B * 4);
    float *pr = (float *)malloc(B * 4), *pg = (float *)malloc(B * 4);
    sample_ref(tr, pr, lr, rows, ptok, pcnt, B, V, NULL);
    emu_launch(dim3(B), NT, [&] { sample_kernel(tg, pg, l, rows, ptok, pcnt, V); });
    int bad = 0, badl = 0, badp = 0;
    for (int b = 0; b < B; b++) {
        if (tg[b] != tr[b] && bad++ < 5)
            printf("  row %d tok got %d ref %d (T=%g k=%d p=%g minp=%g u=%g)\n", b, tg[b], tr[b], rows[b].temperature,
                   rows[b].top_k, rows[b].top_p, rows[b].min_p, rows[b].u);
        if (memcmp(l + (size_t)b * V, lr + (size_t)b * V, (size_t)V * 4) && badl++ < 3)
            for (int i = 0; i < V; i++)
                if (__float_as_uint(l[(size_t)b * V + i]) != __float_as_uint(lr[(size_t)b * V + i])) {
                    printf("  row %d logit %d got 0x%08x ref 0x%08x\n", b, i, __float_as_uint(l[(size_t)b * V + i]),
                           __float_as_uint(lr[(size_t)b * V + i]));
                    break;
                }
        if (!(fabs((double)pg[b] - pr[b]) <= 1e-6 + 1e-6 * fabs(pr[b]))) badp++;
    }
    printf("sample emu B=%d V=%d: token_mismatch=%d logit_rows=%d logprob=%d %s\n", B, V, bad, badl, badp,
           bad || badl || badp ? "FAIL" : "ok");
    return bad || badl || badp;
}

int main(int argc, char **argv)
{
    int f = 0;
    if (argc > 1 && strcmp(argv[1], "quick") == 0) { /* sanitizer runs */
        f += run(6, 7);
        f += run(10, 300);
        printf("failures=%d\n", f);
        return f != 0;
    }
    f += run(12, 1);
    f += run(24, 7);
    f += run(40, 1001);
    f += run(12, 4099);
    printf("failures=%d\n", f);
    return f != 0;
}
