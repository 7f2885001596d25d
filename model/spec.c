/* spec: MTP speculative decoding on the CPU (see model/spec.h). */
#include "model/spec.h"

#include "common/err.h"
#include "common/xalloc.h"
#include "forward_internal.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/mtp.h"
#include "model/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- startup decision ----

int64_t spec_head_bytes(const struct model *m)
{
    if (!m->has_mtp)
        return 0;
    const struct model_config *c = &m->cfg;
    const struct layer_w *l = &m->mtp.layer;
    const struct moe_w *e = &l->moe;
    int64_t n = qweight_bytes(&m->mtp.fc);
    n += qweight_bytes(&l->attn.q) + qweight_bytes(&l->attn.k) + qweight_bytes(&l->attn.v) +
         qweight_bytes(&l->attn.o);
    n += qweight_bytes(&e->router) + qweight_bytes(&e->sh_gate) + qweight_bytes(&e->sh_up) +
         qweight_bytes(&e->sh_down) + qweight_bytes(&e->sh_expert_gate);
    for (int x = 0; e->gate && x < c->n_experts; x++)
        n += qweight_bytes(&e->gate[x]) + qweight_bytes(&e->up[x]) + qweight_bytes(&e->down[x]);
    // fp32 vectors: three head norms, the layer's two norms, q_norm and k_norm
    n += (int64_t)sizeof(float) * (5 * (int64_t)c->hidden_size + 2 * (int64_t)c->head_dim);
    return n;
}

int spec_configure(const struct model *m, int requested_k, int *k_out, char *msg, size_t len)
{
    const int declared = m->cfg.mtp_n_layers;
    *k_out = 0;
    if (requested_k < -1 || requested_k > FORWARD_SPEC_MAX) {
        snprintf(msg, len, "speculative tokens %d out of range [0, %d]", requested_k,
                 FORWARD_SPEC_MAX);
        return ERR_INVAL;
    }
    if (m->has_mtp) {
        const int64_t b = spec_head_bytes(m);
        if (requested_k == 0) {
            snprintf(msg, len,
                     "MTP head present (%lld bytes resident); speculative decoding off "
                     "(speculative tokens 0)",
                     (long long)b);
            return 0;
        }
        *k_out = requested_k < 0 ? SPEC_DEFAULT_K : requested_k;
        snprintf(msg, len,
                 "speculative decoding on: MTP head present (%lld bytes resident), K=%d draft "
                 "tokens per round",
                 (long long)b, *k_out);
        return 0;
    }
    if (declared > 0) {
        char why[96] = "";
        if (requested_k > 0)
            snprintf(why, sizeof(why), ", so %d speculative tokens cannot be used", requested_k);
        snprintf(msg, len,
                 "config declares %d MTP layer%s (mtp_num_hidden_layers) but the checkpoint has "
                 "no mtp.* tensors: speculative decoding is off%s",
                 declared, declared == 1 ? "" : "s", why);
        return requested_k > 0 ? ERR_UNSUPPORTED : 0;
    }
    if (requested_k > 0) {
        snprintf(msg, len,
                 "the model declares no MTP layer (mtp_num_hidden_layers = 0) and has no MTP "
                 "head: speculative decoding with %d tokens is unavailable",
                 requested_k);
        return ERR_UNSUPPORTED;
    }
    snprintf(msg, len, "no MTP head (mtp_num_hidden_layers = 0): speculative decoding is off");
    return 0;
}

// ---- counters ----

void spec_stats_reset(struct spec_stats *s, int k)
{
    memset(s, 0, sizeof(*s));
    s->k = k;
}

void spec_stats_add(struct spec_stats *s, int a)
{
    s->rounds++;
    s->drafted += s->k;
    s->accepted += a;
    s->emitted += a + 1;
    for (int i = 0; i < a && i < FORWARD_SPEC_MAX; i++)
        s->accepted_at[i]++;
}

double spec_stats_acceptance(const struct spec_stats *s)
{
    return s->drafted ? (double)s->accepted / (double)s->drafted : 0.0;
}

double spec_stats_acceptance_at(const struct spec_stats *s, int i)
{
    if (i < 0 || i >= FORWARD_SPEC_MAX || !s->rounds)
        return 0.0;
    return (double)s->accepted_at[i] / (double)s->rounds;
}

double spec_stats_mean_len(const struct spec_stats *s)
{
    return s->rounds ? 1.0 + (double)s->accepted / (double)s->rounds : 0.0;
}

