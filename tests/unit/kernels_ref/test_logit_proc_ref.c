/* logit_proc_ref (the reference of the device's logits processors, kernels/logit_proc.h) against
 * model/sample.c, which applies the same processors inside sample_token: for random rows with
 * logit bias (repeated and out-of-range ids included), banned ids and allow masks, sampling
 * with the processors in the params must give the same token and leave the rng in the same state
 * as sampling the reference-processed logits with no processors, greedy and at temperature 1.
 * Also the processed values directly: bias added once per pair, banned and disallowed ids -inf,
 * everything else bit for bit untouched. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "logit_proc.h"
#include "model/sample.h"
#include "test.h"

#define V 1003
#define ROWS 40

static struct sample_rng data;

static void one_row(struct sample_ctx *sc, int r)
{
    float l[V], lp[V];
    int32_t bias_ids[8];
    float bias_vals[8];
    uint32_t ban[4], allow[(V + 31) / 32];
    for (int i = 0; i < V; i++)
        l[i] = (float)(sample_rng_uniform(&data) * 10.0 - 5.0);
    if (r % 7 == 3)
        l[11] = NAN;
    const int nb = (int)(sample_rng_next(&data) % 9), nn = (int)(sample_rng_next(&data) % 5);
    for (int i = 0; i < nb; i++) {
        bias_ids[i] = (int32_t)(sample_rng_next(&data) % (V + 20)) - 10; /* some outside */
        bias_vals[i] = (float)(sample_rng_uniform(&data) * 200.0 - 100.0);
    }
    if (nb >= 2)
        bias_ids[1] = bias_ids[0]; /* a repeated id adds twice */
    for (int i = 0; i < nn; i++)
        ban[i] = (uint32_t)(sample_rng_next(&data) % (V + 5));
    const int masked = r % 3 != 0;
    for (int w = 0; w < (V + 31) / 32; w++)
        allow[w] = (uint32_t)sample_rng_next(&data) | (w == 0 ? 1u : 0u);
    struct logit_proc_row pr = {.bias_off = 0, .n_bias = nb, .ban_off = 0, .n_ban = nn,
                                .allow_off = masked ? 0 : -1};
    memcpy(lp, l, sizeof l);
    CHECK_EQ_INT(logit_proc_ref(lp, 1, V, &pr, bias_ids, bias_vals, ban, allow), 0);
    /* the values: recompute independently */
    for (int i = 0; i < V; i++) {
        float want = l[i];
        for (int k = 0; k < nb; k++)
            if (bias_ids[k] == i)
                want += bias_vals[k];
        for (int k = 0; k < nn; k++)
            if (ban[k] == (uint32_t)i)
                want = -INFINITY;
        if (masked && !(allow[i >> 5] >> (i & 31) & 1))
            want = -INFINITY;
        CHECK(memcmp(&want, &lp[i], sizeof want) == 0);
    }
    /* sample_token with the processors == sample_token on the processed row without them */
    for (int greedy = 0; greedy < 2; greedy++) {
        struct sample_params with, without;
        sample_params_default(&with);
        with.temperature = greedy ? 0.0f : 1.0f;
        without = with;
        with.bias_ids = bias_ids;
        with.bias_vals = bias_vals;
        with.n_bias = nb;
        with.ban_ids = ban;
        with.n_ban = nn;
        with.allow = masked ? allow : NULL;
        struct sample_rng a, b;
        sample_rng_seed(&a, 7 + (uint64_t)r);
        b = a;
        const int32_t ta = sample_token(sc, &with, l, NULL, 0, &a);
        const int32_t tb = sample_token(sc, &without, lp, NULL, 0, &b);
        CHECK_EQ_INT(ta, tb);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
    }
}

int main(void)
{
    struct sample_ctx *sc = sample_ctx_create(V);
    CHECK(sc != NULL);
    sample_rng_seed(&data, 5);
    for (int r = 0; r < ROWS; r++)
        one_row(sc, r);
    /* argument checks */
    float l[4] = {0};
    struct logit_proc_row pr = {.n_bias = 1, .allow_off = -1};
    CHECK_EQ_INT(logit_proc_ref(l, 1, 4, &pr, NULL, NULL, NULL, NULL), ERR_INVAL);
    CHECK_EQ_INT(logit_proc_ref(l, 1, 0, &pr, NULL, NULL, NULL, NULL), ERR_INVAL);
    sample_ctx_destroy(sc);
    return test_result();
}
