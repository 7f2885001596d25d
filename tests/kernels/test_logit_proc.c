/* logit_proc (logit bias, banned ids, allow masks on the device) vs logit_proc_ref, bit for bit:
 * rows with and without each processor, repeated and out-of-range ids, NaN logits, additions
 * that give denormals (the build's fast math must not flush them: the kernel's adds are
 * add.rn.f32), a row with every bit of its mask clear, V = 1001 and the model's 248,320. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "ktest.h"
#include "logit_proc.h"
#include "test.h"

#define B 24
#define NB 16
#define NN 6

static void run(int V)
{
    const int W = logit_proc_mask_words(V);
    const size_t n = (size_t)B * (size_t)V;
    float *l = malloc(n * 4), *ref = malloc(n * 4), *got = malloc(n * 4);
    int32_t *bias_ids = malloc(sizeof(int32_t) * B * NB);
    float *bias_vals = malloc(sizeof(float) * B * NB);
    uint32_t *ban = malloc(sizeof(uint32_t) * B * NN), *allow = malloc(sizeof(uint32_t) * B * W);
    struct logit_proc_row rows[B];
    ktest_fill(l, n, -6, 6);
    for (int r = 0; r < B; r++) {
        float *row = l + (size_t)r * V;
        row[r % V] = NAN;
        row[(r + 5) % V] = 1e-38f; /* + -1e-38f below: a denormal-range result */
        int nb = (int)(ktest_u32() % (NB + 1)), nn = (int)(ktest_u32() % (NN + 1));
        if (r % 4 == 0)
            nb = nn = 0;
        for (int i = 0; i < nb; i++) {
            bias_ids[r * NB + i] = (int32_t)(ktest_u32() % (uint32_t)(V + 20)) - 10;
            bias_vals[r * NB + i] = ktest_uniform(-100, 100);
        }
        if (nb >= 3) {
            bias_ids[r * NB + 1] = bias_ids[r * NB]; /* repeated */
            bias_ids[r * NB + 2] = (r + 5) % V;
            bias_vals[r * NB + 2] = -0.99e-38f;
        }
        for (int i = 0; i < nn; i++)
            ban[r * NN + i] = ktest_u32() % (uint32_t)(V + 4);
        for (int w = 0; w < W; w++)
            allow[r * W + w] = r == 5 ? 0u : ktest_u32();
        rows[r] = (struct logit_proc_row){.bias_off = r * NB, .n_bias = nb, .ban_off = r * NN,
                                          .n_ban = nn, .allow_off = r % 3 ? r * W : -1};
    }
    memcpy(ref, l, n * 4);
    CHECK_EQ_INT(logit_proc_ref(ref, B, V, rows, bias_ids, bias_vals, ban, allow), 0);
    float *dl = ktest_dev_from(l, n * 4);
    struct logit_proc_row *dr = ktest_dev_from(rows, sizeof rows);
    int32_t *dbi = ktest_dev_from(bias_ids, sizeof(int32_t) * B * NB);
    float *dbv = ktest_dev_from(bias_vals, sizeof(float) * B * NB);
    uint32_t *dban = ktest_dev_from(ban, sizeof(uint32_t) * B * NN);
    uint32_t *dal = ktest_dev_from(allow, sizeof(uint32_t) * B * W);
    CHECK_EQ_INT(logit_proc_cuda(dl, B, V, dr, dbi, dbv, dban, dal, 0), 0);
    ktest_to_host(got, dl, n * 4);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], 4) != 0 && bad++ < 3)
            fprintf(stderr, "  V=%d at %zu: got %a ref %a\n", V, i, got[i], ref[i]);
    fprintf(stderr, "logit_proc V=%d rows=%d differing=%zu %s\n", V, B, bad, bad ? "FAIL" : "ok");
    CHECK(bad == 0);
    CHECK_EQ_INT(logit_proc_cuda(dl, 0, V, dr, NULL, NULL, NULL, NULL, 0), 0);
    CHECK_EQ_INT(logit_proc_cuda(dl, 1, 0, dr, NULL, NULL, NULL, NULL, 0), ERR_INVAL);
    ktest_free(dl), ktest_free(dr), ktest_free(dbi), ktest_free(dbv), ktest_free(dban),
        ktest_free(dal);
    free(l), free(ref), free(got), free(bias_ids), free(bias_vals), free(ban), free(allow);
}

int main(void)
{
    ktest_require_gpu();
    ktest_seed(41);
    run(1001);
    run(248320);
    ktest_sync();
    return test_result();
}