int spec_stats_format(const struct spec_stats *s, char *buf, size_t len)
{
    char at[FORWARD_SPEC_MAX * 8 + 1] = "";
    size_t o = 0;
    for (int i = 0; i < s->k && i < FORWARD_SPEC_MAX; i++)
        o += (size_t)snprintf(at + o, sizeof(at) - o, "%s%.3f", i ? "," : "",
                              spec_stats_acceptance_at(s, i));
    return snprintf(buf, len,
                    "spec_k=%d spec_rounds=%lld spec_drafted=%lld spec_accepted=%lld "
                    "spec_emitted=%lld spec_acceptance=%.4f spec_mean_len=%.3f spec_accept_at=%s",
                    s->k, (long long)s->rounds, (long long)s->drafted, (long long)s->accepted,
                    (long long)s->emitted, spec_stats_acceptance(s), spec_stats_mean_len(s),
                    s->k > 0 ? at : "-");
}

// ---- acceptance ----

/* A draw from probs (n, not necessarily normalised, total mass sum > 0). */
static int32_t draw(const float *probs, int n, double sum, struct sample_rng *rng)
{
    const double u = sample_rng_uniform(rng) * sum;
    double cum = 0.0;
    int32_t last = -1;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f)
            continue;
        cum += (double)probs[i];
        last = i;
        if (u < cum)
            return i;
    }
    return last; // rounding left cum just below sum
}

/* The hook's emit for row i's token: 0 go on, 1 the sequence ended (the round returns i + 1),
 * < 0 an error. */
static int emitted(const struct spec_hook *h, int i, int32_t t)
{
    return h && h->emit ? h->emit(h->user, i, t) : 0;
}

int spec_accept_hooked(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                       int n_vocab, const int32_t *drafts, int k, const int32_t *hist, int n_hist,
                       struct sample_rng *rng, float *probs, int32_t *out,
                       const struct spec_hook *hook)
{
    if (k < 0 || k > FORWARD_SPEC_MAX)
        return ERR_INVAL;
    const int greedy = p->temperature <= 0.0f;
    struct sample_params pr = *p; /* row i's params (the hook's) */
    int rc;
    for (int i = 0; i < k; i++) {
        const float *row = logits + (int64_t)i * n_vocab;
        const int32_t d = drafts[i];
        if (hook && hook->row && (rc = hook->row(hook->user, i, &pr)) < 0)
            return rc;
        if (greedy) {
            const int32_t t = sample_token(sc, &pr, row, hist, n_hist + i, rng);
            if (t < 0)
                return t;
            out[i] = t;
            if ((rc = emitted(hook, i, t)) < 0)
                return rc;
            if (t != d || rc > 0)
                return i + 1;
            continue;
        }
        rc = sample_probs(sc, &pr, row, hist, n_hist + i, probs);
        if (rc < 0)
            return rc;
        const int valid = d >= 0 && d < n_vocab;
        const double u = sample_rng_uniform(rng);
        if (valid && u < (double)probs[d]) {
            out[i] = d;
            if ((rc = emitted(hook, i, d)) < 0)
                return rc;
            if (rc > 0)
                return i + 1;
            continue;
        }
        // recovered token: P_{i-1} without d, renormalised
        if (valid)
            probs[d] = 0.0f;
        double sum = 0.0;
        for (int j = 0; j < n_vocab; j++)
            sum += (double)probs[j];
        out[i] = sum > 0.0 ? draw(probs, n_vocab, sum, rng) : d;
        if ((rc = emitted(hook, i, out[i])) < 0)
            return rc;
        return i + 1;
    }
    // all accepted: the bonus token from P_k, exactly as plain sampling draws it
    if (hook && hook->row && (rc = hook->row(hook->user, k, &pr)) < 0)
        return rc;
    const int32_t t = sample_token(sc, &pr, logits + (int64_t)k * n_vocab, hist, n_hist + k, rng);
    if (t < 0)
        return t;
    out[k] = t;
    if ((rc = emitted(hook, k, t)) < 0)
        return rc;
    return k + 1;
}

int spec_accept(struct sample_ctx *sc, const struct sample_params *p, const float *logits,
                int n_vocab, const int32_t *drafts, int k, const int32_t *hist, int n_hist,
                struct sample_rng *rng, float *probs, int32_t *out)
{
    return spec_accept_hooked(sc, p, logits, n_vocab, drafts, k, hist, n_hist, rng, probs, out,
                              NULL);
}

