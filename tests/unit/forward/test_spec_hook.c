/* spec_accept_hooked (model/spec.h): the per-row hook a grammar or a min_tokens ban rides in a
 * speculative round. On hand-made logits (V = 8, k = 3):
 *   - with a hook that changes nothing, every outcome equals spec_accept's (greedy and sampled,
 *     many seeds), and emit sees exactly the emitted tokens, in order;
 *   - greedy, a mask that allows the drafts: all accepted plus the masked bonus;
 *   - greedy, row 1's mask refuses draft 2 (the unmasked argmax): rejected, the correction is
 *     the best allowed token of row 1;
 *   - sampled, a draft the row's mask refuses is never accepted (probability 0), over 200 seeds;
 *   - emit returning 1 (a stop) ends the round at that token; a row error ends it with the error. */
#include <math.h>
#include <string.h>

#include "common/err.h"
#include "model/sample.h"
#include "model/spec.h"
#include "test.h"

#define V 8
#define K 3

struct rec {
    int n;
    int32_t tok[K + 1];
    uint32_t allow[K + 1]; // row i's mask (bit set over 8 ids); 0 = no mask
    int stop_at;           // emit returns 1 for this token, -1 none
    int fail_row;          // row returns ERR_STATE here, -1 none
};

static int row_fn(void *u, int i, struct sample_params *p)
{
    struct rec *r = u;
    if (i == r->fail_row)
        return ERR_STATE;
    p->allow = r->allow[i] ? &r->allow[i] : NULL;
    return 0;
}

static int emit_fn(void *u, int i, int32_t t)
{
    struct rec *r = u;
    CHECK_EQ_INT(i, r->n);
    r->tok[r->n++] = t;
    return t == r->stop_at ? 1 : 0;
}

static void make_logits(float *lg)
{
    /* row i: id (i + 1) best (the drafts below are 1, 2, 3), id 5 second, the rest spread */
    for (int i = 0; i <= K; i++)
        for (int v = 0; v < V; v++)
            lg[i * V + v] = v == i + 1 ? 4.0f : v == 5 ? 3.0f : 0.25f * (float)v;
}

int main(void)
{
    struct sample_ctx *sc = sample_ctx_create(V);
    float lg[(K + 1) * V], probs[V];
    make_logits(lg);
    const int32_t drafts[K] = {1, 2, 3};
    int32_t hist[16] = {4, 1, 2, 3}, out[K + 1], out2[K + 1];
    struct sample_params greedy, hot;
    sample_params_default(&greedy);
    greedy.temperature = 0.0f;
    sample_params_default(&hot);
    hot.temperature = 1.0f;

    /* a hook that changes nothing: the same outcomes as spec_accept */
    for (int s = 0; s < 100; s++) {
        const struct sample_params *p = s % 2 ? &hot : &greedy;
        struct sample_rng a, b;
        sample_rng_seed(&a, (uint64_t)s);
        b = a;
        struct rec r = {.stop_at = -1, .fail_row = -1};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        int na = spec_accept(sc, p, lg, V, drafts, K, hist, 1, &a, probs, out);
        int nb = spec_accept_hooked(sc, p, lg, V, drafts, K, hist, 1, &b, probs, out2, &h);
        CHECK_EQ_INT(na, nb);
        CHECK(memcmp(out, out2, sizeof(int32_t) * (size_t)(na > 0 ? na : 0)) == 0);
        CHECK(memcmp(&a, &b, sizeof a) == 0);
        CHECK_EQ_INT(r.n, nb);
        CHECK(memcmp(r.tok, out2, sizeof(int32_t) * (size_t)r.n) == 0);
    }
    /* greedy, masks that allow the drafts: all three accepted, the bonus is row 3's best
     * allowed (4 is best but refused: 5) */
    {
        struct rec r = {.allow = {0x0e, 0x0e, 0x0e, 0x21}, .stop_at = -1, .fail_row = -1};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        struct sample_rng g;
        sample_rng_seed(&g, 1);
        CHECK_EQ_INT(spec_accept_hooked(sc, &greedy, lg, V, drafts, K, hist, 1, &g, probs, out, &h),
                     4);
        CHECK(out[0] == 1 && out[1] == 2 && out[2] == 3 && out[3] == 5);
        CHECK_EQ_INT(r.n, 4);
    }
    /* greedy, row 1 refuses draft 2: the correction is row 1's best allowed, 5 */
    {
        struct rec r = {.allow = {0, 0xfb, 0, 0}, .stop_at = -1, .fail_row = -1};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        struct sample_rng g;
        sample_rng_seed(&g, 1);
        CHECK_EQ_INT(spec_accept_hooked(sc, &greedy, lg, V, drafts, K, hist, 1, &g, probs, out, &h),
                     2);
        CHECK(out[0] == 1 && out[1] == 5);
        CHECK(r.n == 2 && r.tok[1] == 5);
    }
    /* sampled: row 0 refuses draft 1, which is never accepted nor emitted */
    for (int s = 0; s < 200; s++) {
        struct rec r = {.allow = {0xfd, 0, 0, 0}, .stop_at = -1, .fail_row = -1};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        struct sample_rng g;
        sample_rng_seed(&g, 1000 + (uint64_t)s);
        int n = spec_accept_hooked(sc, &hot, lg, V, drafts, K, hist, 1, &g, probs, out, &h);
        CHECK_EQ_INT(n, 1);
        CHECK(out[0] != 1);
    }
    /* a stop emitted as an accepted draft ends the round there */
    {
        struct rec r = {.stop_at = 2, .fail_row = -1};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        struct sample_rng g;
        sample_rng_seed(&g, 1);
        CHECK_EQ_INT(spec_accept_hooked(sc, &greedy, lg, V, drafts, K, hist, 1, &g, probs, out, &h),
                     2);
        CHECK(out[0] == 1 && out[1] == 2 && r.n == 2);
    }
    /* a row error ends the round with it */
    {
        struct rec r = {.stop_at = -1, .fail_row = 2};
        const struct spec_hook h = {&r, row_fn, emit_fn};
        struct sample_rng g;
        sample_rng_seed(&g, 1);
        CHECK_EQ_INT(spec_accept_hooked(sc, &greedy, lg, V, drafts, K, hist, 1, &g, probs, out, &h),
                     ERR_STATE);
    }
    sample_ctx_destroy(sc);
    return test_result();
}
