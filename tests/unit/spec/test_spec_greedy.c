/* Speculative decoding at temperature 0 on tiny checkpoints with an MTP head: the tokens equal
 * plain one-token greedy decoding over 200 tokens for K = 1..4 (MTP drafts) and with a
 * repetition penalty; oracle drafts (the plain greedy sequence with controlled corruptions)
 * make every round accept exactly the intended number of drafts (all, some, none, random), and
 * afterwards the sequence state (GDN conv windows, recurrent S, attention K/V) equals the state
 * of plain decoding of the same tokens bit for bit (rollback is exact). A "self head" built
 * from the main model's own weights (fc = [identity | small noise], the MTP layer's output
 * projections zeroed, mtp.norm = the final norm: it drafts what the model would say from the last
 * token alone) gets drafts accepted, and the MTP K/V the rounds leave behind equals one MTP pass
 * over the whole committed sequence (MODEL.md 6.4: every committed position, shifted tokens). */
#include "common/tpool.h"
#include "model/forward.h"
#include "model/model_load.h"
#include "model/mtp.h"
#include "model/spec.h"
#include "model/state.h"
#include "spec_util.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NP = 12, NG = 200, CHUNK = 12 };

static struct tpool *tp;

enum oracle_mode { OR_ALL, OR_NONE, OR_SOME, OR_RANDOM, OR_COUNT };
static const char *const or_names[] = {"accept-all", "reject-all", "accept-some", "random"};

struct oracle {
    const int32_t *ref; // plain greedy tokens (NG)
    int V;
    enum oracle_mode mode;
    int round;
    uint64_t rs; // corruption randomness
    int expect;  // emitted tokens the drafts imply (-1: unknown near the end)
};

static int oracle_draft(void *user, const int32_t *seq, int n_seq, int k, int32_t *drafts)
{
    (void)seq;
    struct oracle *o = user;
    const int g = n_seq - NP; // generated so far; drafts target ref[g .. g+k)
    int first_bad = k;
    for (int j = 0; j < k; j++) {
        const int32_t right = g + j < NG ? o->ref[g + j] : 0;
        int bad = 0;
        if (o->mode == OR_NONE)
            bad = j == 0;
        else if (o->mode == OR_SOME)
            bad = j == o->round % k;
        else if (o->mode == OR_RANDOM) {
            o->rs = o->rs * 6364136223846793005ull + 1442695040888963407ull;
            bad = (o->rs >> 33) % 10 < 3;
        }
        drafts[j] = bad ? (right + 1 + (int32_t)(o->rs >> 40) % (o->V - 1)) % o->V : right;
        if (bad && first_bad == k)
            first_bad = j;
    }
    o->expect = g + k < NG ? first_bad + 1 : -1;
    o->round++;
    return 0;
}

/* The state after plain decoding of seq[0..n_run) (prefill NP in one chunk, then one by one). */
static struct seq_state *plain_state(const struct model *m, const int32_t *seq, int n_run, int ctx)
{
    struct forward_ctx *fc = forward_ctx_create(m, CHUNK, ctx, tp);
    struct seq_state *st = seq_state_create(m, ctx);
    CHECK_EQ_INT(forward_run(fc, m, st, seq, NP, NULL, NULL, 0), 0);
    for (int i = NP; i < n_run; i++)
        CHECK_EQ_INT(forward_run(fc, m, st, &seq[i], 1, NULL, NULL, 0), 0);
    forward_ctx_destroy(fc);
    return st;
}

/* max|a-b| / max|b| */
static double rel_err_f(const float *a, const float *b, int64_t n)
{
    double md = 0.0, mb = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        const double dd = fabs((double)a[i] - (double)b[i]);
        md = dd > md || dd != dd ? (dd != dd ? INFINITY : dd) : md;
        mb = fabs((double)b[i]) > mb ? fabs((double)b[i]) : mb;
    }
    return md / mb;
}