// ---- the CPU driver ----

struct spec_dec {
    const struct model *m;
    struct forward_ctx *fc; // borrowed
    struct seq_state *st;   // borrowed
    struct spec_dec_opts o;
    struct seq_snapshot *sn;
    struct sample_ctx *sc;
    int use_mtp;
    int started; // the first token has been sampled
    int seq_max;
    int n_seq;
    int32_t *seq;   // (seq_max + k) committed tokens, then room for the drafts
    float *lg;      // (max(k+1, chunk), V) logits
    float *probs;   // (V)
    float *hwin;    // (max(k+1, chunk), H) hidden states of a forward call
    float *mtp_hid; // (k+1, H) MTP input of the next round
    float *hbuf;    // (k+1, H) MTP scratch
    int32_t mtp_tok[FORWARD_SPEC_MAX + 1];
    int mtp_pos0, mtp_n;
    struct spec_stats stats;
};

void spec_dec_opts_default(struct spec_dec_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->k = SPEC_DEFAULT_K;
    sample_params_default(&o->sp);
}

void spec_dec_destroy(struct spec_dec *d)
{
    if (!d)
        return;
    seq_snapshot_destroy(d->sn);
    sample_ctx_destroy(d->sc);
    free(d->seq);
    free(d->lg);
    free(d->probs);
    free(d->hwin);
    free(d->mtp_hid);
    free(d->hbuf);
    free(d);
}

/* rows of a forward call: the verify window or a prefill chunk */
static int dec_rows(const struct spec_dec *d)
{
    const int chunk = d->o.prefill_chunk;
    return chunk > d->o.k + 1 ? chunk : d->o.k + 1;
}

struct spec_dec *spec_dec_create(const struct model *m, struct forward_ctx *fc,
                                 struct seq_state *st, const struct spec_dec_opts *o, int seq_max)
{
    const int V = m->cfg.vocab_size, H = m->cfg.hidden_size;
    if (o->k < 1 || o->k > FORWARD_SPEC_MAX || seq_max < 1 || o->prefill_chunk < 0 ||
        o->k + 1 > fc->n_tok_max || o->prefill_chunk > fc->n_tok_max)
        return NULL;
    if (!o->draft && (!m->has_mtp || !st->mtp_k))
        return NULL;
    struct spec_dec *d = xcalloc(1, sizeof(*d));
    d->m = m;
    d->fc = fc;
    d->st = st;
    d->o = *o;
    if (!d->o.prefill_chunk)
        d->o.prefill_chunk = fc->n_tok_max;
    d->use_mtp = o->draft == NULL;
    d->seq_max = seq_max;
    spec_stats_reset(&d->stats, o->k);
    const int64_t rows = dec_rows(d);
    d->sn = seq_snapshot_create(st);
    d->sc = sample_ctx_create(V);
    d->seq = malloc(sizeof(int32_t) * (size_t)(seq_max + o->k));
    d->lg = malloc(sizeof(float) * (size_t)(rows * V));
    d->probs = malloc(sizeof(float) * (size_t)V);
    d->hwin = malloc(sizeof(float) * (size_t)(rows * H));
    d->mtp_hid = malloc(sizeof(float) * (size_t)((o->k + 1) * H));
    d->hbuf = malloc(sizeof(float) * (size_t)((o->k + 1) * H));
    if (!d->sn || !d->sc || !d->seq || !d->lg || !d->probs || !d->hwin || !d->mtp_hid || !d->hbuf) {
        spec_dec_destroy(d);
        return NULL;
    }
    return d;
}

int spec_dec_feed(struct spec_dec *d, const int32_t *tokens, int n)
{
    const struct model *m = d->m;
    const int H = m->cfg.hidden_size;
    const int p = d->n_seq;
    if (d->started || n < 1 || n > d->o.prefill_chunk || p + n + 1 > d->seq_max)
        return ERR_INVAL;
    if (d->st->pos != p)
        return ERR_STATE;
    int rc = forward_run(d->fc, m, d->st, tokens, n, d->lg, d->hwin, d->o.prefill_flags);
    if (rc < 0)
        return rc;
    memcpy(d->seq + p, tokens, sizeof(int32_t) * (size_t)n);
    d->n_seq = p + n;
    if (d->use_mtp) {
        // MTP K/V of the positions whose next token is now known: the previous chunk's last
        // (waiting in mtp_hid) and this chunk's all but its last
        if (p > 0)
            rc = mtp_run(d->fc, m, d->st, tokens, d->mtp_hid, p - 1, 1, NULL, NULL, 0);
        if (rc == 0 && n > 1)
            rc = mtp_run(d->fc, m, d->st, tokens + 1, d->hwin, p, n - 1, NULL, NULL, 0);
    }
    // the last position waits for its next token
    memcpy(d->mtp_hid, d->hwin + (int64_t)(n - 1) * H, sizeof(float) * (size_t)H);
    return rc;
}

