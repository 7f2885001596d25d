/* Greedy speculative decoding on the random model: with oracle drafts (all right, a right
 * prefix, all wrong) and with MTP drafts, the emitted tokens equal plain one-token greedy
 * decoding, and the acceptance counts are what the drafts imply. */
#include "model/forward.h"
#include "model/forward_spec.h"
#include "model/mtp.h"
#include "model/sample.h"
#include "model/state.h"

#include "common/tpool.h"
#include "test.h"
#include "testmodel.h"

#include <stdlib.h>
#include <string.h>

enum { NP = 20, NG = 48, K = 3, CTX = 128 };

static struct tpool *tp;

/* plain greedy: prompt then NG tokens one at a time */
static void greedy_ref(const struct model *m, const int32_t *prompt, int32_t *gen)
{
    const int V = m->cfg.vocab_size;
    struct forward_ctx *fc = forward_ctx_create(m, NP, CTX, tp);
    struct seq_state *st = seq_state_create(m, CTX);
    float *lg = malloc(sizeof(float) * (size_t)V);
    CHECK_EQ_INT(forward_run(fc, m, st, prompt, NP, lg, NULL, 0), 0);
    for (int i = 0; i < NG; i++) {
        gen[i] = sample_argmax(lg, V);
        CHECK_EQ_INT(forward_run(fc, m, st, &gen[i], 1, lg, NULL, 0), 0);
    }
    free(lg);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
}

enum draft_mode { DRAFT_ORACLE, DRAFT_PREFIX1, DRAFT_WRONG, DRAFT_MTP };

/* speculative greedy with the given drafts; returns accepted drafts in total */
static int spec_run(const struct model *m, const int32_t *prompt, const int32_t *ref,
                    enum draft_mode mode, int32_t *gen, int *rounds)
{
    const int V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    struct forward_ctx *fc = forward_ctx_create(m, NP, CTX, tp);
    struct seq_state *st = seq_state_create(m, CTX);
    struct seq_snapshot *sn = seq_snapshot_create(st);
    float *lg = malloc(sizeof(float) * (size_t)((K + 1) * V));
    float *hid = malloc(sizeof(float) * (size_t)(NP * H));
    float *hbuf = malloc(sizeof(float) * (size_t)(NP * H));
    int32_t mtp_tok[NP], d[K], out[K + 1];
    int n_gen = 0, accepted = 0;
    *rounds = 0;
    CHECK_EQ_INT(forward_run(fc, m, st, prompt, NP, lg, hid, 0), 0);
    gen[n_gen++] = sample_argmax(lg, V);
    // MTP inputs of the first round: the prompt shifted by one plus the sampled token
    int n_mtp = NP, mtp_pos = 0;
    memcpy(mtp_tok, prompt + 1, sizeof(int32_t) * (NP - 1));
    mtp_tok[NP - 1] = gen[0];
    while (n_gen < NG) {
        for (int j = 0; j < K; j++) {
            const int i = n_gen + j;  // index in gen of the draft's target
            const int32_t right = i < NG ? ref[i] : 0;
            if (mode == DRAFT_ORACLE)
                d[j] = right;
            else if (mode == DRAFT_PREFIX1)
                d[j] = j == 0 ? right : (right + 1) % V;
            else
                d[j] = (right + 1) % V;
        }
        if (mode == DRAFT_MTP)
            CHECK_EQ_INT(mtp_draft_greedy(fc, m, st, mtp_tok, hid, mtp_pos, n_mtp, K, lg, hbuf,
                                          d),
                         0);
        const int pos = st->pos;
        int r = forward_spec_verify(fc, m, st, sn, gen[n_gen - 1], d, K, lg, hid, out, 0);
        CHECK(r >= 1 && r <= K + 1);
        if (r < 1)
            break;
        CHECK_EQ_INT(st->pos, pos + r);
        for (int j = 0; j + 1 < r; j++)
            CHECK_EQ_INT(out[j], d[j]);   // the accepted are the drafts
        if (mode == DRAFT_ORACLE && n_gen + K < NG)  // every draft had a reference
            CHECK_EQ_INT(r, K + 1);
        if (mode == DRAFT_PREFIX1 && n_gen < NG)
            CHECK_EQ_INT(r, 2);
        if (mode == DRAFT_WRONG)
            CHECK_EQ_INT(r, 1);
        accepted += r - 1;
        (*rounds)++;
        // next round's MTP pass: window positions pos..pos+r-1 with the tokens after them
        memcpy(mtp_tok, out, sizeof(int32_t) * (size_t)r);
        n_mtp = r;
        mtp_pos = pos;
        for (int j = 0; j < r && n_gen < NG; j++)
            gen[n_gen++] = out[j];
    }
    free(lg);
    free(hid);
    free(hbuf);
    seq_snapshot_destroy(sn);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
    return accepted;
}

int main(void)
{
    tp = tpool_create(2);
    struct model *m = testmodel_create("LFLLF", 21);
    int32_t prompt[NP], ref[NG], gen[NG];
    struct trng r = { 3 };
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)(trng_uniform(&r) * m->cfg.vocab_size);
    greedy_ref(m, prompt, ref);
    const char *names[] = { "oracle", "prefix1", "wrong", "mtp" };
    for (int mode = DRAFT_ORACLE; mode <= DRAFT_MTP; mode++) {
        int rounds = 0;
        memset(gen, 0xff, sizeof(gen));
        int acc = spec_run(m, prompt, ref, (enum draft_mode)mode, gen, &rounds);
        int same = memcmp(gen, ref, sizeof(gen)) == 0;
        fprintf(stderr, "drafts=%s rounds=%d accepted=%d same_as_greedy=%d\n", names[mode],
                rounds, acc, same);
        CHECK(same);
    }
    testmodel_destroy(m);
    tpool_destroy(tp);
    return test_result();
}