static int same_floats(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

static void oracle_run(const struct model *m, const int32_t *prompt, const int32_t *ref,
                       enum oracle_mode mode, int k)
{
    const int ctx = NP + NG + k + 2, V = m->cfg.vocab_size;
    struct oracle orc = {ref, V, mode, 0, 99 + (uint64_t)k, 0};
    struct spec_dec_opts o;
    spec_dec_opts_default(&o);
    o.k = k;
    o.sp.temperature = 0.0f;
    o.prefill_chunk = CHUNK;
    o.draft = oracle_draft;
    o.draft_user = &orc;
    struct forward_ctx *fc = forward_ctx_create(m, CHUNK, ctx, tp);
    struct seq_state *st = seq_state_create(m, ctx);
    struct spec_dec *d = spec_dec_create(m, fc, st, &o, ctx);
    CHECK(d != NULL);
    if (!d)
        return;
    struct sample_rng rng;
    sample_rng_seed(&rng, 1);
    int32_t gen[NG + FORWARD_SPEC_MAX + 1], out[FORWARD_SPEC_MAX + 1], first = -1;
    int n = 0, bad_rounds = 0;
    CHECK_EQ_INT(spec_dec_prefill(d, prompt, NP, &rng, &first), 0);
    gen[n++] = first;
    while (n < NG) {
        const int r = spec_dec_step(d, &rng, out);
        CHECK(r >= 1 && r <= k + 1);
        if (r < 1)
            break;
        if (orc.expect >= 0 && r != orc.expect)
            bad_rounds++;
        for (int j = 0; j < r; j++)
            gen[n++] = out[j];
    }
    const struct spec_stats *s = spec_dec_stats(d);
    char line[512];
    spec_stats_format(s, line, sizeof(line));
    fprintf(stderr, "oracle=%s k=%d same_as_greedy=%d bad_rounds=%d %s\n", or_names[mode], k,
            memcmp(gen, ref, sizeof(int32_t) * NG) == 0, bad_rounds, line);
    CHECK(memcmp(gen, ref, sizeof(int32_t) * NG) == 0);
    CHECK_EQ_INT(bad_rounds, 0);
    if (mode == OR_ALL)
        CHECK(s->accepted >= s->drafted - k); // only the last round may run past the reference
    if (mode == OR_NONE)
        CHECK_EQ_INT(s->accepted, 0);
    if (mode == OR_SOME || mode == OR_RANDOM)
        CHECK(s->accepted > 0 && s->accepted < s->drafted);
    CHECK_EQ_INT(s->emitted, n - 1);

    // rollback is exact: the state equals plain decoding of the committed tokens
    int n_seq = 0;
    const int32_t *seq = spec_dec_tokens(d, &n_seq);
    CHECK_EQ_INT(n_seq, NP + n);
    CHECK_EQ_INT(st->pos, n_seq - 1);
    struct seq_state *ps = plain_state(m, seq, n_seq - 1, ctx);
    int same = ps->pos == st->pos;
    for (int l = 0; l < st->n_layers; l++) {
        if (st->ssm[l]) {
            same &= same_floats(st->ssm[l], ps->ssm[l], st->ssm_floats);
            same &= same_floats(st->conv[l], ps->conv[l], (int64_t)st->conv_rows * st->conv_dim);
        } else {
            same &= same_floats(st->k[l], ps->k[l], (int64_t)st->pos * st->kv_width);
            same &= same_floats(st->v[l], ps->v[l], (int64_t)st->pos * st->kv_width);
        }
    }
    CHECK(same);
    seq_state_destroy(ps);
    spec_dec_destroy(d);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
}

struct trng {
    uint64_t s;
};

static double trng_uniform(struct trng *r)
{
    r->s = r->s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(r->s >> 11) * (1.0 / 9007199254740992.0);
}

static struct qweight zeros_w(int64_t rows, int64_t cols, float **keep)
{
    struct qweight w;
    memset(&w, 0, sizeof(w));
    w.fmt = QW_F32;
    w.rows = rows;
    w.cols = cols;
    w.row_stride = cols;
    *keep = calloc((size_t)(rows * cols), sizeof(float));
    w.data = *keep;
    return w;
}

/* Replace m's MTP head by the self head; the buffers go to keep[] (freed by the caller). */
static int self_head(struct model *m, float **keep, struct qweight **experts)
{
    const struct model_config *c = &m->cfg;
    const int H = c->hidden_size, E = c->n_experts;
    struct mtp_w *h = &m->mtp;
    int n = 0;
    h->fc = zeros_w(H, 2 * H, &keep[n]);
    struct trng r = {5};
    for (int i = 0; i < H; i++) {
        keep[n][(int64_t)i * 2 * H + i] = 1.0f; // x = RMSNorm(embedding) + a little hidden
        for (int j = 0; j < H; j++)
            keep[n][(int64_t)i * 2 * H + H + j] = 0.02f * (float)(trng_uniform(&r) - 0.5);
    }
    n++;
    h->pre_fc_norm_embedding = keep[n++] = calloc((size_t)H, sizeof(float));
    h->norm = m->final_norm;
    h->layer.attn.o = zeros_w(H, h->layer.attn.o.cols, &keep[n++]);
    h->layer.moe.sh_down = zeros_w(H, h->layer.moe.sh_down.cols, &keep[n++]);
    *experts = calloc((size_t)E, sizeof(struct qweight));
    for (int e = 0; e < E; e++)
        (*experts)[e] = zeros_w(H, h->layer.moe.down[e].cols, &keep[n++]);
    h->layer.moe.down = *experts;
    return n;
}

/* MTP drafts with K/V check: after NG tokens the MTP K/V of every position the rounds have
 * covered equals one MTP pass over the committed sequence with the plain hidden states. */
static void mtp_kv_run(const struct model *m, const int32_t *prompt, const int32_t *ref, int k,
                       const char *name, int want_accepts, int chunk)
{
    const int ctx = NP + NG + k + 2, H = m->cfg.hidden_size;
    struct spec_dec_opts o;
    spec_dec_opts_default(&o);
    o.k = k;
    o.sp.temperature = 0.0f;
    o.prefill_chunk = chunk;
    struct forward_ctx *fc = forward_ctx_create(m, CHUNK, ctx, tp);
    struct seq_state *st = seq_state_create(m, ctx);
    struct spec_dec *d = spec_dec_create(m, fc, st, &o, ctx);
    CHECK(d != NULL);
    if (!d)
        return;
    struct sample_rng rng;
    sample_rng_seed(&rng, 1);
    int32_t gen[NG + FORWARD_SPEC_MAX + 1], out[FORWARD_SPEC_MAX + 1];
    int n = 0, covered = 0;
    CHECK_EQ_INT(spec_dec_prefill(d, prompt, NP, &rng, &gen[n++]), 0);
    while (n < NG) {
        covered = st->pos; // the next round's first MTP pass covers positions < pos
        const int r = spec_dec_step(d, &rng, out);
        CHECK(r >= 1);
        if (r < 1)
            break;
        for (int j = 0; j < r; j++)
            gen[n++] = out[j];
    }
    const struct spec_stats *s = spec_dec_stats(d);
    char line[512];
    spec_stats_format(s, line, sizeof(line));
    const int same = memcmp(gen, ref, sizeof(int32_t) * NG) == 0;
    fprintf(stderr, "%s k=%d prefill_chunk=%d same_as_greedy=%d %s\n", name, k, chunk, same, line);
    CHECK(same);
    if (want_accepts)
        CHECK(s->accepted > 0);

    // one MTP pass over positions 0..covered-1 from plain hidden states
    int n_seq = 0;
    const int32_t *seq = spec_dec_tokens(d, &n_seq);
    struct forward_ctx *f2 = forward_ctx_create(m, ctx, ctx, tp);
    struct seq_state *s2 = seq_state_create(m, ctx);
    float *hid = malloc(sizeof(float) * (size_t)ctx * (size_t)H);
    CHECK_EQ_INT(forward_run(f2, m, s2, seq, covered, NULL, hid, 0), 0);
    CHECK_EQ_INT(mtp_run(f2, m, s2, seq + 1, hid, 0, covered, NULL, NULL, 0), 0);
    const int64_t nkv = (int64_t)covered * st->kv_width;
    const double ek = rel_err_f(st->mtp_k, s2->mtp_k, nkv),
                 ev = rel_err_f(st->mtp_v, s2->mtp_v, nkv);
    fprintf(stderr, "%s mtp kv over %d positions: rel err k %.3g v %.3g\n", name, covered, ek, ev);
    CHECK(ek < 1e-4 && ev < 1e-4);
    free(hid);
    seq_state_destroy(s2);
    forward_ctx_destroy(f2);
    spec_dec_destroy(d);
    seq_state_destroy(st);
    forward_ctx_destroy(fc);
}

int main(void)
{
    char dir[1024], sub[1100];
    if (su_tmpdir(dir, sizeof(dir)) < 0)
        TEST_SKIP("no temp dir");
    tp = tpool_create(2);
    snprintf(sub, sizeof(sub), "%s/a", dir);
    struct model *m = su_tiny(sub, 11, 1, "LFLLF", 0);
    CHECK(m != NULL && m->has_mtp);
    if (!m || !m->has_mtp) {
        su_rmdir(dir);
        return test_result();
    }
    const int V = m->cfg.vocab_size;
    int32_t prompt[NP], ref[NG], gen[NG];
    for (int i = 0; i < NP; i++)
        prompt[i] = (int32_t)((i * 131 + 17) % V);
    struct sample_params sp;
    sample_params_default(&sp);
    sp.temperature = 0.0f;
    CHECK_EQ_INT(su_plain(m, tp, prompt, NP, CHUNK, &sp, 1, NG, ref), 0);
    int distinct = 0;
    for (int i = 0; i < NG; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = ref[j] == ref[i];
        distinct += !seen;
    }
    fprintf(stderr, "reference: %d tokens, %d distinct\n", NG, distinct);
    CHECK(distinct >= 5); // not a degenerate constant sequence

    // MTP drafts, K = 1..4
    for (int k = 1; k <= 4; k++) {
        struct spec_dec_opts o;
        spec_dec_opts_default(&o);
        o.k = k;
        o.sp = sp;
        o.prefill_chunk = CHUNK;
        struct spec_stats s;
        memset(gen, 0xff, sizeof(gen));
        CHECK_EQ_INT(su_spec(m, tp, prompt, NP, &o, 1, NG, gen, &s), 0);
        char line[512];
        spec_stats_format(&s, line, sizeof(line));
        const int same = memcmp(gen, ref, sizeof(gen)) == 0;
        fprintf(stderr, "mtp k=%d same_as_greedy=%d %s\n", k, same, line);
        CHECK(same);
        CHECK_EQ_INT(s.drafted, s.rounds * k);
    }

    // greedy with a repetition penalty: the penalties see the drafts as history
    {
        struct sample_params pp = sp;
        pp.repetition_penalty = 1.5f;
        pp.frequency_penalty = 0.2f;
        int32_t pref[NG];
        CHECK_EQ_INT(su_plain(m, tp, prompt, NP, CHUNK, &pp, 1, NG, pref), 0);
        struct spec_dec_opts o;
        spec_dec_opts_default(&o);
        o.k = 3;
        o.sp = pp;
        o.prefill_chunk = CHUNK;
        CHECK_EQ_INT(su_spec(m, tp, prompt, NP, &o, 1, NG, gen, NULL), 0);
        const int same = memcmp(gen, pref, sizeof(gen)) == 0;
        fprintf(stderr, "mtp k=3 penalties same_as_greedy=%d differs_from_unpenalised=%d\n", same,
                memcmp(pref, ref, sizeof(ref)) != 0);
        CHECK(same);
    }

    // oracle drafts: every acceptance pattern, exact rollback
    for (int mode = OR_ALL; mode < OR_COUNT; mode++)
        oracle_run(m, prompt, ref, (enum oracle_mode)mode, 3);
    oracle_run(m, prompt, ref, OR_RANDOM, 4);
    oracle_run(m, prompt, ref, OR_SOME, 2);
    oracle_run(m, prompt, ref, OR_ALL, 1);

    // MTP K/V of every committed position, with the random head and with the self head
    mtp_kv_run(m, prompt, ref, 3, "mtp", 0, CHUNK);
    float *keep[64] = {0};
    struct qweight *experts = NULL;
    const int nkeep = self_head(m, keep, &experts);
    for (int k = 1; k <= 4; k++)
        mtp_kv_run(m, prompt, ref, k, "selfhead", 1, CHUNK);
    // chunked prefill (5 + 5 + 2): the chunks' last positions get their MTP K/V later
    int32_t ref5[NG];
    CHECK_EQ_INT(su_plain(m, tp, prompt, NP, 5, &sp, 1, NG, ref5), 0);
    mtp_kv_run(m, prompt, ref5, 3, "selfhead", 1, 5);
    model_destroy(m);
    for (int i = 0; i < nkeep; i++)
        free(keep[i]);
    free(experts);
    tpool_destroy(tp);
    su_rmdir(dir);
    return test_result();
}