int spec_dec_start(struct spec_dec *d, struct sample_rng *rng, int32_t *first)
{
    const int n = d->n_seq;
    if (d->started || n < 1)
        return ERR_STATE;
    const int32_t t = sample_token(d->sc, &d->o.sp, d->lg, d->seq, n, rng);
    if (t < 0)
        return t;
    d->seq[n] = t;
    d->n_seq = n + 1;
    d->started = 1;
    // the first round's MTP pass: (x_n, h_final[n-1]) at position n-1 (hidden in mtp_hid)
    d->mtp_tok[0] = t;
    d->mtp_pos0 = n - 1;
    d->mtp_n = 1;
    *first = t;
    return 0;
}

int spec_dec_prefill(struct spec_dec *d, const int32_t *prompt, int n, struct sample_rng *rng,
                     int32_t *first)
{
    const int chunk = d->o.prefill_chunk;
    if (n < 1 || d->n_seq != 0)
        return ERR_INVAL;
    int rc = 0;
    for (int p = 0; rc == 0 && p < n; p += chunk)
        rc = spec_dec_feed(d, prompt + p, n - p < chunk ? n - p : chunk);
    return rc < 0 ? rc : spec_dec_start(d, rng, first);
}

int spec_dec_step(struct spec_dec *d, struct sample_rng *rng, int32_t *out)
{
    const struct model *m = d->m;
    const int V = m->cfg.vocab_size, H = m->cfg.hidden_size, k = d->o.k;
    const int n = d->n_seq, pos = d->st->pos;
    int32_t drafts[FORWARD_SPEC_MAX];
    if (!d->started || pos != n - 1)
        return ERR_STATE;
    if (pos + k + 1 > d->st->tokens_max || n + k > d->seq_max)
        return ERR_FULL;
    int rc;
    if (d->use_mtp)
        rc = mtp_draft_greedy(d->fc, m, d->st, d->mtp_tok, d->mtp_hid, d->mtp_pos0, d->mtp_n, k,
                              d->lg, d->hbuf, drafts);
    else
        rc = d->o.draft(d->o.draft_user, d->seq, n, k, drafts);
    if (rc < 0)
        return rc;
    const int32_t x = d->seq[n - 1];
    memcpy(d->seq + n, drafts, sizeof(int32_t) * (size_t)k);
    // the window with the per-token GDN recurrence: bitwise the one-token decode steps
    rc = forward_spec_window(d->fc, m, d->st, d->sn, x, drafts, k, d->lg, d->hwin,
                             FORWARD_GDN_RECURRENT);
    if (rc < 0)
        return rc;
    spec_accept_fn acc = d->o.accept ? d->o.accept : spec_accept;
    const int r = acc(d->sc, &d->o.sp, d->lg, V, drafts, k, d->seq, n, rng, d->probs, out);
    if (r < 1 || r > k + 1) {
        // put the state back where it was: nothing of the window is committed
        int rr = seq_state_restore(d->st, d->sn);
        return r < 0 ? r : (rr < 0 ? rr : ERR_STATE);
    }
    rc = forward_spec_commit(d->fc, m, d->st, d->sn, x, drafts, k, r - 1, FORWARD_GDN_RECURRENT);
    if (rc < 0)
        return rc;
    memcpy(d->seq + n, out, sizeof(int32_t) * (size_t)r);
    d->n_seq = n + r;
    // next round's MTP pass: window positions pos..pos+r-1 with the token after each
    memcpy(d->mtp_tok, out, sizeof(int32_t) * (size_t)r);
    memcpy(d->mtp_hid, d->hwin, sizeof(float) * (size_t)r * (size_t)H);
    d->mtp_pos0 = pos;
    d->mtp_n = r;
    spec_stats_add(&d->stats, r - 1);
    return r;
}

const struct spec_stats *spec_dec_stats(const struct spec_dec *d)
{
    return &d->stats;
}

const int32_t *spec_dec_tokens(const struct spec_dec *d, int *n)
{
    *n = d->n_seq;
    return d->seq;
}
